package cpu

import "golang.org/x/sys/cpu"

// useAVX512 selects the AVX-512 float kernels (floatdot_amd64.s); they compute the same
// bits as the pure-Go definitions, which run elsewhere.
var useAVX512 = cpu.X86.HasAVX512F

// useAVX2 selects the AVX2 forms of the float kernels (floatdot_avx2_amd64.s) where
// AVX-512 is missing: the same bits again. GODEBUG=cpu.avx512f=off turns AVX-512 off
// (golang.org/x/sys/cpu reads it), so an AVX-512 machine runs what an AVX2 one does.
var useAVX2 = !useAVX512 && hasAVX2

// hasAVX2 reports the CPU features of the AVX2 kernels (the tests run them on AVX-512
// machines too).
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C

// useDPBF16 selects dpLanesBF16AVX2, the VDPBF16PS emulation of the BF16 dots, on any
// CPU with AVX2 and FMA (AVX-512 ones included).
var useDPBF16 = hasAVX2

//go:noescape
func dpLanesBF16AVX2(w, x *uint16, chunks, stride int, acc *[16]float32)

//go:noescape
func lanes16F16AVX2(w, x *uint16, n int, acc *[16]float32)

//go:noescape
func lanes16F16x4AVX2(w *uint16, stride int, x *uint16, n int, acc *[4][16]float32)

//go:noescape
func lanes16F32AVX2(w, x *float32, n int, acc *[16]float32)

//go:noescape
func vecF16AVX2(x, y *uint16, np int, acc *[4][16]float32)

//go:noescape
func vecF32AVX2(x, y *float32, np int, acc *[4][16]float32)

//go:noescape
func madF16AVX2(acc *float32, v *uint16, n int, s float32)

//go:noescape
func scaleF16AVX2(acc *float32, n int, s float32)

//go:noescape
func roundF16AVX2(dst, src *float32, n int)

//go:noescape
func scoresF16AVX2(k *uint16, q *float32, hd, n int, scale float32, out *float32)

//go:noescape
func accumVF16AVX2(acc *float32, v *uint16, hd, n int, ms, vs *float32)

//go:noescape
func accumVF16x64AVX2(acc *float32, v *uint16, n int, ms, vs *float32)

//go:noescape
func swigluAVX2(dst, x, gate *float32, n int)

//go:noescape
func ropeNeoXAVX2(v, c, s *float32, half int)

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
func expfAVX2(dst, src *float32, n int)

//go:noescape
func accumVF16x64AVX512(acc *float32, v *uint16, n int, ms, vs *float32)

//go:noescape
func roundF16AVX512(dst, src *float32, n int)

//go:noescape
func accumVF16x64x4AVX512(acc *float32, v *uint16, n int, ms, vs *float32)

//go:noescape
func ropeNeoXAVX512(v, c, s *float32, half int)
