package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"
)

// cuBLAS is bound at run time like the driver and NVRTC: the binary needs no cgo and
// runs where the library is absent (the backend then keeps its own GEMM). Only what the
// prefill GEMM uses is bound.
var cublas struct {
	once                                                     sync.Once
	err                                                      error
	lib                                                      string
	create, destroy, setStream, setWorkspace, gemmEx, status uintptr
	getVersion                                               uintptr
}

func loadCUBLAS() error {
	cublas.once.Do(func() {
		h, name, err := dlopen("libcublas.so", cublasCandidates())
		if err != nil {
			cublas.err = fmt.Errorf("%w (set MINFER_CUBLAS to its path)", err)
			return
		}
		cublas.lib = name
		syms := []struct {
			p    *uintptr
			name string
		}{
			{&cublas.create, "cublasCreate_v2"}, {&cublas.destroy, "cublasDestroy_v2"},
			{&cublas.setStream, "cublasSetStream_v2"}, {&cublas.setWorkspace, "cublasSetWorkspace_v2"},
			{&cublas.gemmEx, "cublasGemmEx"}, {&cublas.getVersion, "cublasGetVersion_v2"},
		}
		for _, s := range syms {
			if *s.p = dlsym(h, s.name); *s.p == 0 {
				cublas.err = fmt.Errorf("cuda: %s has no symbol %s (cuBLAS 12 or later is needed)", name, s.name)
				return
			}
		}
		cublas.status = dlsym(h, "cublasGetStatusString") // optional: error messages only
	})
	return cublas.err
}

// cublasCandidates lists where libcublas may live: MINFER_CUBLAS first, then the
// loader's search path, then the usual toolkit and pip wheel (nvidia-cublas) folders.
func cublasCandidates() []string {
	var c []string
	if p := os.Getenv("MINFER_CUBLAS"); p != "" {
		c = append(c, p)
	}
	c = append(c, "libcublas.so.13", "libcublas.so.12", "libcublas.so")
	globs := []string{
		"/usr/local/cuda/lib64/libcublas.so*",
		"/usr/local/cuda/targets/*/lib/libcublas.so*",
		"/usr/local/cuda-*/targets/*/lib/libcublas.so*",
		"/usr/local/cuda-*/lib64/libcublas.so*",
		"/usr/lib/x86_64-linux-gnu/libcublas.so*",
		"/opt/*/.venv/lib/python3*/site-packages/nvidia/cu*/lib/libcublas.so*",
		"/opt/*/.venv/lib/python3*/site-packages/nvidia/cublas/lib/libcublas.so*",
		"/usr/local/lib/python3*/dist-packages/nvidia/cu*/lib/libcublas.so*",
		"/usr/local/lib/python3*/dist-packages/nvidia/cublas/lib/libcublas.so*",
	}
	for _, g := range globs {
		m, _ := filepath.Glob(g)
		for _, p := range m {
			if !strings.HasPrefix(filepath.Base(p), "libcublasLt") && !strings.Contains(p, "/stubs/") {
				c = append(c, p)
			}
		}
	}
	return c
}

func cublasError(callName string, r uintptr) error {
	msg := fmt.Sprintf("status %d", int32(r))
	if cublas.status != 0 {
		if m := errorString(cublas.status, r); m != "" {
			msg = m
		}
	}
	return fmt.Errorf("cuda: %s: %s", callName, msg)
}

// BLAS is a cuBLAS handle bound to one stream, with a fixed workspace (so calls never
// allocate, and may be captured into a CUDA graph). Use it with its context current.
type BLAS struct {
	h       uintptr
	Lib     string // the library file that was loaded
	Version int    // cublasGetVersion: major*10000 + minor*100 + patch
}

// NewBLAS loads cuBLAS and makes a handle for stream s with ws (wsBytes) as its workspace.
func NewBLAS(s *Stream, ws DevicePtr, wsBytes int) (*BLAS, error) {
	if err := loadCUBLAS(); err != nil {
		return nil, err
	}
	b := &BLAS{Lib: cublas.lib}
	if r := call(cublas.create, uintptr(unsafe.Pointer(&b.h))); r != 0 {
		return nil, cublasError("cublasCreate", r)
	}
	var v int32
	if r := call(cublas.getVersion, b.h, uintptr(unsafe.Pointer(&v))); r != 0 {
		b.Destroy()
		return nil, cublasError("cublasGetVersion", r)
	}
	b.Version = int(v)
	if r := call(cublas.setStream, b.h, s.h); r != 0 {
		b.Destroy()
		return nil, cublasError("cublasSetStream", r)
	}
	if r := call(cublas.setWorkspace, b.h, uintptr(ws), uintptr(wsBytes)); r != 0 {
		b.Destroy()
		return nil, cublasError("cublasSetWorkspace", r)
	}
	return b, nil
}

// VersionString is the version as major.minor.patch.
func (b *BLAS) VersionString() string {
	return fmt.Sprintf("%d.%d.%d", b.Version/10000, b.Version/100%100, b.Version%100)
}

// Destroy frees the handle.
func (b *BLAS) Destroy() error {
	if b == nil || b.h == 0 {
		return nil
	}
	r := call(cublas.destroy, b.h)
	b.h = 0
	if r != 0 {
		return cublasError("cublasDestroy", r)
	}
	return nil
}

// cuBLAS and CUDA enums (cublas_api.h, library_types.h).
const (
	cublasOpN         = 0
	cublasOpT         = 1
	cudaR32F          = 0
	cudaR16F          = 2
	cublasCompute32F  = 68
	cublasGemmDefault = -1
)

// GemmF16NT computes dst[n][m] = x[n][k] · w[m][k]ᵀ (row-major): w and x f16, dst f32,
// f32 accumulation. In cuBLAS's column-major terms that is C(m×n) = Wᵀ·X with W
// transposed (lda = k), X as is (ldb = k), ldc = m: the "TN" GEMM, its fastest form.
//
// Determinism: cuBLAS gives the same bits on every run for the same shapes, toolkit,
// GPU model and SM count as long as one stream is active on the handle (cuBLAS's
// "Results reproducibility"); the handle is bound to the backend's one stream, its
// atomics mode is left at the default (not allowed), and the workspace is fixed, so the
// heuristic picks the same algorithm for the same (m, n, k) every run. Rows are not
// bitwise across different n (the algorithm and split may change with n).
func (b *BLAS) GemmF16NT(m, n, k int, w, x, dst DevicePtr) error {
	alpha, beta := float32(1), float32(0)
	algo := int32(cublasGemmDefault)
	r := call(cublas.gemmEx, b.h, cublasOpT, cublasOpN, uintptr(m), uintptr(n), uintptr(k),
		uintptr(unsafe.Pointer(&alpha)), uintptr(w), cudaR16F, uintptr(k),
		uintptr(x), cudaR16F, uintptr(k),
		uintptr(unsafe.Pointer(&beta)), uintptr(dst), cudaR32F, uintptr(m),
		cublasCompute32F, uintptr(uint32(algo)))
	if r != 0 {
		return cublasError("cublasGemmEx", r)
	}
	return nil
}
