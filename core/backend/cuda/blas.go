package cuda

import (
	"fmt"

	"github.com/minfer/minfer/cuda/driver"
)

// cuBLAS for the prefill GEMM. When libcublas loads (MINFER_CUBLAS names it, else the
// loader's path and the usual toolkit and pip folders; MINFER_NO_CUBLAS=1 turns it off),
// planMatMul's GEMM path multiplies with cublasGemmEx on the tensor cores instead of
// gemm_f16w: the weight is dequantized to the same bounded, reused f16 scratch as
// before (one weight at a time, never the whole model), x is rounded to f16 into a
// second scratch (ops.go gemm), and a bias, when one folds into the matmul, is added
// after it.
// Without the library the backend's own kernel stays (the fallback).

// blasWorkspace is the fixed cuBLAS workspace (NVIDIA's advice for Hopper: 32 MiB).
const blasWorkspace = 32 << 20

// blasSpec is a held-back cuBLAS GEMM (launchSpec.blas): dst[nt][rows] = x·wᵀ with w
// and x f16; the launchSpec's one argument is the bias (0: none).
type blasSpec struct {
	w, x, dst      driver.DevicePtr
	nt, rows, cols int
}

// initBLAS makes the cuBLAS handle, or says why the backend's own GEMM is used.
func (b *Backend) initBLAS() {
	if b.sw.noCUBLAS {
		fmt.Fprintf(b.log, "cuda: MINFER_NO_CUBLAS=1: prefill uses minfer's GEMM kernel\n")
		return
	}
	ws, err := b.alloc("cuBLAS workspace", blasWorkspace)
	if err != nil {
		fmt.Fprintf(b.log, "cuda: cuBLAS not used (%v): prefill uses minfer's GEMM kernel\n", err)
		return
	}
	h, err := driver.NewBLAS(b.stream, ws, blasWorkspace)
	if err != nil {
		b.free(ws)
		fmt.Fprintf(b.log, "cuda: cuBLAS not used (%v): prefill uses minfer's GEMM kernel\n", err)
		return
	}
	b.blas = h
	fmt.Fprintf(b.log, "cuda: prefill GEMM by cuBLAS %s (%s)\n", h.VersionString(), h.Lib)
}

// BLAS reports whether the prefill GEMM uses cuBLAS, and its version.
func (b *Backend) BLAS() (bool, string) {
	if b.blas == nil {
		return false, ""
	}
	return true, b.blas.VersionString()
}

// launchBLAS enqueues a held-back cuBLAS GEMM and its bias.
func (b *Backend) launchBLAS(l launchSpec) {
	s := l.blas
	b.timedLibCall("cublas_gemm", func() { b.fail(b.blas.GemmF16NT(s.rows, s.nt, s.cols, s.w, s.x, s.dst)) })
	if bias := driver.DevicePtr(l.args[0]); bias != 0 {
		g, bl := flat(s.nt * s.rows)
		b.launch("add_bias", g, bl, 0, driver.P(s.dst), driver.P(bias), driver.I(s.nt*s.rows), driver.I(s.rows))
	}
}
