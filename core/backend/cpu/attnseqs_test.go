package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/minfer/minfer/core/backend"
)

// TestAttentionSeqsMatchesAttention: one AttentionSeqs call over sequences of different
// row counts, positions and caches gives every sequence Attention's bits, for F16 and
// Q8_0 caches, query heads sharing KV heads four at a time (the AVX-512 F16 items) or
// not, on one thread and on three.
func TestAttentionSeqsMatchesAttention(t *testing.T) {
	for _, threads := range []int{1, 3} {
		b := New(Options{Threads: threads})
		for _, kt := range []backend.KVType{backend.KVF16, backend.KVQ8_0} {
			for _, a := range []backend.Attn{
				{Heads: 8, KVHeads: 2, HeadDim: 64, Scale: 0.125},
				{Heads: 6, KVHeads: 6, HeadDim: 32, Scale: 0.25},
			} {
				rng := rand.New(rand.NewPCG(uint64(threads), uint64(a.Heads)))
				const layers, ctx = 2, 96
				lens := []int{1, 3, 1, 2, 1} // rows per sequence
				var seqs []backend.SeqAttention
				var want [][]float32
				for si, nt := range lens {
					kv, err := b.NewKV(backend.KVSpec{Layers: layers, KVHeads: a.KVHeads, HeadDim: a.HeadDim, Ctx: ctx, Type: kt})
					if err != nil {
						t.Fatal(err)
					}
					end := 10 + 17*si // the sequence's cache holds positions 0..end
					kvd := a.KVHeads * a.HeadDim
					k, v := b.newF32(t, rng, (end+1)*kvd), b.newF32(t, rng, (end+1)*kvd)
					qs := b.newF32(t, rng, (end+1)*a.Heads*a.HeadDim)
					pos := make([]int32, end+1)
					for i := range pos {
						pos[i] = int32(i)
					}
					pb, _ := b.NewI32(end + 1)
					b.WriteI32(pb, 0, pos)
					b.RoPEStoreKV(qs, k, v, kv, 1, pb, end+1, backend.RoPE{Dims: a.HeadDim, Base: 10000}, a)
					q := b.newF32(t, rng, nt*a.Heads*a.HeadDim)
					qp, _ := b.NewI32(nt)
					b.WriteI32(qp, 0, pos[end+1-nt:])
					ref, _ := b.NewF32(nt * a.Heads * a.HeadDim)
					b.Attention(ref, q, kv, 1, qp, nt, a)
					want = append(want, append([]float32(nil), f32(ref, nt*a.Heads*a.HeadDim, "ref")...))
					dst, _ := b.NewF32(nt * a.Heads * a.HeadDim)
					seqs = append(seqs, backend.SeqAttention{Dst: dst, Q: q, KV: kv, Pos: qp, NT: nt})
				}
				b.AttentionSeqs(seqs, 1, a)
				if err := b.Sync(); err != nil {
					t.Fatal(err)
				}
				for si, sq := range seqs {
					got := f32(sq.Dst, sq.NT*a.Heads*a.HeadDim, "dst")
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[si][i]) {
							t.Fatalf("threads %d, %v cache, %d/%d heads: sequence %d value %d = %v, Attention gives %v",
								threads, kt, a.Heads, a.KVHeads, si, i, got[i], want[si][i])
						}
					}
				}
			}
		}
		// A bad position fails the call (no panic, nothing computed past it).
		kv, _ := b.NewKV(backend.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 32, Ctx: 4, Type: backend.KVF16})
		q, _ := b.NewF32(32)
		d, _ := b.NewF32(32)
		p, _ := b.NewI32(1)
		b.WriteI32(p, 0, []int32{9})
		b.AttentionSeqs([]backend.SeqAttention{{Dst: d, Q: q, KV: kv, Pos: p, NT: 1}}, 0, backend.Attn{Heads: 1, KVHeads: 1, HeadDim: 32, Scale: 1})
		if err := b.Sync(); err == nil {
			t.Error("position 9 in a cache of 4: got nil error")
		}
		b.Close()
	}
}

func (b *Backend) newF32(t *testing.T, rng *rand.Rand, n int) backend.Buffer {
	t.Helper()
	buf, err := b.NewF32(n)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	b.WriteF32(buf, 0, v)
	return buf
}

// TestRoPEStoreKVSeqsMatchesRoPEStoreKV: one RoPEStoreKVSeqs call gives every sequence
// RoPEStoreKV's rotated queries and keys and its cache bytes, for F16 and Q8_0 caches,
// NeoX and normal rotation, on one thread and on three; a bad position fails the call.
func TestRoPEStoreKVSeqsMatchesRoPEStoreKV(t *testing.T) {
	for _, threads := range []int{1, 3} {
		b := New(Options{Threads: threads})
		for _, kt := range []backend.KVType{backend.KVF16, backend.KVQ8_0} {
			for _, mode := range []backend.RoPEMode{backend.RoPENeoX, backend.RoPENormal} {
				a := backend.Attn{Heads: 8, KVHeads: 2, HeadDim: 64, Scale: 0.125}
				r := backend.RoPE{Mode: mode, Dims: 64, Base: 10000, FreqScale: 1}
				rng := rand.New(rand.NewPCG(uint64(threads), uint64(mode)))
				spec := backend.KVSpec{Layers: 2, KVHeads: a.KVHeads, HeadDim: a.HeadDim, Ctx: 64, Type: kt}
				var seqs []backend.SeqAttention
				var refs []backend.SeqAttention
				for si, nt := range []int{1, 3, 1, 2} {
					mk := func() backend.SeqAttention {
						kv, err := b.NewKV(spec)
						if err != nil {
							t.Fatal(err)
						}
						pb, _ := b.NewI32(nt)
						pos := make([]int32, nt)
						for i := range pos {
							pos[i] = int32(5*si + 7 + i)
						}
						b.WriteI32(pb, 0, pos)
						return backend.SeqAttention{KV: kv, Pos: pb, NT: nt}
					}
					sq, ref := mk(), mk()
					sq.Q, sq.K, sq.V = b.newF32(t, rng, nt*a.Heads*a.HeadDim), b.newF32(t, rng, nt*a.KVHeads*a.HeadDim), b.newF32(t, rng, nt*a.KVHeads*a.HeadDim)
					ref.Q, ref.K, ref.V = b.copyF32(sq.Q, nt*a.Heads*a.HeadDim), b.copyF32(sq.K, nt*a.KVHeads*a.HeadDim), b.copyF32(sq.V, nt*a.KVHeads*a.HeadDim)
					b.RoPEStoreKV(ref.Q, ref.K, ref.V, ref.KV, 1, ref.Pos, nt, r, a)
					seqs, refs = append(seqs, sq), append(refs, ref)
				}
				b.RoPEStoreKVSeqs(seqs, 1, r, a)
				if err := b.Sync(); err != nil {
					t.Fatal(err)
				}
				for si := range seqs {
					s, ref := seqs[si], refs[si]
					same := func(what string, x, y []float32) {
						for i := range x {
							if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
								t.Fatalf("threads %d, %v, mode %v: sequence %d %s[%d] = %v, RoPEStoreKV gives %v", threads, kt, mode, si, what, i, x[i], y[i])
							}
						}
					}
					same("q", f32(s.Q, s.NT*a.Heads*a.HeadDim, "q"), f32(ref.Q, s.NT*a.Heads*a.HeadDim, "q"))
					same("k", f32(s.K, s.NT*a.KVHeads*a.HeadDim, "k"), f32(ref.K, s.NT*a.KVHeads*a.HeadDim, "k"))
					kv, kr := s.KV.(*KV), ref.KV.(*KV)
					if string(kv.k) != string(kr.k) || string(kv.v) != string(kr.v) ||
						!slicesEqual(kv.k16, kr.k16) || !slicesEqual(kv.v16, kr.v16) {
						t.Fatalf("threads %d, %v, mode %v: sequence %d's cache differs from RoPEStoreKV's", threads, kt, mode, si)
					}
				}
			}
		}
		kv, _ := b.NewKV(backend.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 32, Ctx: 4, Type: backend.KVF16})
		q, _ := b.NewF32(32)
		k, _ := b.NewF32(32)
		v, _ := b.NewF32(32)
		p, _ := b.NewI32(1)
		b.WriteI32(p, 0, []int32{4})
		b.RoPEStoreKVSeqs([]backend.SeqAttention{{Q: q, K: k, V: v, KV: kv, Pos: p, NT: 1}}, 0,
			backend.RoPE{Dims: 32, Base: 10000, FreqScale: 1}, backend.Attn{Heads: 1, KVHeads: 1, HeadDim: 32, Scale: 1})
		if err := b.Sync(); err == nil {
			t.Error("position 4 in a cache of 4: got nil error")
		}
		b.Close()
	}
}

func slicesEqual(x, y []uint16) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}

func (b *Backend) copyF32(src backend.Buffer, n int) backend.Buffer {
	dst, _ := b.NewF32(n)
	b.WriteF32(dst, 0, f32(src, n, "copy"))
	return dst
}
