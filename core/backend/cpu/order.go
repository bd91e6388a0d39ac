package cpu

import (
	"fmt"
	"math"

	"github.com/minfer/minfer/core/quant"
)

// Order is which build of ggml's CPU backend the float ops reproduce, bit for bit.
// llama.cpp's results depend on the SIMD width it was compiled for: the quantized dots
// are the same in every x86 build, but the float reductions and SwiGLU's expf are not.
// The order is a choice of rounding, not of instructions: both run on any CPU, with
// SIMD kernels where this package has them and pure Go elsewhere.
type Order int

const (
	// OrderAVX512 is ggml built for an AVX-512 CPU with VNNI and BF16 (a Zen 4 class
	// CPU, where shared/testdata/golden was recorded): tinyBLAS and ggml_vec_dot_* with
	// 16-lane float accumulators, BF16 through VDPBF16PS, the AVX-512 ggml_v_expf.
	OrderAVX512 Order = iota
	// OrderAVX2 is ggml built for an AVX2+FMA+F16C CPU without AVX-512 (where
	// shared/testdata/quant-types was recorded): 8-lane float accumulators and the
	// AVX2 ggml_v_expf. Its F16/BF16/F32 matmuls and F16 attention scores run in pure Go.
	OrderAVX2
)

// String is the name ParseOrder reads.
func (o Order) String() string {
	switch o {
	case OrderAVX512:
		return "avx512"
	case OrderAVX2:
		return "avx2"
	}
	return fmt.Sprintf("Order(%d)", int(o))
}

// ParseOrder reads "avx512" ("" too) or "avx2".
func ParseOrder(s string) (Order, error) {
	switch s {
	case "", "avx512":
		return OrderAVX512, nil
	case "avx2":
		return OrderAVX2, nil
	}
	return 0, fmt.Errorf("cpu order %q: want avx512 or avx2", s)
}

// hsum8 is tinyBLAS's hsum(__m256) and ggml's hsum_float_8: the two 128-bit halves
// added, then _mm_movehl_ps and _mm_movehdup_ps.
func hsum8(v *[8]float32) float32 {
	t0, t1, t2, t3 := v[4]+v[0], v[5]+v[1], v[6]+v[2], v[7]+v[3]
	return (t0 + t2) + (t1 + t3)
}

// vecReduce8 is GGML_F32x8_REDUCE (ARR = 4): 0+2 and 1+3, then 0+1, then the 128-bit
// halves added and two _mm_hadd_ps.
func vecReduce8(acc *[4][8]float32) float32 {
	var s [8]float32
	for l := range 8 {
		s[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l])
	}
	t0, t1, t2, t3 := s[0]+s[4], s[1]+s[5], s[2]+s[6], s[3]+s[7]
	return (t0 + t1) + (t2 + t3)
}

// dotLanes8F32 is tinyBLAS<8, __m256> on F32: lane l sums w[8c+l]·x[8c+l] with FMA.
func dotLanes8F32(w, x []float32) float32 {
	var acc [8]float32
	x = x[:len(w)]
	for c := 0; c+8 <= len(w); c += 8 {
		ws, xs := w[c:c+8:c+8], x[c:c+8:c+8]
		for l := range 8 {
			acc[l] = fma32(ws[l], xs[l], acc[l])
		}
	}
	return hsum8(&acc)
}

// dotLanes8F16 is tinyBLAS<8, __m256> on F16 (values widened, products in float32).
func dotLanes8F16(w, x []uint16) float32 {
	var acc [8]float32
	x = x[:len(w)]
	for c := 0; c+8 <= len(w); c += 8 {
		ws, xs := w[c:c+8:c+8], x[c:c+8:c+8]
		for l := range 8 {
			acc[l] = fma32(quant.F16ToF32(ws[l]), quant.F16ToF32(xs[l]), acc[l])
		}
	}
	return hsum8(&acc)
}

// dotLanes8BF16 is tinyBLAS<8, __m256> on BF16 (AVX2 builds).
func dotLanes8BF16(w, x []uint16) float32 {
	var acc [8]float32
	x = x[:len(w)]
	for c := 0; c+8 <= len(w); c += 8 {
		ws, xs := w[c:c+8:c+8], x[c:c+8:c+8]
		for l := range 8 {
			acc[l] = fma32(quant.BF16ToF32(ws[l]), quant.BF16ToF32(xs[l]), acc[l])
		}
	}
	return hsum8(&acc)
}

// dotVec8F16 is ggml_vec_dot_f16 in an AVX2 build: four 8-lane FMA accumulators over
// steps of 32, GGML_F32x8_REDUCE, the n%32 leftovers added in float64.
func dotVec8F16(x, y []uint16) float32 {
	n := len(x)
	y = y[:n]
	np := n &^ 31
	var sum float64
	if np > 0 {
		var acc [4][8]float32
		for i := 0; i < np; i += 32 {
			xs, ys := x[i:i+32:i+32], y[i:i+32:i+32]
			for j := range 4 {
				for l := range 8 {
					acc[j][l] = fma32(quant.F16ToF32(xs[8*j+l]), quant.F16ToF32(ys[8*j+l]), acc[j][l])
				}
			}
		}
		sum = float64(vecReduce8(&acc))
	}
	for i := np; i < n; i++ {
		sum += float64(quant.F16ToF32(x[i]) * quant.F16ToF32(y[i]))
	}
	return float32(sum)
}

// dotVec8F32 is ggml_vec_dot_f32 in an AVX2 build: as dotVec8F16, the leftovers fused
// into a float32 sum.
func dotVec8F32(x, y []float32) float32 {
	n := len(x)
	y = y[:n]
	np := n &^ 31
	var sum float32
	if np > 0 {
		var acc [4][8]float32
		for i := 0; i < np; i += 32 {
			xs, ys := x[i:i+32:i+32], y[i:i+32:i+32]
			for j := range 4 {
				for l := range 8 {
					acc[j][l] = fma32(xs[8*j+l], ys[8*j+l], acc[j][l])
				}
			}
		}
		sum = vecReduce8(&acc)
	}
	for i := np; i < n; i++ {
		sum = fma32(x[i], y[i], sum)
	}
	return sum
}

// dotVec8BF16 is ggml_vec_dot_bf16 in an AVX2 build: four 8-lane accumulators over
// steps of 32 (products of bfloat16 values are exact, so GCC's contraction to FMA does
// not change them), (0+2)+(1+3), the halves, movehl, movehdup; leftovers in float64.
func dotVec8BF16(x, y []uint16) float32 {
	n := len(x)
	y = y[:n]
	np := n &^ 31
	var sum float64
	if np > 0 {
		var acc [4][8]float32
		for i := 0; i < np; i += 32 {
			xs, ys := x[i:i+32:i+32], y[i:i+32:i+32]
			for j := range 4 {
				for l := range 8 {
					acc[j][l] = fma32(quant.BF16ToF32(xs[8*j+l]), quant.BF16ToF32(ys[8*j+l]), acc[j][l])
				}
			}
		}
		var s [8]float32
		for l := range 8 {
			s[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l])
		}
		sum = float64(hsum8(&s))
	}
	for i := np; i < n; i++ {
		sum += float64(quant.BF16ToF32(x[i]) * quant.BF16ToF32(y[i]))
	}
	return float32(sum)
}

// dpLanes16Go adds the VDPBF16PS dot of chunks steps of 32 bfloat16 values to 16
// lanes, the pointers advanced by stride values a step: lane l += w[2l+1]·x[2l+1],
// then += w[2l]·x[2l], each rounded once (the products of bfloat16 values are exact in
// float32, so each step is an FMA). The instruction's DAZ and FTZ (subnormal inputs
// and results read and written as zero) are not reproduced: they differ only where a
// value or a partial sum is below 2^-126.
func dpLanes16Go(acc *[16]float32, w, x []uint16, chunks, stride int) {
	for c := range chunks {
		ws, xs := w[c*stride:c*stride+32:c*stride+32], x[c*stride:c*stride+32:c*stride+32]
		for l := range 16 {
			acc[l] = fma32(quant.BF16ToF32(ws[2*l+1]), quant.BF16ToF32(xs[2*l+1]), acc[l])
			acc[l] = fma32(quant.BF16ToF32(ws[2*l]), quant.BF16ToF32(xs[2*l]), acc[l])
		}
	}
}

// dpLanes16 is dpLanes16Go, in SIMD where the CPU has AVX2 and FMA (the same bits).
func dpLanes16(acc *[16]float32, w, x []uint16, chunks, stride int) {
	if chunks == 0 {
		return
	}
	end := (chunks-1)*stride + 32
	w, x = w[:end], x[:end]
	if useDPBF16 {
		dpLanesBF16AVX2(&w[0], &x[0], chunks, 2*stride, acc)
		return
	}
	dpLanes16Go(acc, w, x, chunks, stride)
}

// dotLanes32BF16 is tinyBLAS<32, __m512, __m512bh> (AVX512-BF16 builds): VDPBF16PS
// over steps of 32 values into 16 lanes, then _mm512_reduce_add_ps.
func dotLanes32BF16(w, x []uint16) float32 {
	var acc [16]float32
	dpLanes16(&acc, w, x[:len(w)], len(w)/32, 32)
	return reduce16(&acc)
}

// dotVecBF16 is ggml_vec_dot_bf16 in an AVX512-BF16 build: two VDPBF16PS accumulators
// over steps of 64, each reduced and added in float64, then the n%64 leftovers.
func dotVecBF16(x, y []uint16) float32 {
	n := len(x)
	y = y[:n]
	np := n &^ 63
	var c1, c2 [16]float32
	if np > 0 {
		dpLanes16(&c1, x, y, np/64, 64)
		dpLanes16(&c2, x[32:], y[32:], np/64, 64)
	}
	sum := float64(reduce16(&c1))
	sum += float64(reduce16(&c2))
	for i := np; i < n; i++ {
		sum += float64(quant.BF16ToF32(x[i]) * quant.BF16ToF32(y[i]))
	}
	return float32(sum)
}

// vExpf8 is ggml_v_expf of an AVX2 build, one lane at a time: the same polynomial as
// vExpf without its constant term, scaled as k·j + k with k = 2^n built from z's bits,
// and ggml's two-step scaling where |n| > 126.
func vExpf8(x float32) float32 {
	const r = float32(0x1.8p23)
	z := fma32(x, 0x1.715476p+0, r)
	n := z - r
	b := fma32(-n, 0x1.7f7d1cp-20, fma32(-n, 0x1.62e4p-1, x))
	e := math.Float32bits(z) << 23
	k := math.Float32frombits(e + math.Float32bits(1))
	u := b * b
	c1 := float32(0x1.ffffecp-1)
	j := fma32(fma32(fma32(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, fma32(0x1.555e66p-3, b, 0x1.fffdb6p-2)),
		u, float32(c1*b))
	an := float32(math.Abs(float64(n)))
	if !(an > 126) { // NaN takes this path too, as _CMP_GT_OQ is false for it
		return fma32(k, j, k)
	}
	g := uint32(0)
	if n <= 0 {
		g = 0x82000000
	}
	s1 := math.Float32frombits(g + 0x7f000000)
	s2 := math.Float32frombits(e - g)
	if an > 192 {
		return s1 * s1
	}
	return float32(fma32(s2, j, s2) * s1)
}

// swigluRow8 is ggml_vec_swiglu_f32 of an AVX2 build: the AVX2 silu on groups of 8,
// the scalar one on the rest.
func swigluRow8(dst, x, g []float32) {
	n := len(x)
	g, dst = g[:n], dst[:n]
	v := n &^ 7
	for i := 0; i < v; i++ {
		dst[i] = float32(x[i]/(1+vExpf8(0-x[i]))) * g[i]
	}
	for i := v; i < n; i++ {
		dst[i] = x[i] / (1 + expf(-x[i])) * g[i]
	}
}
