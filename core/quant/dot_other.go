//go:build !amd64

package quant

// simdKernels is empty where no SIMD kernels exist; the pure-Go definitions run.
var simdKernels = map[Type][2]func(int, []byte, []byte) float32{}

// simdDot is nil: no SIMD kernels here.
func simdDot(Type) func(int, []byte, []byte) float32 { return nil }
