package backendtest

import (
	"math"
	"testing"

	"github.com/minfer/minfer/core/backend"
)

// multiSeq is one sequence of testMultiAttention: positions already in its cache, the
// rows it brings and its cache size.
type multiSeq struct{ pre, nt, ctx int }

// testMultiAttention checks backend.MultiAttention against the one-sequence ops on the
// same backend, bit for bit: sequences of different row counts (one of 70 rows, past
// the GEMM bound where a GPU takes another attention kernel), positions and cache
// sizes (so a split-K backend splits each differently) share the batch's q, k, v and
// position buffers at row offsets with a gap row between them, and write their
// attention into one output buffer in reverse order; then, as a batched forward's last
// layer does, only each sequence's last row attends. The rotated rows, the outputs and
// the caches (through a second attention) must be those of RoPEStoreKV and Attention
// on each sequence alone.
func testMultiAttention(t *testing.T, newBackend func() backend.Backend, opts Options) {
	if _, ok := newEnv(t, newBackend, opts.seed()).b.(backend.MultiAttention); !ok {
		t.Skip("the backend has no MultiAttention")
	}
	seqs := []multiSeq{{5, 1, 96}, {0, 3, 160}, {40, 1, 96}, {2, 70, 256}, {300, 2, 2048}, {17, 1, 64}}
	for i, s := range attnShapes() {
		t.Run(name("%s/h%d-kv%d-d%d/mode%d", s.KV, s.Heads, s.KVHeads, s.HeadDim, s.Mode), func(t *testing.T) {
			e := newEnv(t, newBackend, opts.seed()+uint64(200+i))
			ma := e.b.(backend.MultiAttention)
			hd := s.HeadDim
			qn, kn := s.Heads*hd, s.KVHeads*hd
			a := backend.Attn{Heads: s.Heads, KVHeads: s.KVHeads, HeadDim: hd, Scale: float32(1 / math.Sqrt(float64(hd)))}
			r := backend.RoPE{Mode: s.Mode, Dims: hd, Base: 10000, FreqScale: 1}
			const layer = 1
			total := 0
			for _, q := range seqs {
				total += q.nt + 1
			}
			qAll, kAll, vAll := e.normals(total*qn, 1), e.normals(total*kn, 1), e.normals(total*kn, 1)
			posAll := make([]int32, total)
			qB, kB, vB := e.f32(qAll), e.f32(kAll), e.f32(vAll)
			dstB, lastB := e.zeros(total*qn), e.zeros(len(seqs)*qn)
			type ref struct {
				kv, kvB   backend.KV
				q, k, dst backend.Buffer
				pos, posl backend.Buffer
				last      backend.Buffer
				row, drow int
			}
			refs := make([]ref, len(seqs))
			var multi, lasts []backend.SeqAttention
			row, drow := 0, total
			for j, q := range seqs {
				drow -= q.nt + 1
				f := &refs[j]
				f.row, f.drow = row, drow
				for _, kv := range []*backend.KV{&f.kv, &f.kvB} {
					var err error
					if *kv, err = e.b.NewKV(backend.KVSpec{Layers: 2, KVHeads: s.KVHeads, HeadDim: hd, Ctx: q.ctx, Type: s.KV}); err != nil {
						t.Fatalf("NewKV: %v", err)
					}
				}
				if q.pre > 0 { // the same prefix in both caches
					pq, pk, pv := e.normals(q.pre*qn, 1), e.normals(q.pre*kn, 1), e.normals(q.pre*kn, 1)
					pos := make([]int32, q.pre)
					for i := range pos {
						pos[i] = int32(i)
					}
					for _, kv := range []backend.KV{f.kv, f.kvB} {
						e.b.RoPEStoreKV(e.f32(pq), e.f32(pk), e.f32(pv), kv, layer, e.i32(pos), q.pre, r, a)
					}
				}
				pos := make([]int32, q.nt)
				for i := range pos {
					pos[i] = int32(q.pre + i)
					posAll[row+i] = pos[i]
				}
				f.q, f.k = e.f32(qAll[row*qn:(row+q.nt)*qn]), e.f32(kAll[row*kn:(row+q.nt)*kn])
				f.pos, f.posl = e.i32(pos), e.i32(pos[q.nt-1:])
				f.dst, f.last = e.zeros(q.nt*qn), e.zeros(qn)
				e.b.RoPEStoreKV(f.q, f.k, e.f32(vAll[row*kn:(row+q.nt)*kn]), f.kv, layer, f.pos, q.nt, r, a)
				e.b.Attention(f.dst, f.q, f.kv, layer, f.pos, q.nt, a)
				ql := e.zeros(qn)
				e.b.CopyRows(ql, 0, f.q, q.nt-1, 1, qn)
				e.b.Attention(f.last, ql, f.kv, layer, f.posl, 1, a)
				multi = append(multi, backend.SeqAttention{Dst: dstB, Q: qB, K: kB, V: vB, KV: f.kvB, NT: q.nt, Row: row, DstRow: drow})
				lasts = append(lasts, backend.SeqAttention{Dst: lastB, Q: qB, KV: f.kvB, NT: 1, Row: row + q.nt - 1, DstRow: j})
				row += q.nt + 1
			}
			posB := e.i32(posAll)
			for j := range multi {
				multi[j].Pos, lasts[j].Pos = posB, posB
			}
			ma.RoPEStoreKVSeqs(multi, layer, r, a)
			ma.AttentionSeqs(multi, layer, a)
			ma.AttentionSeqs(lasts, layer, a)
			e.sync()
			gotQ, gotK, gotD, gotL := e.read(qB, total*qn), e.read(kB, total*kn), e.read(dstB, total*qn), e.read(lastB, len(seqs)*qn)
			same := func(what string, j int, got, want []float32) {
				t.Helper()
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("sequence %d (%d rows at %d of a cache of %d): %s value %d = %v, alone %v",
							j, seqs[j].nt, seqs[j].pre, seqs[j].ctx, what, i, got[i], want[i])
					}
				}
			}
			for j, q := range seqs {
				f := refs[j]
				same("rotated q", j, gotQ[f.row*qn:(f.row+q.nt)*qn], e.read(f.q, q.nt*qn))
				same("rotated k", j, gotK[f.row*kn:(f.row+q.nt)*kn], e.read(f.k, q.nt*kn))
				same("attention", j, gotD[f.drow*qn:(f.drow+q.nt)*qn], e.read(f.dst, q.nt*qn))
				same("last row's attention", j, gotL[j*qn:(j+1)*qn], e.read(f.last, qn))
			}
			// The caches hold the same keys and values: the rows attend again, alone, to each.
			for j, q := range seqs {
				f := refs[j]
				d1, d2 := e.zeros(q.nt*qn), e.zeros(q.nt*qn)
				e.b.Attention(d1, f.q, f.kv, layer, f.pos, q.nt, a)
				e.b.Attention(d2, f.q, f.kvB, layer, f.pos, q.nt, a)
				same("attention over the cache it filled", j, e.read(d2, q.nt*qn), e.read(d1, q.nt*qn))
			}
		})
	}
	t.Run("bad position", func(t *testing.T) {
		e := newEnv(t, newBackend, opts.seed()+300)
		ma := e.b.(backend.MultiAttention)
		a := backend.Attn{Heads: 2, KVHeads: 1, HeadDim: 64, Scale: 0.125}
		r := backend.RoPE{Dims: 64, Base: 10000, FreqScale: 1}
		var seqs []backend.SeqAttention
		q, k, v, d := e.zeros(2*128), e.zeros(2*64), e.zeros(2*64), e.zeros(2*128)
		pos := e.i32([]int32{1, 9}) // the second sequence's cache holds 4 positions
		for j, ctx := range []int{8, 4} {
			kv, err := e.b.NewKV(backend.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 64, Ctx: ctx, Type: backend.KVF16})
			if err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, backend.SeqAttention{Dst: d, Q: q, K: k, V: v, KV: kv, Pos: pos, NT: 1, Row: j, DstRow: j})
		}
		ma.RoPEStoreKVSeqs(seqs, 0, r, a)
		if err := e.b.Sync(); err == nil {
			t.Error("RoPEStoreKVSeqs: position 9 in a cache of 4: got nil error")
		}
		ma.AttentionSeqs(seqs, 0, a)
		if err := e.b.Sync(); err == nil {
			t.Error("AttentionSeqs: position 9 in a cache of 4: got nil error")
		}
	})
}
