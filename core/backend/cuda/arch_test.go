//go:build cuda

package cuda

import (
	"bytes"
	"testing"

	"github.com/minfer/minfer/cuda/driver"
	"github.com/minfer/minfer/cuda/kernels"
)

// compileArchs are the architectures every kernel must compile for: each tier's lowest
// (Turing sm_75 … Hopper sm_90) and consumer Ampere's sm_86. NVRTC compiles for an
// architecture the machine lacks, so one GPU machine checks them all.
var compileArchs = []string{"sm_75", "sm_80", "sm_86", "sm_89", "sm_90"}

// TestCompileAllArchs NVRTC-compiles every kernel source as Open compiles it (with the
// type table's instantiations) for every architecture of compileArchs, and checks that
// each entry point Open looks up is in the result.
func TestCompileAllArchs(t *testing.T) {
	if _, _, err := driver.NVRTCVersion(); err != nil {
		t.Fatalf("NVRTC: %v", err)
	}
	dir := t.TempDir()
	names := kernelNames()
	for _, arch := range compileArchs {
		for _, f := range kernels.Names() {
			t.Run(arch+"/"+f, func(t *testing.T) {
				t.Parallel()
				src, err := kernelSource(f)
				if err != nil {
					t.Fatal(err)
				}
				bin, err := driver.Compile(src, driver.CompileOptions{Arch: arch, Defines: kernelDefines(f), CacheDir: dir})
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range names[f] {
					if !containsName(bin, k) {
						t.Errorf("%s for %s: no entry point %s in the CUBIN", f, arch, k)
					}
				}
			})
		}
	}
}

// containsName reports whether the CUBIN's string table holds name as a whole symbol.
func containsName(bin []byte, name string) bool {
	return bytes.Contains(bin, []byte("\x00"+name+"\x00"))
}
