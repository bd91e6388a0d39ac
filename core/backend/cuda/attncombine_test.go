//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/backend"
	cudabe "github.com/minfer/minfer/core/backend/cuda"
	"github.com/minfer/minfer/core/quant"
)

// TestAttentionCombineFusedSameBits: the split-K kernels that merge their splits in the
// last block of each row and head (attn_partc_*, the default) give attn_part +
// attn_combine's bits (MINFER_NO_FUSE_ATTN_COMBINE=1) — the outputs and their 8-bit
// shadow, which a Q8_0 mat-vec after the attention reads — with a block per query head
// and a block per KV head, on f16 and Q8_0 caches, for rows that take one split to all
// 32, and through AttentionSeqs; with PDL and without (ledger mode, where the fused
// kernels must be seen to run). The counters are left at zero: every call repeats on the
// same backend with the same bits, also after a call whose position was outside the
// cache (recorded as by attn_part).
func TestAttentionCombineFusedSameBits(t *testing.T) {
	type variant struct {
		name string
		b    *cudabe.Backend
	}
	openWith := func(env ...string) *cudabe.Backend {
		for i := 0; i < len(env); i += 2 {
			t.Setenv(env[i], env[i+1])
		}
		b := open(t)
		for i := 0; i < len(env); i += 2 {
			t.Setenv(env[i], "")
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	ref := openWith("MINFER_NO_FUSE_ATTN_COMBINE", "1", "MINFER_NO_ATTN_GROUP", "1")
	led := openWith("MINFER_LEDGER", "1", "MINFER_ATTN_GROUP", "all")
	vs := []variant{
		{"fused, a block per head", openWith("MINFER_NO_ATTN_GROUP", "1")},
		{"fused, a block per KV head", openWith("MINFER_ATTN_GROUP", "all")},
		{"fused, the tier's choice", openWith()},
		{"fused, a block per KV head, ledger mode (no PDL)", led},
		{"two launches, a block per KV head", openWith("MINFER_NO_FUSE_ATTN_COMBINE", "1", "MINFER_ATTN_GROUP", "all")},
	}
	rng := rand.New(rand.NewPCG(43, 44))
	for _, s := range []struct {
		heads, kvheads, hd, pre, nt int
		typ                         backend.KVType
	}{
		{28, 4, 128, 0, 1, backend.KVF16}, {28, 4, 128, 37, 5, backend.KVF16}, {28, 4, 128, 2032, 16, backend.KVF16},
		{28, 4, 128, 700, 9, backend.KVQ8_0}, {14, 2, 64, 300, 3, backend.KVF16}, {14, 2, 64, 5, 1, backend.KVQ8_0},
		{8, 4, 128, 1500, 12, backend.KVQ8_0}, {16, 2, 64, 90, 7, backend.KVF16}, {28, 4, 128, 1000, 40, backend.KVF16},
	} {
		name := fmt.Sprintf("h%d-kv%d-d%d-%v/pre%d/nt%d", s.heads, s.kvheads, s.hd, s.typ, s.pre, s.nt)
		a := backend.Attn{Heads: s.heads, KVHeads: s.kvheads, HeadDim: s.hd, Scale: float32(1 / math.Sqrt(float64(s.hd)))}
		r := backend.RoPE{Mode: backend.RoPENeoX, Dims: s.hd, Base: 1e6, FreqScale: 1}
		total := s.pre + s.nt
		qn, kn := s.heads*s.hd, s.kvheads*s.hd
		qAll, kAll, vAll := normals(rng, total*qn, 2), normals(rng, total*kn, 2), normals(rng, total*kn, 1)
		w := quantized(t, quant.Q8_0, 64, qn, rng)
		pos := make([]int32, total)
		for j := range pos {
			pos[j] = int32(j)
		}
		// run fills a cache with the prefix, then returns the rows' attention and a
		// Q8_0 mat-vec of it (which reads the attention's 8-bit shadow), twice.
		run := func(b backend.Backend) (out, mm [2][]float32) {
			kv, err := b.NewKV(backend.KVSpec{Layers: 1, KVHeads: s.kvheads, HeadDim: s.hd, Ctx: 2048, Type: s.typ})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Free(kv)
			wt, err := b.NewWeight("w", quant.Q8_0, 64, qn, w)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Free(wt)
			qb, pb := mustF32(t, b, qAll), mustI32(t, b, pos)
			b.RoPEStoreKV(qb, mustF32(t, b, kAll), mustF32(t, b, vAll), kv, 0, pb, total, r, a)
			q := mustF32(t, b, read(t, b, qb, total*qn)[s.pre*qn:])
			for i := range 2 {
				dst, y := poisoned(t, b, s.nt*qn), poisoned(t, b, s.nt*64)
				b.Attention(dst, q, kv, 0, mustI32(t, b, pos[s.pre:]), s.nt, a)
				b.MatMul(y, wt, dst, s.nt)
				out[i], mm[i] = read(t, b, dst, s.nt*qn), read(t, b, y, s.nt*64)
			}
			return out, mm
		}
		want, wantMM := run(ref)
		if !slices.Equal(want[1], want[0]) || !slices.Equal(wantMM[1], wantMM[0]) {
			t.Fatalf("%s: two launches: a repeated call changed its bits", name)
		}
		for _, v := range vs {
			got, gotMM := run(v.b)
			for i := range 2 {
				if !slices.Equal(got[i], want[0]) {
					t.Errorf("%s: %s, call %d: not the bits of attn_part + attn_combine (relative difference %.3g)", name, v.name, i+1, relErr(got[i], want[0]))
				}
				if !slices.Equal(gotMM[i], wantMM[0]) {
					t.Errorf("%s: %s, call %d: the 8-bit shadow differs (a mat-vec of it: relative difference %.3g)", name, v.name, i+1, relErr(gotMM[i], wantMM[0]))
				}
			}
		}
	}
	ran := false
	for _, s := range led.Ledger() {
		if strings.HasPrefix(s.Name, "attn_partc_") {
			ran = true
		}
		if s.Name == "attn_combine" {
			t.Errorf("ledger mode, fused: attn_combine ran (%d calls)", s.Calls)
		}
	}
	if !ran {
		t.Errorf("the fused kernels never ran: %v", led.Ledger())
	}
	t.Run("seqs", func(t *testing.T) {
		attnSeqsGroupedSameBits(t, ref, vs[0].b, rng)
		attnSeqsGroupedSameBits(t, ref, vs[1].b, rng)
	})
	t.Run("position outside the cache", func(t *testing.T) {
		for _, v := range []variant{{"two launches", ref}, vs[0], vs[1]} {
			b := v.b
			a := backend.Attn{Heads: 14, KVHeads: 2, HeadDim: 64, Scale: 0.125}
			kv, err := b.NewKV(backend.KVSpec{Layers: 1, KVHeads: 2, HeadDim: 64, Ctx: 64, Type: backend.KVF16})
			if err != nil {
				t.Fatal(err)
			}
			q := mustF32(t, b, normals(rng, 2*14*64, 1))
			dst := poisoned(t, b, 2*14*64)
			b.Attention(dst, q, kv, 0, mustI32(t, b, []int32{3, 64}), 2, a)
			if err := b.ReadF32(dst, 0, make([]float32, 2*14*64)); err == nil || !strings.Contains(err.Error(), "position") {
				t.Errorf("%s: attention at position 64 of a 64-position cache: got error %v", v.name, err)
			}
			b.Free(kv)
		}
	})
}
