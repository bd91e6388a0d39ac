package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/minfer/minfer/core/quant"
)

// TestQuantDotsMatchGGMLOrder: core/quant's VecDot gives the reference kernels' bits
// (ggml's float order) on random rows of several lengths and scales.
func TestQuantDotsMatchGGMLOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for typ, g := range ggmlDots {
		tr, _ := typ.Lookup()
		vt, _ := tr.VecDotType.Lookup()
		for _, n := range []int{256, 768, 4864} {
			for trial := range 8 {
				src := make([]float32, n)
				act := make([]float32, n)
				for i := range src {
					src[i] = float32(rng.NormFloat64() * math.Ldexp(1, trial-4))
					act[i] = float32(rng.NormFloat64() * 3)
				}
				w := make([]byte, n/tr.BlockSize*tr.BlockBytes)
				tr.Quantize(w, src)
				x := make([]byte, n/vt.BlockSize*vt.BlockBytes)
				vt.FromFloat(x, act)
				got, want := tr.VecDot(n, w, x), g(n, w, x)
				if math.Float32bits(got) != math.Float32bits(want) {
					t.Errorf("%s n=%d trial %d: core/quant %g, ggml order %g", typ, n, trial, got, want)
				}
			}
		}
	}
}

// TestGGMLDotsOrder pins the lane layout on a case where the order is visible: every
// block scale differs by a power of two, so a different association rounds differently.
func TestGGMLDotsOrder(t *testing.T) {
	const n = 64 // two Q8_0 blocks
	w := make([]byte, 2*q8_0Bytes)
	x := make([]byte, 2*q8_0Bytes)
	putF16 := func(b []byte, f float32) { h := quant.F32ToF16(f); b[0], b[1] = byte(h), byte(h>>8) }
	putF16(w, 1)
	putF16(w[q8_0Bytes:], 1.0/4096)
	putF16(x, 1)
	putF16(x[q8_0Bytes:], 1)
	for j := range 32 {
		w[2+j], x[2+j] = byte(j+1), 1 // lane k of block 0: Σ (4k+1..4k+4)
		w[q8_0Bytes+2+j], x[q8_0Bytes+2+j] = 3, 1
	}
	var acc [8]float32
	for k := range 8 {
		acc[k] = float32(16*k + 10)
		acc[k] = fma32(1.0/4096, 12, acc[k])
	}
	want := ((acc[4] + acc[0]) + (acc[6] + acc[2])) + ((acc[5] + acc[1]) + (acc[7] + acc[3]))
	if got := gQ8_0(n, w, x); got != want {
		t.Errorf("got %g, want %g", got, want)
	}
}
