#!/usr/bin/env bash
# bisect-bench.sh measures one `minfer bench` across several commits in one device call:
# the binaries are built here, the model is synthesized there, and the commits run in
# alternating passes so that a drift of the machine does not read as a regression.
#
#   scripts/bisect-bench.sh pack REV...          (here) build minfer at each REV into
#                                                .dev/bis/ (stripped, xz: about 8.5 MB a
#                                                binary; keep the carry under 64 MiB)
#   bash .dev/bis/bisect-bench.sh run SYNTH -- BENCH-ARGS...
#                                                (on the GPU machine, carry [".dev/bis"])
#       SYNTH: minfer synth's flags for the model, e.g. "--preset qwen2.5-0.5b --type q8_0
#       --seed 5 --fast"; BENCH-ARGS: minfer bench's flags after -m, e.g. -p 512 -n 0 -r 3
#       --device cuda. PASSES (2) alternating passes; the table goes to stdout and, when
#       set, $OUT/bisect.txt.
set -euo pipefail
case "${1:-}" in
pack)
	shift
	(($#)) || { echo "bisect-bench: pack: no revisions" >&2; exit 2; }
	here=$(pwd)
	rm -rf .dev/bis && mkdir -p .dev/bis
	for rev in "$@"; do
		c=$(git rev-parse --short "$rev")
		wt=$(mktemp -d)
		git worktree add -q --detach "$wt" "$c"
		(cd "$wt" && CGO_ENABLED=0 go build -ldflags="-s -w" -o "$here/.dev/bis/mf-$c" ./cmd/minfer)
		git worktree remove --force "$wt"
		xz -T2 -6 "$here/.dev/bis/mf-$c"
		echo "$c" >>.dev/bis/revs
	done
	cp scripts/bisect-bench.sh .dev/bis/
	du -sh .dev/bis ;;
run)
	shift
	synth=$1
	shift
	[[ ${1:-} == -- ]] && shift
	h=$(cd "$(dirname "$0")" && pwd)
	w=${TMPDIR:-/tmp}/bisect-bench
	mkdir -p "$w"
	export MINFER_CACHE_DIR=$w/kc
	revs=$(cat "$h/revs")
	for c in $revs; do
		python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$h/mf-$c.xz" "$w/mf-$c"
		chmod +x "$w/mf-$c"
	done
	first=$(echo "$revs" | head -1)
	# shellcheck disable=SC2086 # SYNTH is a list of flags
	"$w/mf-$first" synth $synth -o "$w/model.gguf" >/dev/null
	out=${OUT:-$w}
	for pass in $(seq 1 "${PASSES:-2}"); do
		for c in $revs; do
			"$w/mf-$c" bench -m "$w/model.gguf" "$@" 2>/dev/null | grep -E '^\| .*\| +[0-9.]+ ± ' |
				sed "s/^/pass $pass $c /"
		done
	done | tee "$out/bisect.txt" ;;
*)
	sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2 ;;
esac
