#!/bin/bash
# h200-compare.sh: one device session that measures every GPU criterion of the open issues,
# minfer beside llama.cpp on the same files in one run (../shared/bench/compare.sh's method,
# extended: pp4096, the nt curves, Q3_K_M/IQ4_XS decode, speculative serving, the
# drafter bed) and runs the CUDA test binary while llama.cpp builds.
#
# Here (no GPU), from the repository root, put what the run needs into two folders, each under
# the device's carry limit:
#   scripts/h200-compare.sh pack      # .dev/cmp: minfer, llama.cpp source, loadgen, this script
#                                     #   and the trained target in Q8_0 (the drafter bed's)
#                                     # .dev/cmpt: cuda.test, the test models, the trained pair
# On the GPU machine, three calls back to back (an idle machine is taken back after 30 s):
#   bash .dev/cmp/h200-compare.sh stash      # (carry .dev/cmp) copies it to /tmp/h2c
#   bash .dev/cmpt/h200-compare.sh start     # (carry .dev/cmpt) copies it, starts the run detached
#   bash /tmp/h2c/h200-compare.sh wait 280   # repeat until "ALL DONE"; logs land in $OUT each time
# Back here: tar xzf the last h2c-logs.tgz into DIR, then scripts/h200-compare.sh summary DIR.
# While llama.cpp builds (13 of the 16 cores) the GPU runs the CUDA tests. After the build, on
# a quiet host, minfer's speculation rows and the drafter bed (ratios of minfer to itself),
# then everything that is divided by a llama.cpp figure, the two engines alternating;
# minfer's serving rows at 1-32 clients come last.
set -u
W=/tmp/h2c; L=$W/logs; M=$W/m; LB=$W/llama.cpp/build/bin; MF=$W/minfer
export MINFER_CACHE_DIR=$W/kcache
stage() { echo "$(date +%T) $*" >> $L/progress.txt; }
up() { for i in $(seq 1 480); do curl -sf 127.0.0.1:$1/health >/dev/null && return; sleep 0.5; done; }

synth() {
  $MF synth --preset qwen2.5-0.5b --type q4_k_m --n-vocab 152064 --seed 3 -o $M/d05-q4km.gguf > $L/synth.log 2>&1
  $MF synth --preset qwen2.5-7b --type q4_k_m --seed 3 -o $M/t7-q4km.gguf >> $L/synth.log 2>&1
  stage "synth pair rc=$?"
  $MF synth --preset qwen2.5-0.5b --type q8_0 --seed 5 --fast -o $M/s05-q8.gguf >> $L/synth.log 2>&1
  $MF synth --preset qwen2.5-7b --type q4_0 --seed 5 --fast -o $M/s7-q40.gguf >> $L/synth.log 2>&1
  $MF synth --preset qwen2.5-7b --type q8_0 --seed 5 --fast -o $M/s7-q8.gguf >> $L/synth.log 2>&1
  for t in q3_k_m iq4_xs; do
    $MF synth --preset qwen2.5-7b --type $t --seed 5 --fast -o $M/s7-$t.gguf >> $L/synth.log 2>&1 || rm -f $M/s7-$t.gguf
  done
  stage "synth rest rc=$?"
}

build() {
  cd $W && tar xJf $W/llama.cpp-d32676d7.tar.xz && \
  cmake -S llama.cpp -B llama.cpp/build -G Ninja -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF > $L/build.log 2>&1 && \
  cmake --build llama.cpp/build -j 13 --target llama-bench llama-server >> $L/build.log 2>&1
  stage "build rc=$?"
}

# serve NAME PORT CLIENTS REQUESTS -- server command...: one loadgen row into serve.jsonl.
serve() {
  local name=$1 port=$2 c=$3 r=$4; shift 5
  "$@" > $L/serve-$name.log 2>&1 & local p=$!; up $port
  python3 $W/loadgen.py --port $port --clients $c --requests $r --max-tokens 128 --label "$name" \
    --extra '{"ignore_eos": true}' >> $L/serve.jsonl 2>>$L/err.log
  # minfer's batch metrics (sequences a forward, draft forwards): metrics.txt, a line each
  curl -sf 127.0.0.1:$port/metrics 2>/dev/null | grep -E '^minfer_(batch_sequences|batch_rows|forward_seconds|spec_rounds)' \
    | sed "s/^/$name /" >> $L/metrics.txt
  kill $p; wait $p 2>/dev/null
}

# During the build: the CUDA tests (TestCompileAllArchs runs without a GPU:
# scripts/nvrtc-check.sh) and the quant-types files' greedy texts.
during_build() {
  (cd $W/t && MINFER_TESTDATA=$W/t/td timeout 400 ./cuda.test -test.v -test.timeout 380s \
     -test.skip '^(TestBenchModel|TestCompileAllArchs)$' > $L/cuda-test.log 2>&1; echo "rc=$?" >> $L/cuda-test.log)
  stage "cuda tests $(tail -1 $L/cuda-test.log) $(grep -c -- '--- FAIL' $L/cuda-test.log) failed"
  if [ -d $W/q/td ]; then # the quant-types files, when a call stashed them there (too big for .dev/cmpt)
    (cd $W/t && MINFER_TESTDATA=$W/q/td timeout 200 ./cuda.test -test.v -test.run '^TestQuantTypesGreedyGPU$' \
       > $L/cuda-quant-types.log 2>&1; echo "rc=$?" >> $L/cuda-quant-types.log)
    stage "quant-types greedy $(tail -1 $L/cuda-quant-types.log)"
  fi
}

# Right after the build, on a quiet host (the build's 13 cores had inflated the host-side
# figures: plugin µs a round, the draft step's host round trips): minfer's speculation rows
# and the drafter bed, whose criteria are ratios of minfer to itself.
after_build() {
  $MF specbench -m $M/t7-q4km.gguf --draft $M/d05-q4km.gguf --device cuda --depths 0,1,2,3,4,6,8,auto \
    --curve-rows 64 -n 128 -r 2 --json > $L/mf-specbench.json 2>>$L/err.log
  stage "specbench rc=$?"
  timeout 300 bash $W/bench-drafters.sh $MF $W/t/td/models/trained $L/drafters > $L/drafters.log 2>&1
  stage "drafters rc=$?"
}

# After the build, the two engines alternating: everything divided by a llama.cpp figure.
side_by_side() {
  for pass in a b; do
    files="t7-q4km s7-q40 s7-q8 s05-q8 d05-q4km s7-q3_k_m s7-iq4_xs"
    [ $pass = b ] && files="t7-q4km" # pass b: the headline file
    for f in $files; do
      [ -f $M/$f.gguf ] || continue
      $LB/llama-bench -m $M/$f.gguf -p 512 -n 128 -fa 1 -ngl 99 -r 3 -o json > $L/lb-$f-$pass.json 2>>$L/err.log
      $MF bench -m $M/$f.gguf -p 512 -n 128 -r 3 --device cuda --json > $L/mf-$f-$pass.json 2>>$L/err.log
    done
    stage "bench pass $pass done"
  done
  $LB/llama-bench -m $M/t7-q4km.gguf -p 4096 -n 0 -fa 1 -ngl 99 -r 2 -o json > $L/lb-pp4096.json 2>>$L/err.log
  $MF bench -m $M/t7-q4km.gguf -p 4096 -n 0 -r 2 --device cuda --json > $L/mf-pp4096.json 2>>$L/err.log
  $LB/llama-bench -m $M/t7-q4km.gguf -p 1,2,4,8,16,32,64 -n 0 -fa 1 -ngl 99 -r 3 -o json > $L/lb-curve.json 2>>$L/err.log
  $MF bench -m $M/t7-q4km.gguf -p 1,2,4,8,16,32,64 -n 0 -r 3 --device cuda --json > $L/mf-curve.json 2>>$L/err.log
  for f in s7-q40 s7-q8; do # issue 18's curve bars name the Q4_0 and Q8_0 files too
    $LB/llama-bench -m $M/$f.gguf -p 1,8,16,32,64 -n 0 -fa 1 -ngl 99 -r 2 -o json > $L/lb-curve-$f.json 2>>$L/err.log
    $MF bench -m $M/$f.gguf -p 1,8,16,32,64 -n 0 -r 2 --device cuda --json > $L/mf-curve-$f.json 2>>$L/err.log
  done
  stage "pp4096, curve done"
  serve llama-np8 18102 8 3 -- $LB/llama-server -m $M/t7-q4km.gguf -ngl 99 -fa on -np 8 -c 16384 --port 18102
  serve mf-np8-vs-llama 18101 8 3 -- $MF serve -m $M/t7-q4km.gguf --device cuda --parallel 8 --ctx 2048 --addr 127.0.0.1:18101
  stage "serve np8 done"
}

# Last (minfer alone): serving at 1-32 clients, plain and with the draft model.
serving() {
  for c in 1 2 4 8 16 32; do
    local r=4; [ $c -le 2 ] && r=8
    serve mf-np$c 18101 $c $r -- $MF serve -m $M/t7-q4km.gguf --device cuda --parallel $c --ctx 2048 --addr 127.0.0.1:18101
  done
  for c in 1 2 4 8 16 32; do
    local r=4; [ $c -le 2 ] && r=8
    serve mf-spec-np$c 18101 $c $r -- $MF serve -m $M/t7-q4km.gguf --draft $M/d05-q4km.gguf --device cuda \
      --parallel $c --ctx 2048 --addr 127.0.0.1:18101
  done
  stage "minfer serving done"
}

run() {
  mkdir -p $L $M; stage "start"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $L/smi.txt 2>&1
  build & local bp=$!
  synth & local sp=$!
  during_build
  wait $bp $sp
  after_build
  side_by_side
  serving
  stage "ALL DONE"
}

here=$(cd "$(dirname "$0")" && pwd)
case "${1:-}" in
  pack)
    set -e
    mkdir -p .dev/cmp .dev/cmpt/td/models/trained
    CGO_ENABLED=0 go build -ldflags="-s -w" -o .dev/cmp/minfer ./cmd/minfer
    rm -f .dev/cmp/minfer.xz && xz -T2 .dev/cmp/minfer # (the tree and .dev/cmp must stay under the 64 MiB carry)
    cp ../shared/bench/llama.cpp-d32676d7.tar.xz ../shared/bench/loadgen.py scripts/h200-compare.sh .dev/cmp/
    cp scripts/bench-drafters.sh ../shared/testdata/models/trained/target-q8_0.gguf .dev/cmp/
    CGO_ENABLED=0 go test -c -tags cuda -ldflags="-s -w" -o .dev/cmpt/cuda.test ./core/backend/cuda
    cp scripts/h200-compare.sh .dev/cmpt/
    cp -r .dev/testdata/. .dev/cmpt/td/
    cp ../shared/testdata/models/trained/{target-q4_k_m.gguf,draft-q8_0.gguf,eval-prose.txt,eval-code.txt,tokenizer.json} \
      .dev/cmpt/td/models/trained/
    du -sh .dev/cmp .dev/cmpt ;;
  stash) rm -rf $W && mkdir -p $W && cp -r $here/. $W/ && \
    python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" $W/minfer.xz $W/minfer && \
    chmod +x $W/minfer && ls $W ;;
  start)
    mkdir -p $W/t $L && cp -r $here/. $W/t/ && cp $W/target-q8_0.gguf $W/t/td/models/trained/
    setsid nohup bash $W/h200-compare.sh run > $L/pipe.log 2>&1 < /dev/null & sleep 2; cat $L/progress.txt ;;
  run) run ;;
  wait)
    for i in $(seq 1 ${2:-540}); do grep -q "ALL DONE" $L/progress.txt 2>/dev/null && break; sleep 1; done
    mkdir -p $OUT; (cd $L && tar czf $OUT/h2c-logs.tgz .); cat $L/progress.txt ;;
  summary) python3 "$here/compare-summary.py" "${2:?usage: h200-compare.sh summary DIR (an unpacked h2c-logs.tgz)}" ;;
  *) echo "usage: h200-compare.sh pack|stash|start|wait [SECONDS]|summary DIR" >&2; exit 2 ;;
esac
