//go:build !amd64

package cpu

const useAVX512 = false
const useAVX2 = false
const useDPBF16 = false

func dpLanesBF16AVX2(w, x *uint16, chunks, stride int, acc *[16]float32) { panic("BUG: cpu: no AVX2") }

func lanes16F16AVX2(w, x *uint16, n int, acc *[16]float32) { panic("BUG: cpu: no AVX2") }
func lanes16F16x4AVX2(w *uint16, stride int, x *uint16, n int, acc *[4][16]float32) {
	panic("BUG: cpu: no AVX2")
}
func lanes16F32AVX2(w, x *float32, n int, acc *[16]float32) { panic("BUG: cpu: no AVX2") }
func vecF16AVX2(x, y *uint16, np int, acc *[4][16]float32)  { panic("BUG: cpu: no AVX2") }
func vecF32AVX2(x, y *float32, np int, acc *[4][16]float32) { panic("BUG: cpu: no AVX2") }
func madF16AVX2(acc *float32, v *uint16, n int, s float32)  { panic("BUG: cpu: no AVX2") }
func scaleF16AVX2(acc *float32, n int, s float32)           { panic("BUG: cpu: no AVX2") }
func roundF16AVX2(dst, src *float32, n int)                 { panic("BUG: cpu: no AVX2") }
func scoresF16AVX2(k *uint16, q *float32, hd, n int, scale float32, out *float32) {
	panic("BUG: cpu: no AVX2")
}
func accumVF16AVX2(acc *float32, v *uint16, hd, n int, ms, vs *float32) {
	panic("BUG: cpu: no AVX2")
}
func accumVF16x64AVX2(acc *float32, v *uint16, n int, ms, vs *float32) {
	panic("BUG: cpu: no AVX2")
}
func ropeNeoXAVX2(v, c, s *float32, half int) { panic("BUG: cpu: no AVX2") }
func swigluAVX2(dst, x, gate *float32, n int) { panic("BUG: cpu: no AVX2") }

func lanes16F16AVX512(w, x *uint16, n int, acc *[16]float32) { panic("BUG: cpu: no AVX-512") }
func lanes16F16x4AVX512(w *uint16, stride int, x *uint16, n int, acc *[4][16]float32) {
	panic("BUG: cpu: no AVX-512")
}
func lanes16F32AVX512(w, x *float32, n int, acc *[16]float32) { panic("BUG: cpu: no AVX-512") }
func vecF16AVX512(x, y *uint16, np int, acc *[4][16]float32)  { panic("BUG: cpu: no AVX-512") }
func vecF32AVX512(x, y *float32, np int, acc *[4][16]float32) { panic("BUG: cpu: no AVX-512") }
func madF16AVX512(acc *float32, v *uint16, n int, s float32)  { panic("BUG: cpu: no AVX-512") }
func scaleF16AVX512(acc *float32, n int, s float32)           { panic("BUG: cpu: no AVX-512") }

func swigluAVX512(dst, x, gate *float32, n int) { panic("BUG: cpu: no AVX-512") }

func scoresF16AVX512(k *uint16, q *float32, hd, n int, scale float32, out *float32) {
	panic("BUG: cpu: no AVX-512")
}
func accumVF16AVX512(acc *float32, v *uint16, hd, n int, ms, vs *float32) {
	panic("BUG: cpu: no AVX-512")
}
func expfAVX512(dst, src *float32, n int) { panic("BUG: cpu: no AVX-512") }
func expfAVX2(dst, src *float32, n int)   { panic("BUG: cpu: no AVX2") }
func accumVF16x64AVX512(acc *float32, v *uint16, n int, ms, vs *float32) {
	panic("BUG: cpu: no AVX-512")
}
func roundF16AVX512(dst, src *float32, n int) { panic("BUG: cpu: no AVX-512") }
func accumVF16x64x4AVX512(acc *float32, v *uint16, n int, ms, vs *float32) {
	panic("BUG: cpu: no AVX-512")
}
func ropeNeoXAVX512(v, c, s *float32, half int) { panic("BUG: cpu: no AVX-512") }
