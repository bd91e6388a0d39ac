package cpu

import (
	"math"

	"github.com/minfer/minfer/core/quant"
)

// Float dot products in the exact operation order of ggml's x86 AVX-512 code, so F16
// and F32 models reproduce llama.cpp's rounding:
//
//   - lanes16: tinyBLAS (llamafile sgemm, used by llama.cpp for every matmul with ≥ 2
//     activation rows when cols%16 == 0 and rows%4 == 0): lane l of a 16-wide
//     accumulator sums w[16c+l]·x[16c+l] with FMA over c, then _mm512_reduce_add_ps.
//   - vec: ggml_vec_dot_f16 / ggml_vec_dot_f32: four 16-wide FMA accumulators over
//     steps of 64, combined (0+2, 1+3, then 0+1) and reduced, then the n%64 leftovers
//     added one by one (in float64 for F16, float32 FMA for F32).
//
// fma32 computes a·b+c rounded once to float32 via float64: a·b is exact in float64, so
// only the (rare) double rounding of the sum can differ from a hardware float32 FMA.

func fma32(a, b, c float32) float32 {
	return float32(math.FMA(float64(a), float64(b), float64(c)))
}

// reduce16 is _mm512_reduce_add_ps: halves added pairwise down to one value.
func reduce16(v *[16]float32) float32 {
	var h [8]float32
	for i := range h {
		h[i] = v[i+8] + v[i]
	}
	q0 := h[4] + h[0]
	q1 := h[5] + h[1]
	q2 := h[6] + h[2]
	q3 := h[7] + h[3]
	return (q0 + q2) + (q1 + q3)
}

// dotLanes16F32 is tinyBLAS's F32 dot of one weight row and one activation row;
// len(w) == len(x), a multiple of 16.
func dotLanes16F32Go(w, x []float32) float32 {
	var acc [16]float32
	x = x[:len(w)]
	for c := 0; c+16 <= len(w); c += 16 {
		ws := w[c : c+16 : c+16]
		xs := x[c : c+16 : c+16]
		for l := range 16 {
			acc[l] = fma32(ws[l], xs[l], acc[l])
		}
	}
	return reduce16(&acc)
}

// dotLanes16F16 is tinyBLAS's F16 dot (both operands binary16, products in float32).
func dotLanes16F16Go(w, x []uint16) float32 {
	var acc [16]float32
	x = x[:len(w)]
	for c := 0; c+16 <= len(w); c += 16 {
		ws := w[c : c+16 : c+16]
		xs := x[c : c+16 : c+16]
		for l := range 16 {
			acc[l] = fma32(quant.F16ToF32(ws[l]), quant.F16ToF32(xs[l]), acc[l])
		}
	}
	return reduce16(&acc)
}

// vecReduce combines ggml's four 16-lane accumulators (GGML_F32x16_REDUCE with ARR=4).
func vecReduce(acc *[4][16]float32) float32 {
	var s [16]float32
	for l := range 16 {
		a := acc[0][l] + acc[2][l]
		b := acc[1][l] + acc[3][l]
		s[l] = a + b
	}
	return reduce16(&s)
}

// dotVecF16 is ggml_vec_dot_f16 on AVX-512: result rounded from a float64 sum.
func dotVecF16Go(x, y []uint16) float32 {
	n := len(x)
	y = y[:n]
	np := n &^ 63
	var sum float64
	if np > 0 {
		var acc [4][16]float32
		for i := 0; i < np; i += 64 {
			xs := x[i : i+64 : i+64]
			ys := y[i : i+64 : i+64]
			for j := range 4 {
				for l := range 16 {
					acc[j][l] = fma32(quant.F16ToF32(xs[16*j+l]), quant.F16ToF32(ys[16*j+l]), acc[j][l])
				}
			}
		}
		sum = float64(vecReduce(&acc))
	}
	for i := np; i < n; i++ {
		sum += float64(quant.F16ToF32(x[i]) * quant.F16ToF32(y[i]))
	}
	return float32(sum)
}

// dotVecF32 is ggml_vec_dot_f32 on AVX-512: a float32 sum throughout.
func dotVecF32Go(x, y []float32) float32 {
	n := len(x)
	y = y[:n]
	np := n &^ 63
	var sum float32
	if np > 0 {
		var acc [4][16]float32
		for i := 0; i < np; i += 64 {
			xs := x[i : i+64 : i+64]
			ys := y[i : i+64 : i+64]
			for j := range 4 {
				for l := range 16 {
					acc[j][l] = fma32(xs[16*j+l], ys[16*j+l], acc[j][l])
				}
			}
		}
		sum = vecReduce(&acc)
	}
	for i := np; i < n; i++ {
		sum = fma32(x[i], y[i], sum)
	}
	return sum
}

// The dispatchers: AVX-512 where available, else AVX2+FMA+F16C (same bits), else the Go
// definitions.

func dotLanes16F32(w, x []float32) float32 {
	if !useAVX512 && !useAVX2 || len(w) == 0 {
		return dotLanes16F32Go(w, x)
	}
	var acc [16]float32
	x = x[:len(w)]
	if useAVX512 {
		lanes16F32AVX512(&w[0], &x[0], len(w), &acc)
	} else {
		lanes16F32AVX2(&w[0], &x[0], len(w), &acc)
	}
	return reduce16(&acc)
}

func dotLanes16F16(w, x []uint16) float32 {
	if !useAVX512 && !useAVX2 || len(w) == 0 {
		return dotLanes16F16Go(w, x)
	}
	var acc [16]float32
	x = x[:len(w)]
	if useAVX512 {
		lanes16F16AVX512(&w[0], &x[0], len(w), &acc)
	} else {
		lanes16F16AVX2(&w[0], &x[0], len(w), &acc)
	}
	return reduce16(&acc)
}

// dotLanes16F16x4 writes to out[0:4] the tinyBLAS dots of four consecutive weight rows
// of w (each n = len(x) values) with x: the same bits as four dotLanes16F16 calls.
func dotLanes16F16x4(out []float32, w, x []uint16) {
	n := len(x)
	w = w[:4*n]
	if !useAVX512 && !useAVX2 || n == 0 {
		for i := range 4 {
			out[i] = dotLanes16F16Go(w[i*n:(i+1)*n], x)
		}
		return
	}
	var acc [4][16]float32
	if useAVX512 {
		lanes16F16x4AVX512(&w[0], n, &x[0], n, &acc)
	} else {
		lanes16F16x4AVX2(&w[0], n, &x[0], n, &acc)
	}
	for i := range 4 {
		out[i] = reduce16(&acc[i])
	}
}

func dotVecF16(x, y []uint16) float32 {
	n := len(x)
	np := n &^ 63
	if !useAVX512 && !useAVX2 || np == 0 {
		return dotVecF16Go(x, y)
	}
	y = y[:n]
	var acc [4][16]float32
	if useAVX512 {
		vecF16AVX512(&x[0], &y[0], np, &acc)
	} else {
		vecF16AVX2(&x[0], &y[0], np, &acc)
	}
	sum := float64(vecReduce(&acc))
	for i := np; i < n; i++ {
		sum += float64(quant.F16ToF32(x[i]) * quant.F16ToF32(y[i]))
	}
	return float32(sum)
}

func dotVecF32(x, y []float32) float32 {
	n := len(x)
	np := n &^ 63
	if !useAVX512 && !useAVX2 || np == 0 {
		return dotVecF32Go(x, y)
	}
	y = y[:n]
	var acc [4][16]float32
	if useAVX512 {
		vecF32AVX512(&x[0], &y[0], np, &acc)
	} else {
		vecF32AVX2(&x[0], &y[0], np, &acc)
	}
	sum := vecReduce(&acc)
	for i := np; i < n; i++ {
		sum = fma32(x[i], y[i], sum)
	}
	return sum
}

// madF16 is ggml_vec_mad_f16 on an accumulator of F16 values held as float32:
// acc[i] = f16(fma(v[i], s, acc[i])).
func madF16(acc []float32, v []uint16, s float32) {
	n := len(acc)
	v = v[:n]
	m := 0
	if useAVX512 {
		m = n &^ 15
		if m > 0 {
			madF16AVX512(&acc[0], &v[0], m, s)
		}
	} else if useAVX2 {
		m = n &^ 7
		if m > 0 {
			madF16AVX2(&acc[0], &v[0], m, s)
		}
	}
	for i := m; i < n; i++ {
		acc[i] = f16Round(fma32(quant.F16ToF32(v[i]), s, acc[i]))
	}
}

// scaleF16 is ggml_vec_scale_f16: acc[i] = f16(acc[i]·s).
func scaleF16(acc []float32, s float32) {
	n := len(acc)
	m := 0
	if useAVX512 {
		m = n &^ 15
		if m > 0 {
			scaleF16AVX512(&acc[0], m, s)
		}
	} else if useAVX2 {
		m = n &^ 7
		if m > 0 {
			scaleF16AVX2(&acc[0], m, s)
		}
	}
	for i := m; i < n; i++ {
		acc[i] = f16Round(acc[i] * s)
	}
}
