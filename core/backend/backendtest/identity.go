package backendtest

import (
	"math"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/quant"
)

// RowIdentity checks core/backend's row identity contract: for nt = 1…max, row i of an
// nt-row call equals, bit for bit, a 1-row call on that row alone — for MatMul with
// every weight type, Embed, RMSNorm, HeadNorm, AddBias, SwiGLU, and RoPEStoreKV +
// Attention with both KV types (a batch stored and attended at once versus the same
// rows one at a time). max is 64, Options.MaxIdentityNT, or Caps.IdentityRows.
func RowIdentity(t *testing.T, newBackend func() backend.Backend, opts Options) {
	maxNT := opts.MaxIdentityNT
	if maxNT <= 0 {
		maxNT = 64
	}
	probe := newBackend()
	if c := probe.Caps().IdentityRows; c > 0 && c < maxNT {
		maxNT = c
	}
	_ = probe.Close()
	for _, typ := range opts.types() {
		for _, rows := range []int{24, 21} {
			t.Run(name("MatMul/%s/rows=%d", typ, rows), func(t *testing.T) {
				e := newEnv(t, newBackend, opts.seed()^uint64(typ)*131^uint64(rows))
				cols := colsFor(typ, 256)
				_, w := e.weight("w", typ, rows, cols, 0.5)
				identity(e, maxNT, cols, rows, func(dst, x backend.Buffer, nt int) {
					e.b.MatMul(dst, w, x, nt)
				})
			})
		}
	}
	t.Run("RMSNorm", func(t *testing.T) {
		e := newEnv(t, newBackend, opts.seed()+1)
		const n = 96
		w := e.vector("norm", e.normals(n, 1))
		identity(e, maxNT, n, n, func(dst, x backend.Buffer, nt int) { e.b.RMSNorm(dst, x, w, nt, 1e-5) })
	})
	t.Run("HeadNorm", func(t *testing.T) {
		e := newEnv(t, newBackend, opts.seed()+2)
		const heads, hd = 3, 32
		w := e.vector("knorm", e.normals(hd, 1))
		identity(e, maxNT, heads*hd, heads*hd, func(dst, x backend.Buffer, nt int) {
			e.b.CopyRows(dst, 0, x, 0, nt, heads*hd)
			e.b.HeadNorm(dst, w, nt, heads, 1e-6)
		})
	})
	t.Run("AddBias+SwiGLU", func(t *testing.T) {
		e := newEnv(t, newBackend, opts.seed()+3)
		const n = 72
		bias := e.vector("bias", e.normals(n, 1))
		up := e.normals(n, 1)
		identity(e, maxNT, n, n, func(dst, x backend.Buffer, nt int) {
			e.b.CopyRows(dst, 0, x, 0, nt, n)
			e.b.AddBias(dst, bias, nt)
			e.b.SwiGLU(dst, dst, e.f32(repeat(up, nt)), nt, n)
		})
	})
	t.Run("Embed", func(t *testing.T) {
		e := newEnv(t, newBackend, opts.seed()+4)
		_, w := e.weight("embd", quant.Q4_K, 70, 256, 1)
		ids := make([]int32, maxNT+5)
		for i := range ids {
			ids[i] = int32(e.rng.IntN(70))
		}
		single := make([][]float32, len(ids))
		for i := range ids {
			dst := e.zeros(256)
			e.b.Embed(dst, w, e.i32(ids[i:i+1]), 1)
			single[i] = e.read(dst, 256)
		}
		for nt := 1; nt <= maxNT; nt++ {
			off := nt % 5
			dst := e.zeros(nt * 256)
			e.b.Embed(dst, w, e.i32(ids[off:off+nt]), nt)
			got := e.read(dst, nt*256)
			for r := range nt {
				bitsEqual(t, name("nt=%d row %d", nt, r), got[r*256:(r+1)*256], single[off+r])
			}
		}
	})
	for _, kvt := range []backend.KVType{backend.KVF16, backend.KVQ8_0} {
		t.Run(name("RoPEStoreKV+Attention/%s", kvt), func(t *testing.T) {
			attnIdentity(t, newEnv(t, newBackend, opts.seed()+5+uint64(kvt)), maxNT, kvt)
		})
	}
}

func repeat(x []float32, n int) []float32 {
	out := make([]float32, 0, len(x)*n)
	for range n {
		out = append(out, x...)
	}
	return out
}

func bitsEqual(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: value %d: batched %g (%#08x), single %g (%#08x)", what, i,
				got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// identity runs op on single rows and on batches of nt = 1…maxNT rows (taken at an
// offset that varies with nt) and compares each batched row with its single result.
func identity(e *env, maxNT, inCols, outCols int, op func(dst, x backend.Buffer, nt int)) {
	e.t.Helper()
	n := maxNT + 5
	x := e.normals(n*inCols, 1)
	single := make([][]float32, n)
	for i := range n {
		dst := e.zeros(outCols)
		op(dst, e.f32(x[i*inCols:(i+1)*inCols]), 1)
		single[i] = e.read(dst, outCols)
	}
	for nt := 1; nt <= maxNT; nt++ {
		off := nt % 5
		dst := e.zeros(nt * outCols)
		op(dst, e.f32(x[off*inCols:(off+nt)*inCols]), nt)
		got := e.read(dst, nt*outCols)
		for r := range nt {
			bitsEqual(e.t, name("nt=%d row %d", nt, r), got[r*outCols:(r+1)*outCols], single[off+r])
		}
	}
}

// attnIdentity: singles store and attend positions one at a time; each batch stores a
// prefix one row at a time and then nt rows at once.
func attnIdentity(t *testing.T, e *env, maxNT int, kvt backend.KVType) {
	const heads, kvHeads, hd = 4, 2, 64
	n := maxNT + 5
	a := backend.Attn{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 0.125}
	r := backend.RoPE{Mode: backend.RoPENeoX, Dims: hd, Base: 1e6, FreqScale: 1}
	qn, kn := heads*hd, kvHeads*hd
	q, k, v := e.normals(n*qn, 1), e.normals(n*kn, 1), e.normals(n*kn, 1)
	newKV := func() backend.KV {
		kv, err := e.b.NewKV(backend.KVSpec{Layers: 1, KVHeads: kvHeads, HeadDim: hd, Ctx: n, Type: kvt})
		if err != nil {
			t.Fatalf("NewKV: %v", err)
		}
		return kv
	}
	// step stores rows [lo, hi) at their positions and attends them; it returns the
	// rotated q and the attention output.
	step := func(kv backend.KV, lo, hi int) (qr, out []float32) {
		pos := make([]int32, hi-lo)
		for i := range pos {
			pos[i] = int32(lo + i)
		}
		posb := e.i32(pos)
		qb := e.f32(q[lo*qn : hi*qn])
		e.b.RoPEStoreKV(qb, e.f32(k[lo*kn:hi*kn]), e.f32(v[lo*kn:hi*kn]), kv, 0, posb, hi-lo, r, a)
		dst := e.zeros((hi - lo) * qn)
		e.b.Attention(dst, qb, kv, 0, posb, hi-lo, a)
		return e.read(qb, (hi-lo)*qn), e.read(dst, (hi-lo)*qn)
	}
	kv := newKV()
	sq := make([][]float32, n)
	so := make([][]float32, n)
	for i := range n {
		sq[i], so[i] = step(kv, i, i+1)
	}
	for nt := 1; nt <= maxNT; nt++ {
		kv := newKV()
		off := (nt * 7) % 5
		for i := range off {
			step(kv, i, i+1)
		}
		gq, gout := step(kv, off, off+nt)
		for i := range nt {
			bitsEqual(t, name("nt=%d row %d q", nt, i), gq[i*qn:(i+1)*qn], sq[off+i])
			bitsEqual(t, name("nt=%d row %d attention", nt, i), gout[i*qn:(i+1)*qn], so[off+i])
		}
		e.b.Free(kv)
	}
}
