package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSinfCosfGlibc: inputs where glibc 2.36's sinf/cosf (x86-64, FMA build) return
// another float than the correctly rounded one, in each range-reduction path, with
// glibc's results.
func TestSinfCosfGlibc(t *testing.T) {
	for _, c := range []struct {
		x, want uint32
		sin     bool
	}{
		{0x3f3d647d, 0x3f2c9529, true},  // sinf(0.7398146): |x| < π/4
		{0x3f048966, 0x3efd63bc, true},  // sinf(0.51772153)
		{0x3eb3fef7, 0x3eb04fa9, true},  // sinf(0.3515546)
		{0x428ab49d, 0x3e712418, true},  // sinf(69.35276): |x| < 120
		{0x4271ffc4, 0xbf309a31, false}, // cosf(60.49977)
		{0x4219c818, 0x3f2dcdc7, true},  // sinf(38.445404)
		{0xc2730a04, 0xbef609f8, false}, // cosf(-60.75978)
		{0xc080e3eb, 0xbf21e0e1, false}, // cosf(-4.027822)
		{0xc292a88a, 0xbef4add0, false}, // cosf(-73.32918)
		{0x455d8beb, 0x3f042746, false}, // cosf(3544.7449): large
		{0x452237fc, 0x3f046279, true},  // sinf(2595.499)
		{0x457aeb9c, 0xbe69465d, true},  // sinf(4014.7256)
		{0x49039092, 0x3f2ce95c, false}, // cosf(538889.1)
		{0x491d65f0, 0xbef8b222, false}, // cosf(644703)
		{0x4901d2dd, 0xbf2a08b9, true},  // sinf(531757.8)
		{0xc63e4874, 0x3e88e1ea, false}, // cosf(-12178.113)
		{0xc7568a4f, 0x3f0d5b71, false}, // cosf(-54922.31)
		{0xc79b092b, 0xbe904476, true},  // sinf(-79378.336)
	} {
		x := math.Float32frombits(c.x)
		f, name := cosf, "cosf"
		if c.sin {
			f, name = sinf, "sinf"
		}
		if got := f(x); math.Float32bits(got) != c.want {
			t.Errorf("%s(%v): got %v (%#x), want %v (%#x)", name, x, got, math.Float32bits(got), math.Float32frombits(c.want), c.want)
		}
	}
}

// TestSinfCosfAccuracy: within one ulp of the exact value everywhere (glibc's bound is
// 0.56 ulp), exact at the special points, NaN for infinities and NaN.
func TestSinfCosfAccuracy(t *testing.T) {
	ulp := func(got float32, want float64) float64 {
		w := float32(want)
		u := math.Abs(float64(math.Nextafter32(w, float32(math.Inf(1))) - w))
		return math.Abs(float64(got)-want) / u
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		x := float32(math.Exp(rng.Float64()*40 - 20))
		if i%2 == 1 {
			x = -x
		}
		if u := ulp(sinf(x), math.Sin(float64(x))); u > 1 {
			t.Fatalf("sinf(%v) = %v: %.2f ulp from %v", x, sinf(x), u, math.Sin(float64(x)))
		}
		if u := ulp(cosf(x), math.Cos(float64(x))); u > 1 {
			t.Fatalf("cosf(%v) = %v: %.2f ulp from %v", x, cosf(x), u, math.Cos(float64(x)))
		}
	}
	if sinf(0) != 0 || cosf(0) != 1 || math.Float32bits(sinf(float32(math.Copysign(0, -1)))) != 1<<31 {
		t.Errorf("sinf(0), cosf(0), sinf(-0): got %v %v %v", sinf(0), cosf(0), sinf(float32(math.Copysign(0, -1))))
	}
	for _, x := range []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())} {
		if s, c := sinf(x), cosf(x); s == s || c == c {
			t.Errorf("sinf/cosf(%v): got %v %v, want NaN", x, s, c)
		}
	}
}
