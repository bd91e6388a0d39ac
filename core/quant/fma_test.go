package quant

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// exactFMA32 is a·b+c computed exactly and rounded once to float32 (ties to even).
func exactFMA32(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(300).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetPrec(300).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetPrec(300).SetFloat64(float64(c)))
	f, _ := x.Float32()
	return f
}

// TestFMA32 checks fma32 against exact arithmetic, including the double-rounding
// traps: a·b exactly halfway between two float32s and c far below float64 precision,
// where rounding through float64 would tie to even on the wrong side.
func TestFMA32(t *testing.T) {
	one := float32(1 + 1.0/4096) // (1+2^-12)² = 1 + 2^-11 + 2^-24: a float32 midpoint
	tiny := float32(math.Ldexp(1, -80))
	cases := []struct{ a, b, c float32 }{
		{one, one, tiny}, {one, one, -tiny}, {one, one, 0},
		{-one, one, tiny}, {-one, one, -tiny},
		{3, 5, 7}, {1e-20, 1e-20, 1e-30}, {1e30, 1e30, -1},
	}
	rng := rand.New(rand.NewPCG(41, 42))
	for i := 0; i < 20000; i++ {
		r := func() float32 { return float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(40)-20))) }
		cases = append(cases, struct{ a, b, c float32 }{r(), r(), r()})
	}
	for _, c := range cases {
		got, want := fma32(c.a, c.b, c.c), exactFMA32(c.a, c.b, c.c)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%g, %g, %g) = %g (%#x), want %g (%#x)", c.a, c.b, c.c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	if naive := float32(float64(one)*float64(one) + float64(tiny)); naive == exactFMA32(one, one, tiny) {
		t.Fatal("the double-rounding case does not exercise the correction")
	}
}
