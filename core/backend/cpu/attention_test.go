package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/quant"
)

// TestAttendF16ZMatchesLoop: the three-pass AVX-512 attention gives ggml's one-key-at-
// a-time loop's bits, for scores that rise (rescaling), fall and repeat, and for keys
// whose maximum rises by less than an ulp of exp (a rescale factor of exactly 1).
func TestAttendF16ZMatchesLoop(t *testing.T) {
	if !useAVX512 {
		t.Skip("no AVX-512")
	}
	b := New(Options{Threads: 1})
	defer b.Close()
	for _, hd := range []int{64, 128} {
		kvx, err := b.NewKV(backend.KVSpec{Layers: 1, KVHeads: 1, HeadDim: hd, Ctx: 300, Type: backend.KVF16})
		if err != nil {
			t.Fatal(err)
		}
		kv := kvx.(*KV)
		rng := rand.New(rand.NewPCG(uint64(hd), 7))
		q := make([]float32, hd)
		for j := range q {
			q[j] = float32(rng.NormFloat64())
		}
		for pos := range 300 {
			k, v := make([]float32, hd), make([]float32, hd)
			grow := float32(pos%7) * 0.3 // keys that raise the maximum now and then
			for j := range k {
				k[j] = float32(rng.NormFloat64())*0.5 + grow*q[j]*0.1
				v[j] = float32(rng.NormFloat64())
			}
			if pos%50 == 49 {
				copy(k, q) // a repeated maximum
				for j := range k {
					k[j] = k[j] * (1 + 1e-4*float32(pos%3))
				}
			}
			kv.store(0, 0, pos, k, v)
		}
		q16 := make([]uint16, hd)
		for j, x := range q {
			q16[j] = quant.F32ToF16(x)
		}
		sc := b.workerScratch(0, hd)
		for _, p := range []int{0, 1, 2, 7, 63, 64, 150, 299} {
			for _, scale := range []float32{0.125, 1, 3} {
				got, want := make([]float32, hd), make([]float32, hd)
				acc := make([]float32, hd)
				kv.attendF16Z(got, q, acc, sc, 0, p, scale)
				clear(acc)
				kv.attendF16Loop(want, q16, acc, 0, p, scale)
				for j := range got {
					if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
						t.Fatalf("hd %d p %d scale %g: out[%d] = %g, want %g (the loop's bits)", hd, p, scale, j, got[j], want[j])
					}
				}
			}
		}
		b.Free(kvx)
	}
}
