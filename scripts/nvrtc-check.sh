#!/usr/bin/env bash
# nvrtc-check.sh compiles every CUDA kernel source with NVRTC here, without a GPU: NVRTC is
# a compiler library and needs no device or driver. It catches a kernel that NVRTC rejects
# (or an entry point that is missing) before device time is spent on it.
#
#   scripts/nvrtc-check.sh [ARCH_REGEX]   default sm_90; "" for every arch of TestCompileAllArchs
#
# NVRTC comes from MINFER_NVRTC, else Debian's libnvrtc11.2 package (CUDA 11.8's NVRTC, in the
# non-free component; the script says how to install it when it is missing). CUDA 11.8
# compiles sm_75 to sm_90; the device has a newer NVRTC, so this is a necessary check, not a
# sufficient one (the device run still decides).
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1-sm_90}
lib=${MINFER_NVRTC:-}
if [[ -z $lib ]]; then
	lib=$(ls /usr/lib/x86_64-linux-gnu/libnvrtc.so.11.2 /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1 || true)
fi
if [[ -z $lib ]]; then
	cat >&2 <<'MSG'
nvrtc-check: no NVRTC library. On Debian 12: add "contrib non-free" to the Components of
/etc/apt/sources.list.d/debian.sources, then apt-get update && apt-get install libnvrtc11.2
libnvrtc-builtins11.8 (or set MINFER_NVRTC to a libnvrtc.so).
MSG
	exit 2
fi
mkdir -p .dev
CGO_ENABLED=0 go test -c -tags cuda -o .dev/nvrtc-check.test ./core/backend/cuda
MINFER_NVRTC=$lib ./.dev/nvrtc-check.test -test.run "TestCompileAllArchs/${arch}" -test.v -test.timeout 30m |
	grep -E '^(--- |    --- |ok|FAIL|PASS)|rror' || true
test "${PIPESTATUS[0]}" -eq 0
