package cpu

import (
	"math"
	"math/big"
	"testing"
)

// TestExpfGlibc: inputs where glibc 2.36's expf (the FMA build, as called by
// llama.cpp on x86-64) and the correctly rounded exponential differ, and the one
// negative input where only the FMA contraction of x·32/ln2 gives glibc's bits. The
// wanted values came from libm on the development machine (an exhaustive comparison
// over all float32 found no other difference).
func TestExpfGlibc(t *testing.T) {
	for _, c := range []struct{ x, want uint32 }{
		{0xbf80019e, 0x3ebc5851}, // −1.0000494
		{0xc080022a, 0x3c960089}, // −4.000264
		{0x3e000230, 0x3f910b52}, // 0.12500834
		{0xc20007d6, 0x286265f2}, // −32.007652
		{0xc27c65d9, 0x11fa2993}, // −63.09946
		{0x00000000, 0x3f800000}, // 0
		{0x80000000, 0x3f800000}, // −0
		{0x3f800000, 0x402df854}, // 1
		{0xff800000, 0x00000000}, // −Inf
		{0x7f800000, 0x7f800000}, // +Inf
		{0x42b17217, 0x7f7fff84}, // 88.72283 (largest finite result)
		{0x42b17218, 0x7f800000}, // overflow
		{0xc2cff1b4, 0x00000001}, // −103.97207 (smallest subnormal)
		{0xc2cff1b5, 0x00000000}, // underflow
		{0xc2d00000, 0x00000000}, // −104
	} {
		x := math.Float32frombits(c.x)
		if got := math.Float32bits(expf(x)); got != c.want {
			t.Errorf("expf(%g) = %#08x (%g), want %#08x (%g)", x, got, math.Float32frombits(got), c.want, math.Float32frombits(c.want))
		}
	}
	if got := expf(float32(math.NaN())); !math.IsNaN(float64(got)) {
		t.Errorf("expf(NaN) = %g, want NaN", got)
	}
}

// TestExp2fTab: the table is 2^(i/32) rounded to nearest, less i<<47.
func TestExp2fTab(t *testing.T) {
	root := new(big.Float).SetPrec(300).SetInt64(2)
	for range 5 {
		root.Sqrt(root)
	}
	p := new(big.Float).SetPrec(300).SetInt64(1)
	for i, got := range exp2fTab {
		f, _ := p.Float64()
		if want := math.Float64bits(f) - uint64(i)<<47; got != want {
			t.Errorf("exp2fTab[%d] = %#x, want %#x", i, got, want)
		}
		p.Mul(p, root)
	}
}

// TestExpfCloseToExp: everywhere else within one float32 ulp of the exact value.
func TestExpfCloseToExp(t *testing.T) {
	for b := uint32(0xc2cf0000); b > 0x80000000; b -= 0x1237 {
		x := math.Float32frombits(b)
		got, want := expf(x), float32(math.Exp(float64(x)))
		if got != want && math.Nextafter32(want, 0) != got && math.Nextafter32(want, 1) != got {
			t.Fatalf("expf(%g) = %g, want %g (±1 ulp)", x, got, want)
		}
	}
}

// TestExpfsMatchesExpf: the vector exponential gives expf's bits, on a sweep over all
// float32 bit patterns and on the special values (run over every pattern once when it
// was written: no difference).
func TestExpfsMatchesExpf(t *testing.T) {
	src := []float32{0, float32(math.Copysign(0, -1)), 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), 88.72283, 88.72284, -103.97207, -103.97208, -104, 1e-30, -1e-30,
		math.Float32frombits(0xbf80019e), math.Float32frombits(0xc27c65d9)}
	for b := uint64(0); b < 1<<32; b += 4093 {
		src = append(src, math.Float32frombits(uint32(b)))
	}
	check := func(name string, dst []float32) {
		for i, x := range src[:len(dst)] {
			want := expf(x)
			if got := dst[i]; math.Float32bits(got) != math.Float32bits(want) && !(math.IsNaN(float64(got)) && math.IsNaN(float64(want))) {
				t.Fatalf("%s(%g) = %g (%#08x), want expf's %g (%#08x)", name, x, got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
	}
	dst := make([]float32, len(src))
	expfs(dst, src)
	check("expfs", dst)
	if hasAVX2 { // the AVX2 kernel too where expfs runs the AVX-512 one
		m := len(src) &^ 3
		clear(dst)
		expfAVX2(&dst[0], &src[0], m)
		check("expfAVX2", dst[:m])
	}
}
