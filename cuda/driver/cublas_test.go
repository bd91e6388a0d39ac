package driver

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCUBLASCandidates: MINFER_CUBLAS comes first, and the folder globs never offer
// cuBLASLt or the toolkit's link-time stubs (which load but fail every call).
func TestCUBLASCandidates(t *testing.T) {
	t.Setenv("MINFER_CUBLAS", "/opt/x/libcublas.so.13")
	c := cublasCandidates()
	if len(c) == 0 || c[0] != "/opt/x/libcublas.so.13" {
		t.Fatalf("candidates %q: want MINFER_CUBLAS first", c)
	}
	for _, p := range c {
		if strings.HasPrefix(filepath.Base(p), "libcublasLt") || strings.Contains(p, "/stubs/") {
			t.Errorf("candidate %q: cuBLASLt or a stub", p)
		}
	}
}

// TestCUBLASAbsent: where no libcublas loads, NewBLAS fails with an error that names
// MINFER_CUBLAS (the backend then logs it and keeps its own GEMM).
func TestCUBLASAbsent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("cuBLAS is looked for on linux only")
	}
	t.Setenv("MINFER_CUBLAS", filepath.Join(t.TempDir(), "libcublas.so.13"))
	if err := loadCUBLAS(); err == nil {
		t.Skipf("libcublas loads here (%s)", cublas.lib)
	} else if !strings.Contains(err.Error(), "MINFER_CUBLAS") || !strings.Contains(err.Error(), os.Getenv("MINFER_CUBLAS")) {
		t.Errorf("error %q: want it to name MINFER_CUBLAS and the path tried", err)
	}
	if _, err := NewBLAS(nil, 0, 0); err == nil {
		t.Error("NewBLAS without cuBLAS: no error")
	}
}
