//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
)

// TestAttentionFlashVsCPU: prefill attention (nt ≥ 64: the one-pass tensor-core kernel
// attn_flash_f16_*, and the split-K kernels with MINFER_NO_FLASH=1) against the CPU
// backend, after a prefix already in the cache, for GQA ratios 7 and 2 and head dims
// 128 and 64, row counts that leave a partial 64-row tile, and a position outside the
// 64-position tiles of the rows before it; the flash result is the same bits when the
// call is repeated.
func TestAttentionFlashVsCPU(t *testing.T) {
	fl := open(t)
	defer fl.Close()
	t.Setenv("MINFER_NO_FLASH", "1")
	sk := open(t)
	defer sk.Close()
	c := cpu.New(cpu.Options{})
	defer c.Close()
	rng := rand.New(rand.NewPCG(31, 32))
	for _, s := range []struct{ heads, kvheads, hd, pre, nt int }{
		{28, 4, 128, 0, 64}, {28, 4, 128, 77, 130}, {14, 2, 64, 0, 300}, {8, 4, 128, 300, 100}, {4, 2, 64, 5, 64},
	} {
		name := fmt.Sprintf("h%d-kv%d-d%d/pre%d/nt%d", s.heads, s.kvheads, s.hd, s.pre, s.nt)
		a := backend.Attn{Heads: s.heads, KVHeads: s.kvheads, HeadDim: s.hd, Scale: float32(1 / math.Sqrt(float64(s.hd)))}
		r := backend.RoPE{Mode: backend.RoPENeoX, Dims: s.hd, Base: 1e6, FreqScale: 1}
		total := s.pre + s.nt
		qn, kn := s.heads*s.hd, s.kvheads*s.hd
		// Scores of a few units, so the softmax is neither flat nor one-hot.
		qAll, kAll, vAll := normals(rng, total*qn, 2), normals(rng, total*kn, 2), normals(rng, total*kn, 1)
		pos := make([]int32, total)
		for j := range pos {
			pos[j] = int32(j)
		}
		run := func(b backend.Backend, twice bool) [2][]float32 {
			kv, err := b.NewKV(backend.KVSpec{Layers: 2, KVHeads: s.kvheads, HeadDim: s.hd, Ctx: 512, Type: backend.KVF16})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Free(kv)
			var out [2][]float32
			for _, span := range [][2]int{{0, s.pre}, {s.pre, total}} {
				lo, hi := span[0], span[1]
				if hi == lo {
					continue
				}
				qb := mustF32(t, b, qAll[lo*qn:hi*qn])
				pb, err := b.NewI32(hi - lo)
				if err != nil {
					t.Fatal(err)
				}
				b.WriteI32(pb, 0, pos[lo:hi])
				b.RoPEStoreKV(qb, mustF32(t, b, kAll[lo*kn:hi*kn]), mustF32(t, b, vAll[lo*kn:hi*kn]), kv, 1, pb, hi-lo, r, a)
				if lo == s.pre {
					for i := range 1 + btoi(twice) {
						dst := poisoned(t, b, s.nt*qn)
						b.Attention(dst, qb, kv, 1, pb, s.nt, a)
						out[i] = read(t, b, dst, s.nt*qn)
					}
				}
			}
			return out
		}
		want := run(c, false)[0]
		got, split := run(fl, true), run(sk, false)[0]
		const bound = 3e-3
		if e := relErr(got[0], want); e > bound {
			t.Errorf("%s: flash: relative error %.3g > %.3g", name, e, bound)
		}
		if e := relErr(split, want); e > bound {
			t.Errorf("%s: split-K (MINFER_NO_FLASH=1): relative error %.3g > %.3g", name, e, bound)
		}
		if !slices.Equal(got[0], got[1]) {
			t.Errorf("%s: flash: two identical calls differ", name)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
