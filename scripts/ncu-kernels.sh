#!/usr/bin/env bash
# ncu-kernels.sh times each kernel of a few decode steps on its own with Nsight Compute
# (the device has ncu, not nsys): no graphs, no PDL, ncu's base clock, each kernel
# replayed alone. Beside `minfer bench --ledger` (CUDA events around every kernel, some
# 4 µs of event and launch time in each figure) it gives a kernel's own duration, which
# is what a fusion or a kernel rewrite changes (docs/perf-cuda.md v19).
#
#   scripts/ncu-kernels.sh run MINFER MODEL OUT.csv [warm]   (on the GPU machine)
#       ncu over 400 kernels after the first 3,000 of `MINFER bench -m MODEL -p 0 -n 32`;
#       warm: --cache-control none (caches kept between replays; default: flushed)
#   scripts/ncu-kernels.sh summary OUT.csv                   (anywhere)
#       µs a call per kernel and grid, mean and min, and the total
set -euo pipefail
case "${1:-}" in
run)
	bin=$2 model=$3 out=$4
	ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
	cache=()
	[[ ${5:-} == warm ]] && cache=(--cache-control none)
	"$ncu" --launch-skip 3000 --launch-count 400 "${cache[@]}" --metrics gpu__time_duration.sum --csv \
		"$bin" bench -m "$model" --device cuda -p 0 -n 32 -r 1 >"$out" ;;
summary)
	python3 - "$2" <<'PY'
import collections, csv, sys
lines = open(sys.argv[1]).read().splitlines()
start = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
rows = list(csv.reader(lines[start:]))
hdr = rows[0]
k, g, v = hdr.index("Kernel Name"), hdr.index("Grid Size"), hdr.index("Metric Value")
by = collections.defaultdict(list)
for r in rows[1:]:
    if len(r) == len(hdr):
        by[(r[k], r[g])].append(float(r[v].replace(",", "")) / 1000)
total = 0.0
print(f"{'kernel':32s} {'grid':16s} {'calls':>5s} {'mean µs':>8s} {'min µs':>8s}")
for (name, grid), d in sorted(by.items(), key=lambda x: -sum(x[1])):
    print(f"{name[:32]:32s} {grid:16s} {len(d):5d} {sum(d) / len(d):8.2f} {min(d):8.2f}")
    total += sum(d)
print(f"total {total:.1f} µs over {sum(len(d) for d in by.values())} kernels")
PY
	;;
*)
	sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2 ;;
esac
