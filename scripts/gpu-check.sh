#!/usr/bin/env bash
# gpu-check.sh builds the GPU test binary and the minfer binary here (no GPU, no cgo
# needed) and prints the command that runs them on a machine with a CUDA device.
#
#   scripts/gpu-check.sh            build into .dev/ and print the device command
#   scripts/gpu-check.sh device     (on the GPU machine) run every GPU test group and the
#                                   matmul benchmark; logs go to $OUT (or .dev/out)
#   scripts/gpu-check.sh bench [PRESET:TYPE ...]
#                                   (on the GPU machine) synthesize Qwen2.5-shaped models
#                                   with .dev/minfer synth and measure pp512/tg128 and the
#                                   verify curve C_T(1..16) of each (TestBenchModel)
#
# .dev/ is gitignored; carry it to the GPU machine. The tests read test models from
# .dev/testdata (a copy of the few ../shared/testdata files they need).
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == bench ]]; then
	shift
	out=${OUT:-.dev/out}
	mkdir -p "$out" /tmp/minfer-models
	export MINFER_CACHE_DIR=${MINFER_CACHE_DIR:-/tmp/minfer-kcache}
	specs=("$@")
	((${#specs[@]})) || specs=(qwen2.5-0.5b:q4_k_m qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m qwen2.5-7b:q4_0 qwen2.5-7b:q8_0)
	for spec in "${specs[@]}"; do
		preset=${spec%%:*} typ=${spec#*:}
		f=/tmp/minfer-models/$preset-$typ.gguf
		[[ -f $f ]] || "${MINFER_BIN:-./.dev/minfer}" synth --preset "$preset" --type "$typ" --fast -o "$f" >/dev/null
		log=$out/e2e-$preset-$typ.log
		MINFER_BENCH_MODEL=$f ./.dev/cuda.test -test.run '^TestBenchModel$' -test.v -test.timeout 600s >"$log" 2>&1 || echo "FAIL $spec"
		cat "$log" >>"$out/e2e.log" && rm "$log"
		grep -h RESULT "$out/e2e.log" | tail -2
	done
	exit 0
fi

if [[ "${1:-}" != device ]]; then
	mkdir -p .dev/testdata/models/synthetic
	CGO_ENABLED=0 go test -c -tags cuda -o .dev/cuda.test ./core/backend/cuda
	CGO_ENABLED=0 go build -ldflags="-s -w" -o .dev/minfer ./cmd/minfer
	src=../shared/testdata/models
	cp "$src/stories260K.gguf" .dev/testdata/models/
	for m in llama qwen2 qwen3; do
		# q6_k files are left out to stay under the 64 MiB the device tool carries; the
		# q4_k_m files hold Q6_K tensors too.
		for q in q8_0 q4_0 q4_k_m; do cp "$src/synthetic/synth-$m-$q.gguf" .dev/testdata/models/synthetic/; done
	done
	cp "$src/synthetic/synth-qwen2-f16.gguf" .dev/testdata/models/synthetic/
	rm -f .dev/testdata/models/synthetic/*q6_k.gguf
	du -shc .dev/cuda.test .dev/minfer .dev/testdata | tail -1
	echo 'device command (run tool, carry [".dev/cuda.test", ".dev/minfer", ".dev/testdata"]):'
	echo '  bash scripts/gpu-check.sh device && bash scripts/gpu-check.sh bench' 
	exit 0
fi

out=${OUT:-.dev/out}
mkdir -p "$out"
export MINFER_TESTDATA=$PWD/.dev/testdata MINFER_CACHE_DIR=${MINFER_CACHE_DIR:-/tmp/minfer-kcache}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader || true
status=0
# One process per group: a kernel fault poisons the CUDA context of its process only.
for group in Smoke CompileAllArchs MatMulVsCPU MatMulBLASVsCPU AttentionFlashVsCPU PerplexityVsCPU MatMulRowIdentity MatMulSmallNTVsCPU MatMulMMQSameBits MatMulPairRowsSameBits TopKVsCPU GraphReplay ForwardBatch.* FusedSequence SpeculativeGreedyIdentityGPU Conformance ModelVsCPU; do
	echo "=== $group"
	log=$out/test-$group.log
	if ! ./.dev/cuda.test -test.run "^Test$group\$" -test.timeout 300s ${VERBOSE:+-test.v} >"$log" 2>&1; then
		status=1
		echo "FAIL $group"; grep -E -- "--- FAIL|panic|Error|error" "$log" | head -40
	else
		echo "ok   $group"
	fi
	cat "$log" >>"$out/tests.log" && rm "$log"
done
if [[ "${BENCH:-1}" == 1 ]]; then
	echo "=== BenchmarkMatMul"
	./.dev/cuda.test -test.run '^$' -test.bench MatMul -test.benchtime 50x 2>&1 | tee "$out/bench.log" | grep -E "^Benchmark|FAIL|panic" || true
fi
exit $status
