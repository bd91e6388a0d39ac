package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/minfer/minfer/core/backend"
)

// TestPagedKVMatchesWhole: a cache that is a view of an arena, its blocks scattered
// and out of order, gives Attention the bits of a whole cache holding the same keys
// and values — F16 and Q8_0, query heads four at a time (the AVX-512 F16 items) or one
// at a time, blocks of 1, 5 and 16 positions — and a block copied with CopyBlock reads
// the same.
func TestPagedKVMatchesWhole(t *testing.T) {
	b := New(Options{Threads: 2})
	defer b.Close()
	for _, kt := range []backend.KVType{backend.KVF16, backend.KVQ8_0} {
		for _, a := range []backend.Attn{
			{Heads: 8, KVHeads: 2, HeadDim: 64, Scale: 0.125},
			{Heads: 6, KVHeads: 6, HeadDim: 32, Scale: 0.25},
		} {
			for _, block := range []int{1, 5, 16} {
				rng := rand.New(rand.NewPCG(uint64(block), uint64(a.Heads)))
				const layers, ctx, n = 2, 64, 40 // positions 0..n-1 stored
				spec := backend.KVSpec{Layers: layers, KVHeads: a.KVHeads, HeadDim: a.HeadDim, Ctx: ctx, Type: kt}
				whole, err := b.NewKV(spec)
				if err != nil {
					t.Fatal(err)
				}
				nb := (ctx + block - 1) / block
				ar, err := b.NewKVArena(spec, block, 2*nb+1)
				if err != nil {
					t.Fatal(err)
				}
				view, err := ar.View(ctx)
				if err != nil {
					t.Fatal(err)
				}
				table := make([]int32, nb)
				for i := range table {
					table[i] = int32(2*nb - 2*i) // scattered, descending, skipping blocks
				}
				if err := ar.SetTable(view, table); err != nil {
					t.Fatal(err)
				}
				kvd := a.KVHeads * a.HeadDim
				k, v := b.newF32(t, rng, n*kvd), b.newF32(t, rng, n*kvd)
				pos := make([]int32, n)
				for i := range pos {
					pos[i] = int32(i)
				}
				pb, _ := b.NewI32(n)
				b.WriteI32(pb, 0, pos)
				r := backend.RoPE{Dims: a.HeadDim, Base: 10000}
				for _, kv := range []backend.KV{whole, view} {
					for l := range layers {
						qs := b.newF32(t, rand.New(rand.NewPCG(1, 1)), n*a.Heads*a.HeadDim)
						kc, _ := b.NewF32(n * kvd)
						vc, _ := b.NewF32(n * kvd)
						b.CopyRows(kc, 0, k, 0, n, kvd)
						b.CopyRows(vc, 0, v, 0, n, kvd)
						b.RoPEStoreKV(qs, kc, vc, kv, l, pb, n, r, a)
					}
				}
				const nt = 3
				q := b.newF32(t, rng, nt*a.Heads*a.HeadDim)
				qp, _ := b.NewI32(nt)
				b.WriteI32(qp, 0, pos[n-nt:])
				attend := func(kv backend.KV) []float32 {
					d, _ := b.NewF32(nt * a.Heads * a.HeadDim)
					b.Attention(d, q, kv, 1, qp, nt, a)
					if err := b.Sync(); err != nil {
						t.Fatal(err)
					}
					return append([]float32(nil), f32(d, nt*a.Heads*a.HeadDim, "d")...)
				}
				want, got := attend(whole), attend(view)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v, %d/%d heads, blocks of %d: value %d = %v, the whole cache gives %v", kt, a.Heads, a.KVHeads, block, i, got[i], want[i])
					}
				}
				// copy every block elsewhere (odd blocks, free above) and read again
				moved := make([]int32, nb)
				for i, x := range table {
					moved[i] = x - 1
					if err := ar.CopyBlock(int(moved[i]), int(x)); err != nil {
						t.Fatal(err)
					}
				}
				if err := ar.SetTable(view, moved); err != nil {
					t.Fatal(err)
				}
				got = attend(view)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v, blocks of %d, after CopyBlock: value %d = %v, want %v", kt, block, i, got[i], want[i])
					}
				}
				b.Free(whole)
				b.Free(ar)
			}
		}
	}
}

// TestPagedKVBounds: a view touches only positions its table maps; bad tables and
// arenas are refused with errors, not panics.
func TestPagedKVBounds(t *testing.T) {
	b := New(Options{Threads: 1})
	defer b.Close()
	spec := backend.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 32, Type: backend.KVF16}
	if _, err := b.NewKVArena(spec, 0, 4); err == nil {
		t.Error("blocks of 0 positions: got nil error")
	}
	ar, err := b.NewKVArena(spec, 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	view, err := ar.View(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := ar.SetTable(view, []int32{0, 3}); err == nil {
		t.Error("block 3 of 3: got nil error")
	}
	if err := ar.SetTable(view, []int32{0, 1, 2, 0, 1}); err == nil {
		t.Error("5 blocks of 4 for 16 positions: got nil error")
	}
	if err := ar.SetTable(view, []int32{2}); err != nil {
		t.Fatal(err)
	}
	if got := view.Bytes(); got != ar.Bytes()/3 {
		t.Errorf("a view of one block: %d bytes, want %d", got, ar.Bytes()/3)
	}
	q, _ := b.NewF32(32)
	d, _ := b.NewF32(32)
	p, _ := b.NewI32(1)
	b.WriteI32(p, 0, []int32{4}) // past the one mapped block
	b.Attention(d, q, view, 0, p, 1, backend.Attn{Heads: 1, KVHeads: 1, HeadDim: 32, Scale: 1})
	if err := b.Sync(); err == nil {
		t.Error("position 4 of a view mapping 4: got nil error")
	}
}
