#!/usr/bin/env bash
# bench-drafters.sh runs issue 22's drafter bed on the trained pair and checks its bars:
#
#   (a) copy-heavy prompts, the target alone: plain decoding, `ngram`, `suffix` (each
#       at depth auto, the adaptive policy) and `suffix` at static depth 8;
#       bar: ngram or suffix >= 1.5x plain.
#   (b) the hybrid mix (prose and copy-heavy prompts in one run), target + draft model:
#       drafter:model, drafter:suffix and drafter:auto (the model and suffix, the
#       adaptive policy choosing each round's drafter); bar: auto >= the better of the
#       two alone.
#   (c) the plugin calls' share of a round, from (a)'s and (b)'s rows: specbench times
#       every drafter plugin call with the check of its answer (drafter µs/round) and
#       every policy, penalty and sampler call (plugins µs/round), and divides by a
#       round's wall time (the requests' generation time over their rounds after the
#       first); bar: the drafter calls <= 2% of a round in every row that calls a
#       drafter plugin (every role's calls together are printed beside it).
#
# Usage:
#   scripts/bench-drafters.sh MINFER DATA OUT
#     MINFER  the minfer binary (CGO_ENABLED=0 go build -o .dev/minfer ./cmd/minfer)
#     DATA    a folder with the trained pair: target-q8_0.gguf, draft-q8_0.gguf,
#             eval-prose.txt, eval-code.txt (../shared/testdata/models/trained)
#     OUT     the folder it writes (created): a.json, b.json (specbench --json), a.log,
#             b.log (stderr), summary.txt (every row and the bars, also printed)
#   Environment: DEVICE (cuda), N tokens per prompt (128), R repetitions (5), COUNT
#   prompts per file (8), TOKENS per prompt window (128), WARMUP seconds (2),
#   MINFER_CACHE_DIR (compiled kernels and plugins; default ${TMPDIR:-/tmp}/minfer-bench-cache,
#   outside OUT so that the folder stays small enough to fetch).
#
# On the H200 (about a minute; the first run compiles the CUDA kernels):
#   scripts/bench-drafters.sh .dev/minfer .dev/td/trained "$OUT/drafters"
# Here, as its check (a few seconds' worth of tokens on the CPU):
#   DEVICE=cpu N=16 R=1 COUNT=2 WARMUP=0 scripts/bench-drafters.sh .dev/minfer \
#       ../shared/testdata/models/trained /tmp/bench-drafters
#
# It exits 1 when a run fails or a row's output differs from plain decoding's (greedy
# identity); a bar not met is reported, not an error.
set -euo pipefail

if (($# != 3)); then
	sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
fi
bin=$(realpath "$1") data=$(realpath "$2") out=$3
for f in target-q8_0.gguf draft-q8_0.gguf eval-prose.txt eval-code.txt; do
	[[ -f $data/$f ]] || { echo "bench-drafters: $data/$f: no such file" >&2; exit 2; }
done
[[ -x $bin ]] || { echo "bench-drafters: $bin: not an executable" >&2; exit 2; }
mkdir -p "$out"
out=$(realpath "$out")
export MINFER_CACHE_DIR=${MINFER_CACHE_DIR:-${TMPDIR:-/tmp}/minfer-bench-cache}
device=${DEVICE:-cuda}
common=(--device "$device" --prompt-count "${COUNT:-8}" --prompt-tokens "${TOKENS:-128}"
	-n "${N:-128}" -r "${R:-5}" --warmup "${WARMUP:-2}" --curve=false --json)

cd "$data"
start=$SECONDS
"$bin" specbench -m target-q8_0.gguf --copy-prompts eval-prose.txt --copy-prompts eval-code.txt \
	--depths 0,8 --drafter suffix --drafters ngram,suffix "${common[@]}" >"$out/a.json" 2>"$out/a.log" ||
	{ echo "bench-drafters: run (a) failed:" >&2; tail -5 "$out/a.log" >&2; exit 1; }
"$bin" specbench -m target-q8_0.gguf --draft draft-q8_0.gguf --prompts eval-prose.txt \
	--copy-prompts eval-code.txt --depths 0 --drafters model,suffix,auto "${common[@]}" >"$out/b.json" 2>"$out/b.log" ||
	{ echo "bench-drafters: run (b) failed:" >&2; tail -5 "$out/b.log" >&2; exit 1; }
secs=$((SECONDS - start))

# rows FILE prints one line per row of a specbench --json result: label, tokens/s,
# stddev, speedup, acceptance, tokens/round, plugins µs, drafter µs, round ms, the
# plugin share (%), the drafter calls' share (%), identical (true/false).
rows() {
	awk 'BEGIN { RS = "\\{\"depth\":" }
	NR > 1 {
		split("tokens_per_s tokens_per_s_stddev speedup acceptance tokens_per_round plugins drafters round_ms plugin_share identical_to_depth0", keys, " ")
		for (i in keys) v[keys[i]] = 0
		v["identical_to_depth0"] = "false"
		label = $0; sub(/^"/, "", label); sub(/".*/, "", label)
		for (i in keys) {
			k = keys[i]
			if (match($0, "\"" k "\":[^,}]*")) v[k] = substr($0, RSTART + length(k) + 3, RLENGTH - length(k) - 3)
		}
		ds = v["round_ms"] > 0 ? 100 * v["drafters"] / v["round_ms"] : 0
		printf "%s %.1f %.1f %.3f %.3f %.2f %.1f %.1f %.4f %.2f %.2f %s\n", label, v["tokens_per_s"], v["tokens_per_s_stddev"],
			v["speedup"], v["acceptance"], v["tokens_per_round"], 1e3 * v["plugins"], 1e3 * v["drafters"], v["round_ms"],
			100 * v["plugin_share"], ds, v["identical_to_depth0"]
	}' "$1"
}

summarize() {
	local commit
	commit=$("$bin" version 2>/dev/null | head -1 || true)
	echo "bench-drafters: device $device, N=${N:-128} R=${R:-5} COUNT=${COUNT:-8} TOKENS=${TOKENS:-128}, $secs s, ${commit:-minfer ?}"
	echo "host: $(uname -n), load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo ?)"
	for run in a b; do
		[[ $run == a ]] && echo "(a) copy-heavy prompts, the target alone" || echo "(b) hybrid mix: prose + copy-heavy prompts, target + draft model"
		printf '  %-15s %10s %8s %8s %6s %6s %10s %10s %9s %8s %9s %s\n' row tokens/s ± speedup accept tok/rd plugins-µs drafter-µs round-ms share% drafter% identical
		rows "$out/$run.json" | while read -r l t s x a p pu du r sh dsh id; do
			printf '  %-15s %10s %8s %7sx %6s %6s %10s %10s %9s %8s %9s %s\n' "$l" "$t" "$s" "$x" "$a" "$p" "$pu" "$du" "$r" "$sh" "$dsh" "$id"
		done
	done
	rows "$out/a.json" | awk '$1 == "drafter:ngram" || $1 == "drafter:suffix" || $1 == "8" { if ($4 > best) { best = $4; who = $1 } }
		END { printf "bar (a) ngram or suffix >= 1.50x plain: best %s %.2fx: %s\n", who, best, (best >= 1.5) ? "met" : "NOT met" }'
	rows "$out/b.json" | awk '{ x[$1] = $4 }
		END { m = x["drafter:model"]; s = x["drafter:suffix"]; b = (m > s) ? m : s; r = (b > 0) ? x["drafter:auto"] / b : 0
		printf "bar (b) hybrid >= the better alone: auto %.3fx, model %.3fx, suffix %.3fx (auto / better %.3f): %s\n", x["drafter:auto"], m, s, r, (r >= 1) ? "met" : "NOT met" }'
	cat <(rows "$out/a.json") <(rows "$out/b.json") | awk '$1 ~ /^drafter:(ngram|suffix|auto)$/ || $1 == "8" {
			if ($11 > wd) { wd = $11; whod = $1 }; if ($10 > wa) { wa = $10; whoa = $1 } }
		END { printf "bar (c) drafter plugin calls <= 2%% of a round: worst %s %.2f%%: %s\n", whod, wd, (wd <= 2) ? "met" : "NOT met"
		printf "    every plugin call together (policy, sampler, drafter), rows calling a drafter: worst %s %.2f%%\n", whoa, wa }'
	cat <(rows "$out/a.json") <(rows "$out/b.json") | awk '$12 != "true" { bad = bad " " $1 } END { if (bad != "") { print "greedy identity BROKEN in:" bad; exit 1 } print "greedy identity: every row = plain decoding" }'
}

summarize | tee "$out/summary.txt"
