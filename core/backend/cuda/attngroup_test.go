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

// TestAttentionGroupedSameBits: the grouped split-K kernels (attn_part_grp_*, a block
// per KV head: MINFER_ATTN_GROUP=all) give the bits of a block per query head
// (MINFER_NO_ATTN_GROUP=1), on f16 and Q8_0 caches, for GQA groups of 7, 2 and 8 heads,
// head dims 128 and 64, contexts whose rows take one split to all 32 (2,048 positions)
// and 1-40 rows (the tier's default takes the grouped kernels from 32) — through
// Attention and, for three sequences in one call, AttentionSeqs; and both are the CPU
// backend's attention within rounding. With the tier's default
// (one row per query head below AttnGroupRows, grouped from it), each row of an nt-row
// call has the bits of that row alone.
func TestAttentionGroupedSameBits(t *testing.T) {
	t.Setenv("MINFER_NO_ATTN_GROUP", "1")
	per := open(t)
	defer per.Close()
	t.Setenv("MINFER_NO_ATTN_GROUP", "")
	t.Setenv("MINFER_ATTN_GROUP", "all")
	grp := open(t)
	defer grp.Close()
	t.Setenv("MINFER_ATTN_GROUP", "")
	def := open(t)
	defer def.Close()
	c := cpu.New(cpu.Options{})
	defer c.Close()
	rng := rand.New(rand.NewPCG(41, 42))
	for _, s := range []struct {
		heads, kvheads, hd, pre, nt int
		typ                         backend.KVType
	}{
		{28, 4, 128, 0, 1, backend.KVF16}, {28, 4, 128, 37, 5, backend.KVF16}, {28, 4, 128, 2032, 16, backend.KVF16},
		{28, 4, 128, 700, 9, backend.KVQ8_0}, {14, 2, 64, 300, 3, backend.KVF16}, {8, 4, 128, 1500, 12, backend.KVQ8_0},
		{16, 2, 64, 90, 7, backend.KVF16}, {28, 4, 128, 1000, 40, backend.KVF16},
	} {
		name := fmt.Sprintf("h%d-kv%d-d%d-%v/pre%d/nt%d", s.heads, s.kvheads, s.hd, s.typ, s.pre, s.nt)
		a := backend.Attn{Heads: s.heads, KVHeads: s.kvheads, HeadDim: s.hd, Scale: float32(1 / math.Sqrt(float64(s.hd)))}
		r := backend.RoPE{Mode: backend.RoPENeoX, Dims: s.hd, Base: 1e6, FreqScale: 1}
		total := s.pre + s.nt
		qn, kn := s.heads*s.hd, s.kvheads*s.hd
		qAll, kAll, vAll := normals(rng, total*qn, 2), normals(rng, total*kn, 2), normals(rng, total*kn, 1)
		pos := make([]int32, total)
		for j := range pos {
			pos[j] = int32(j)
		}
		// run fills a cache with the prefix and the rows, then returns the rows'
		// attention: one call of nt rows, then (alone) each row in a call of its own.
		run := func(b backend.Backend, alone bool) (all []float32, rows [][]float32) {
			kv, err := b.NewKV(backend.KVSpec{Layers: 1, KVHeads: s.kvheads, HeadDim: s.hd, Ctx: 2048, Type: s.typ})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Free(kv)
			qb, pb := mustF32(t, b, qAll), mustI32(t, b, pos)
			b.RoPEStoreKV(qb, mustF32(t, b, kAll), mustF32(t, b, vAll), kv, 0, pb, total, r, a)
			q := read(t, b, qb, total*qn)[s.pre*qn:] // the rows' rotated queries
			dst := poisoned(t, b, s.nt*qn)
			b.Attention(dst, mustF32(t, b, q), kv, 0, mustI32(t, b, pos[s.pre:]), s.nt, a)
			all = read(t, b, dst, s.nt*qn)
			for i := 0; alone && i < s.nt; i++ {
				d1 := poisoned(t, b, qn)
				b.Attention(d1, mustF32(t, b, q[i*qn:(i+1)*qn]), kv, 0, mustI32(t, b, pos[s.pre+i:s.pre+i+1]), 1, a)
				rows = append(rows, read(t, b, d1, qn))
			}
			return all, rows
		}
		want, _ := run(c, false)
		p, _ := run(per, false)
		g, _ := run(grp, false)
		d, alone := run(def, true)
		bound := 3e-3
		if s.typ == backend.KVQ8_0 {
			// The CPU quantizes q to Q8_0 for the K dot (as ggml does); the GPU keeps q in
			// float32: ≈1% more relative noise in the scores (as TestModelVsCPU allows).
			bound += 1.5e-2
		}
		if e := relErr(p, want); e > bound {
			t.Errorf("%s: a block per head: relative error %.3g to the CPU's > %.3g", name, e, bound)
		}
		if !slices.Equal(g, p) {
			t.Errorf("%s: grouped kernel: not the bits of a block per head (relative difference %.3g)", name, relErr(g, p))
		}
		if !slices.Equal(d, p) {
			t.Errorf("%s: the tier's choice: not the bits of a block per head (relative difference %.3g)", name, relErr(d, p))
		}
		for i, row := range alone {
			if !slices.Equal(row, d[i*qn:(i+1)*qn]) {
				t.Errorf("%s: row %d of %d differs from the row alone", name, i, s.nt)
				break
			}
		}
	}
	t.Run("seqs", func(t *testing.T) { attnSeqsGroupedSameBits(t, per, grp, rng) })
}

// attnSeqsGroupedSameBits: AttentionSeqs over three sequences (contexts 1,900, 40 and 400
// positions, 1, 4 and 9 rows) gives the same bits with the grouped kernels as with a
// block per query head.
func attnSeqsGroupedSameBits(t *testing.T, per, grp backend.Backend, rng *rand.Rand) {
	a := backend.Attn{Heads: 28, KVHeads: 4, HeadDim: 128, Scale: float32(1 / math.Sqrt(128))}
	r := backend.RoPE{Mode: backend.RoPENeoX, Dims: 128, Base: 1e6, FreqScale: 1}
	qn, kn := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	type seq struct {
		pre, nt int
		q, k, v []float32
	}
	var seqs []seq
	for _, sh := range [][2]int{{1900, 1}, {40, 4}, {400, 9}} {
		n := sh[0] + sh[1]
		seqs = append(seqs, seq{sh[0], sh[1], normals(rng, n*qn, 2), normals(rng, n*kn, 2), normals(rng, n*kn, 1)})
	}
	run := func(b backend.Backend) []float32 {
		ma, ok := b.(backend.MultiAttention)
		if !ok {
			t.Fatalf("%s: no MultiAttention", b.Name())
		}
		var calls []backend.SeqAttention
		rows := 0
		for _, s := range seqs {
			rows += s.nt
		}
		dst := poisoned(t, b, rows*qn)
		row := 0
		for _, s := range seqs {
			kv, err := b.NewKV(backend.KVSpec{Layers: 1, KVHeads: a.KVHeads, HeadDim: a.HeadDim, Ctx: 2048, Type: backend.KVF16})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Free(kv)
			total := s.pre + s.nt
			pos := make([]int32, total)
			for j := range pos {
				pos[j] = int32(j)
			}
			qb, pb := mustF32(t, b, s.q), mustI32(t, b, pos)
			b.RoPEStoreKV(qb, mustF32(t, b, s.k), mustF32(t, b, s.v), kv, 0, pb, total, r, a)
			calls = append(calls, backend.SeqAttention{Dst: dst, Q: qb, KV: kv, Pos: pb, NT: s.nt, Row: s.pre, DstRow: row})
			row += s.nt
		}
		ma.AttentionSeqs(calls, 0, a)
		return read(t, b, dst, rows*qn)
	}
	p, g := run(per), run(grp)
	if !slices.Equal(g, p) {
		t.Errorf("AttentionSeqs: grouped kernels: not the bits of a block per head (relative difference %.3g)", relErr(g, p))
	}
}
