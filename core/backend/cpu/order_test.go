package cpu

import (
	"math"
	"testing"

	"github.com/minfer/minfer/core/quant"
)

// Reference bits from ggml's own CPU code (llama.cpp d32676d7): ggml_vec_dot_f16,
// ggml_vec_dot_bf16 and ggml_vec_swiglu_f32 of libggml-cpu built with GGML_NATIVE off
// for AVX2+FMA+F16C (avx2) and for AVX-512 with VNNI and BF16 (avx512), called by a
// small C program on the inputs of orderInputs.
type dotRef struct {
	n         int
	f16, bf16 uint32
}

var dotRefAVX2 = []dotRef{
	{32, 0xbfcb968e, 0xc1be5ef7},
	{64, 0xc08fbfe3, 0xc285c294},
	{96, 0xc08a4fb8, 0xc2810998},
	{100, 0xc01132c8, 0xc2075f8a},
	{704, 0xbf895d88, 0xc1815e34},
}

var dotRefAVX512 = []dotRef{
	{32, 0xbfcb968d, 0xc1be5ef7},
	{64, 0xc08fbfe3, 0xc285c294},
	{96, 0xc08a4fb8, 0xc2810997},
	{100, 0xc01132c8, 0xc2075f8a},
	{704, 0xbf895d98, 0xc1815e34},
}

var swigluRefAVX2 = []uint32{
	0x80000000, 0xc2740157, 0xc1933dee, 0x81afad2a, 0x00000000, 0x00000000,
	0x42ae68c5, 0x00000000, 0xbe756373, 0x417a1bc1, 0x3ffc0d53, 0x3dcae921,
	0xc184aaa9, 0x3dd64ab7, 0x408fad01, 0x38e0b534, 0x404ac85f, 0x412289ed,
	0xb330b1ba, 0xc1485922, 0xb6dec3bd, 0x40e8a176, 0x34b15f15, 0xbdf38ba9,
	0xba3652c4, 0x314a098c, 0xbbafc6db, 0xbde9a9b9, 0xbb5b63a1, 0x4012afe7,
	0x408b9c25, 0xb6613542, 0xc06d88b8, 0x3cb3ddad, 0xbc0a7404, 0xbb82572a,
	0x3b826e42, 0xbe2c9da5, 0xb3e3c22b, 0xc0baca15,
}

var swigluRefAVX512 = []uint32{
	0x80000000, 0xc2740157, 0xc1933dee, 0x81afad2a, 0x00000000, 0x00000000,
	0x42ae68c5, 0x00000000, 0xbe756373, 0x417a1bc1, 0x3ffc0d53, 0x3dcae921,
	0xc184aaa9, 0x3dd64ab7, 0x408fad01, 0x38e0b534, 0x404ac85f, 0x412289ed,
	0xb330b1ba, 0xc1485922, 0xb6dec3bd, 0x40e8a176, 0x34b15f15, 0xbdf38ba8,
	0xba3652c4, 0x314a098c, 0xbbafc6db, 0xbde9a9b9, 0xbb5b63a0, 0x4012afe7,
	0x408b9c25, 0xb6613542, 0xc06d88b8, 0x3cb3ddad, 0xbc0a7403, 0xbb82572b,
	0x3b826e42, 0xbe2c9da5, 0xb3e3c22b, 0xc0baca15,
}

// lcg is the C program's generator: uniform float32 values in [-1, 1).
type lcg uint32

func (s *lcg) next() float32 {
	*s = *s*1664525 + 1013904223
	return float32(uint32(*s)>>8)/16777216*2 - 1
}

// orderInputs are the C program's vectors: per length, F16 pairs and BF16 pairs (the
// values ×3 and ×5, truncated), then the SwiGLU rows with a few extreme inputs.
func orderInputs() (f16, bf16 [][2][]uint16, x, g []float32) {
	s := lcg(12345)
	for _, r := range dotRefAVX2 {
		var a, b, p, q []uint16
		for range r.n {
			u, v := s.next(), s.next()
			a, b = append(a, quant.F32ToF16(u)), append(b, quant.F32ToF16(v))
			p, q = append(p, uint16(math.Float32bits(u*3)>>16)), append(q, uint16(math.Float32bits(v*5)>>16))
		}
		f16, bf16 = append(f16, [2][]uint16{a, b}), append(bf16, [2][]uint16{p, q})
	}
	x, g = make([]float32, 40), make([]float32, 40)
	for i := range x {
		x[i] = s.next() * 20
		g[i] = s.next()
	}
	copy(x, []float32{-100, 95, 88, -88, 0, float32(math.Copysign(0, -1)), 130, -130})
	return f16, bf16, x, g
}

// TestOrderMatchesGGML: the pure-Go kernels of each Order return ggml's bits.
func TestOrderMatchesGGML(t *testing.T) {
	f16, bf16, x, g := orderInputs()
	for i, r := range dotRefAVX2 {
		if got := math.Float32bits(dotVec8F16(f16[i][0], f16[i][1])); got != r.f16 {
			t.Errorf("avx2 ggml_vec_dot_f16 n=%d: %#08x, ggml %#08x", r.n, got, r.f16)
		}
		if got := math.Float32bits(dotVec8BF16(bf16[i][0], bf16[i][1])); got != r.bf16 {
			t.Errorf("avx2 ggml_vec_dot_bf16 n=%d: %#08x, ggml %#08x", r.n, got, r.bf16)
		}
	}
	for i, r := range dotRefAVX512 {
		if got := math.Float32bits(dotVecF16Go(f16[i][0], f16[i][1])); got != r.f16 {
			t.Errorf("avx512 ggml_vec_dot_f16 n=%d: %#08x, ggml %#08x", r.n, got, r.f16)
		}
		if got := math.Float32bits(dotVecBF16(bf16[i][0], bf16[i][1])); got != r.bf16 {
			t.Errorf("avx512 ggml_vec_dot_bf16 n=%d: %#08x, ggml %#08x", r.n, got, r.bf16)
		}
	}
	for _, c := range []struct {
		name string
		row  func(dst, x, g []float32)
		want []uint32
	}{{"avx2", swigluRow8, swigluRefAVX2}, {"avx512", swigluRow, swigluRefAVX512}} {
		y := make([]float32, len(x))
		c.row(y, x, g)
		for i := range y {
			if got := math.Float32bits(y[i]); got != c.want[i] {
				t.Errorf("%s swiglu(%v)·%v: %#08x, ggml %#08x", c.name, x[i], g[i], got, c.want[i])
			}
		}
	}
}

// TestDPBF16: VDPBF16PS adds the odd pair's product first, rounding after each add
// (checked on an Intel Xeon with AVX512-BF16: lane 0 gives 0, lane 1 gives 1), in the
// Go definition and in SIMD.
func TestDPBF16(t *testing.T) {
	bf := func(f float32) uint16 { return uint16(math.Float32bits(f) >> 16) }
	w, x := make([]uint16, 32), make([]uint16, 32)
	w[0], x[0], w[1], x[1] = bf(1), bf(-1), bf(0x1p-12), bf(0x1p-12)            // lane 0: 1 + 2^-24 - 1
	w[2], x[2], w[3], x[3] = bf(0x1p-12), bf(0x1p-12), bf(0x1p-12), bf(0x1p-12) // lane 1: 1 + 2^-24 + 2^-24
	for _, c := range []struct {
		name string
		f    func(acc *[16]float32)
	}{
		{"go", func(acc *[16]float32) { dpLanes16Go(acc, w, x, 1, 32) }},
		{"dispatch", func(acc *[16]float32) { dpLanes16(acc, w, x, 1, 32) }},
	} {
		acc := [16]float32{1, 1}
		c.f(&acc)
		if acc[0] != 0 || acc[1] != 1 {
			t.Errorf("%s: lanes 0, 1 = %v, %v; VDPBF16PS gives 0, 1", c.name, acc[0], acc[1])
		}
	}
}

// TestDPBF16SIMDMatchesGo: the AVX2 emulation of VDPBF16PS returns the Go definition's
// bits for random rows, strided as dotVecBF16 reads them.
func TestDPBF16SIMDMatchesGo(t *testing.T) {
	if !useDPBF16 {
		t.Skip("no AVX2+FMA")
	}
	s := lcg(7)
	for _, n := range []int{32, 64, 96, 704, 4864} {
		w, x := make([]uint16, n), make([]uint16, n)
		for i := range w {
			w[i], x[i] = uint16(math.Float32bits(s.next()*4)>>16), uint16(math.Float32bits(s.next())>>16)
		}
		for _, stride := range []int{32, 64} {
			chunks := (n-32)/stride + 1
			var a, b [16]float32
			dpLanes16Go(&a, w, x, chunks, stride)
			dpLanesBF16AVX2(&w[0], &x[0], chunks, 2*stride, &b)
			if a != b {
				t.Errorf("n=%d stride %d: SIMD %v, Go %v", n, stride, b, a)
			}
		}
	}
}

func TestParseOrder(t *testing.T) {
	for _, o := range []Order{OrderAVX512, OrderAVX2} {
		if got, err := ParseOrder(o.String()); err != nil || got != o {
			t.Errorf("ParseOrder(%q) = %v, %v", o.String(), got, err)
		}
	}
	if _, err := ParseOrder("avx1024"); err == nil {
		t.Error("ParseOrder(avx1024): no error")
	}
}
