package cpu

import "golang.org/x/sys/cpu"

// useAVX512 selects the AVX-512 float kernels (floatdot_amd64.s); they compute the same
// bits as the pure-Go definitions, which run elsewhere.
var useAVX512 = cpu.X86.HasAVX512F

//go:noescape
func lanes16F16AVX512(w, x *uint16, n int, acc *[16]float32)

//go:noescape
func lanes16F16x4AVX512(w *uint16, stride int, x *uint16, n int, acc *[4][16]float32)

//go:noescape
func lanes16F32AVX512(w, x *float32, n int, acc *[16]float32)

//go:noescape
func vecF16AVX512(x, y *uint16, np int, acc *[4][16]float32)

//go:noescape
func vecF32AVX512(x, y *float32, np int, acc *[4][16]float32)

//go:noescape
func madF16AVX512(acc *float32, v *uint16, n int, s float32)

//go:noescape
func scaleF16AVX512(acc *float32, n int, s float32)

//go:noescape
func swigluAVX512(dst, x, gate *float32, n int)

//go:noescape
func scoresF16AVX512(k *uint16, q *float32, hd, n int, scale float32, out *float32)

//go:noescape
func accumVF16AVX512(acc *float32, v *uint16, hd, n int, ms, vs *float32)

//go:noescape
func expfAVX512(dst, src *float32, n int)

//go:noescape
func accumVF16x64AVX512(acc *float32, v *uint16, n int, ms, vs *float32)

//go:noescape
func roundF16AVX512(dst, src *float32, n int)

//go:noescape
func accumVF16x64x4AVX512(acc *float32, v *uint16, n int, ms, vs *float32)

//go:noescape
func ropeNeoXAVX512(v, c, s *float32, half int)
