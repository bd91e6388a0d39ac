//go:build cuda

package cuda_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/quant"
)

// TestAttentionLongContext: a cache of 450,000 positions, whose split-K attention needs
// more than the 48 KB of shared memory a launch gets without opting in (splits of
// 14,080 positions: 56 KB of scores a block), attends at its last position as a float64
// reference on the same f16 cache does; and a cache too long for the device's shared
// memory is refused by NewKV with an error that says so, before anything is allocated.
// (The CPU backend is no reference here: it accumulates V in f16 as ggml does, 9% off
// over 450,000 positions.)
func TestAttentionLongContext(t *testing.T) {
	g := open(t)
	defer g.Close()
	const ctx, kvheads, heads, hd = 450000, 1, 2, 64
	a := backend.Attn{Heads: heads, KVHeads: kvheads, HeadDim: hd, Scale: float32(1 / math.Sqrt(hd))}
	// One rotated pair, whose angle is the position itself, so the reference rotates as
	// the kernel does (the others' angles come from ggml's float32 recurrence).
	r := backend.RoPE{Mode: backend.RoPENeoX, Dims: 2, Base: 1e6, FreqScale: 1}
	rng := rand.New(rand.NewPCG(7, 8))
	k, v := normals(rng, ctx*kvheads*hd, 1), normals(rng, ctx*kvheads*hd, 1)
	q := normals(rng, heads*hd, 1)
	pos := make([]int32, ctx)
	for i := range pos {
		pos[i] = int32(i)
	}
	kv, err := g.NewKV(backend.KVSpec{Layers: 1, KVHeads: kvheads, HeadDim: hd, Ctx: ctx, Type: backend.KVF16})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Free(kv)
	qAll := make([]float32, ctx*heads*hd) // the query row at the last position
	copy(qAll[(ctx-1)*heads*hd:], q)
	qb := mustF32(t, g, qAll)
	g.RoPEStoreKV(qb, mustF32(t, g, k), mustF32(t, g, v), kv, 0, mustI32(t, g, pos), ctx, r, a)
	qr := read(t, g, qb, ctx*heads*hd)[(ctx-1)*heads*hd:]
	dst := poisoned(t, g, heads*hd)
	g.Attention(dst, mustF32(t, g, qr), kv, 0, mustI32(t, g, pos[ctx-1:]), 1, a)
	got := read(t, g, dst, heads*hd)

	f16 := func(x float64) float64 { return float64(quant.F16ToF32(quant.F32ToF16(float32(x)))) }
	want := make([]float32, heads*hd)
	scores := make([]float64, ctx)
	for h := range heads {
		qh := qr[h*hd : (h+1)*hd]
		m := math.Inf(-1)
		for p := range ctx {
			kp := k[(p*kvheads+h*kvheads/heads)*hd:][:hd]
			c, s := math.Cos(float64(p)), math.Sin(float64(p))
			x0, x1 := float64(kp[0]), float64(kp[1])
			dot := float64(qh[0])*f16(x0*c-x1*s) + float64(qh[1])*f16(x0*s+x1*c)
			for d := 2; d < hd; d++ {
				dot += float64(qh[d]) * f16(float64(kp[d]))
			}
			scores[p] = dot * float64(a.Scale)
			m = max(m, scores[p])
		}
		l, out := 0.0, make([]float64, hd)
		for p := range ctx {
			w := math.Exp(scores[p] - m)
			l += w
			for d, x := range v[(p*kvheads+h*kvheads/heads)*hd:][:hd] {
				out[d] += w * f16(float64(x))
			}
		}
		for d := range hd {
			want[h*hd+d] = float32(out[d] / l)
		}
	}
	if e := relErr(got, want); !(e < 1e-3) {
		t.Errorf("attention at position %d of a %d-position cache: relative difference %.3g from a float64 reference", ctx-1, ctx, e)
	}
	_, err = g.NewKV(backend.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 128, Ctx: 1 << 26, Type: backend.KVF16})
	if err == nil || !strings.Contains(err.Error(), "shared memory") {
		t.Errorf("NewKV of 2^26 positions: got error %v, want one about shared memory", err)
	}
}
