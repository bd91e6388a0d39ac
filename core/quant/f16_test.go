package quant

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// refRound finds the representable value nearest to f among the sorted finite positive
// values of a format (ties to the even bit pattern), independently of the bit tricks.
func refRound(f float32, vals []float64, bits []uint16, inf uint16) uint16 {
	a := math.Abs(float64(f))
	i := sort.SearchFloat64s(vals, a) // vals[i-1] < a <= vals[i]
	var h uint16
	switch {
	case i == len(vals):
		last := vals[len(vals)-1]
		// Values at or beyond last + half an ulp round to Inf.
		ulp := last - vals[len(vals)-2]
		if a >= last+ulp/2 {
			h = inf
		} else {
			h = bits[len(bits)-1]
		}
	case vals[i] == a || i == 0:
		h = bits[i]
	default:
		lo, hi := a-vals[i-1], vals[i]-a
		switch {
		case lo < hi:
			h = bits[i-1]
		case hi < lo:
			h = bits[i]
		case bits[i-1]&1 == 0:
			h = bits[i-1]
		default:
			h = bits[i]
		}
	}
	if math.Signbit(float64(f)) {
		h |= 0x8000
	}
	return h
}

func finiteTable(conv func(uint16) float32, inf uint16) ([]float64, []uint16) {
	var vals []float64
	var bits []uint16
	for h := uint16(0); h < inf; h++ {
		vals = append(vals, float64(conv(h)))
		bits = append(bits, h)
	}
	return vals, bits
}

func TestF16RoundTripAllValues(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if f != f16ToF32Slow(uint16(h)) && !math.IsNaN(float64(f)) {
			t.Fatalf("F16ToF32(%#04x): table %v, slow %v", h, f, f16ToF32Slow(uint16(h)))
		}
		got := F32ToF16(f)
		want := uint16(h)
		if math.IsNaN(float64(f)) {
			want = uint16(h)&0x8000 | 0x7e00
		}
		if got != want {
			t.Fatalf("F32ToF16(F16ToF32(%#04x) = %v) = %#04x, want %#04x", h, f, got, want)
		}
	}
}

func TestF32ToF16Rounding(t *testing.T) {
	vals, bits := finiteTable(F16ToF32, 0x7c00)
	rng := rand.New(rand.NewPCG(1, 2))
	var cases []float32
	// Every midpoint between neighbours (ties), and points just around them.
	for i := 1; i < len(vals); i++ {
		m := float32((vals[i-1] + vals[i]) / 2)
		cases = append(cases, m, math.Nextafter32(m, 0), math.Nextafter32(m, 1e9), -m)
	}
	for i := 0; i < 200000; i++ {
		cases = append(cases, math.Float32frombits(rng.Uint32()&0x7fffffff)*float32(1-2*rng.IntN(2)))
	}
	cases = append(cases, 65504, 65519.99, 65520, 1e10, float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), 5.96e-8, 2.98e-8, 2.99e-8)
	for _, f := range cases {
		got := F32ToF16(f)
		var want uint16
		switch {
		case math.IsNaN(float64(f)):
			want = uint16(math.Float32bits(f)>>16)&0x8000 | 0x7e00
		case math.IsInf(float64(f), 0):
			want = uint16(math.Float32bits(f)>>16)&0x8000 | 0x7c00
		default:
			want = refRound(f, vals, bits, 0x7c00)
		}
		if got != want {
			t.Fatalf("F32ToF16(%g [%#08x]) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
}

func TestBF16(t *testing.T) {
	vals, bits := finiteTable(BF16ToF32, 0x7f80)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200000; i++ {
		u := rng.Uint32()
		f := math.Float32frombits(u)
		got := F32ToBF16(f)
		var want uint16
		switch {
		case math.IsNaN(float64(f)):
			want = uint16(u>>16) | 0x40
		default:
			want = refRound(f, vals, bits, 0x7f80)
		}
		if got != want {
			t.Fatalf("F32ToBF16(%g [%#08x]) = %#04x, want %#04x", f, u, got, want)
		}
	}
	for h := 0; h < 1<<16; h++ {
		f := BF16ToF32(uint16(h))
		if math.IsNaN(float64(f)) {
			continue
		}
		if got := F32ToBF16(f); got != uint16(h) {
			t.Fatalf("F32ToBF16(BF16ToF32(%#04x)) = %#04x", h, got)
		}
	}
}
