#!/usr/bin/env bash
# Checks that committed generated files match their generators. Each generator adds a
# line here.
set -euo pipefail
cd "$(dirname "$0")/.."
# core/quant: AVX2 dot kernels from the avo generator (its own module under internal/asmgen),
# regenerated with the same relative paths as its go:generate line.
t=$(mktemp -d); mkdir -p "$t/a/b"
(cd core/quant/internal/asmgen && go build -o "$t/asmgen" .)
(cd "$t/a/b" && "$t/asmgen" -out ../../dot_amd64.s -stubs ../../dot_amd64_stubs.go -pkg quant)
diff -u core/quant/dot_amd64.s "$t/dot_amd64.s" || { echo "core/quant/dot_amd64.s is stale: run go generate ./core/quant"; exit 1; }
diff -u core/quant/dot_amd64_stubs.go "$t/dot_amd64_stubs.go" || { echo "core/quant/dot_amd64_stubs.go is stale: run go generate ./core/quant"; exit 1; }
rm -rf "$t"
# plugins/builtin: builtin.wasm from the Go sources (go:generate line in builtin.go); Go wasm
# builds are byte-reproducible with -trimpath, no VCS stamp (-buildvcs=false: a stamp would
# change with every commit), an empty build id and the same toolchain.
t=$(mktemp -d)
(cd plugins/builtin && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false -ldflags=-buildid= -o "$t/builtin.wasm" ./wasm)
cmp -s plugins/builtin/builtin.wasm "$t/builtin.wasm" || { echo "plugins/builtin/builtin.wasm is stale: run go generate ./plugins/builtin"; exit 1; }
(cd plugins/builtin && sha256sum -c --status builtin.wasm.sha256) || { echo "plugins/builtin/builtin.wasm.sha256 is stale: run go generate ./plugins/builtin"; exit 1; }
rm -rf "$t"
echo "generated files: ok"
