package backendtest

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/quant"
)

// Differential runs one transformer layer built from every op (Embed, RMSNorm, MatMul,
// AddBias, HeadNorm, RoPEStoreKV, Attention, SwiGLU, Add, CopyRows, TopK) on two
// backends with the same random weights and inputs, and compares each stage's output:
// |a − b| ≤ rel·max|b| of that stage, rel = 1e-3 for F32/F16 weights and 3e-2 for
// quantized ones (the activation quantizers are step functions, so a last-bit
// difference upstream can move a value by one quantization step). Use it to hold a
// device backend to the CPU reference: Differential(t, newCUDA, newCPU, opts).
func Differential(t *testing.T, newGot, newWant func() backend.Backend, opts Options) {
	for _, typ := range []quant.Type{quant.F16, quant.Q8_0, quant.Q4_K} {
		for _, kvt := range []backend.KVType{backend.KVF16, backend.KVQ8_0} {
			t.Run(name("%s/%s", typ, kvt), func(t *testing.T) {
				rel := 3e-2
				if typ == quant.F16 || typ == quant.F32 {
					rel = 1e-3
				}
				seed := opts.seed() + uint64(typ)*7 + uint64(kvt)
				got := runLayer(t, newGot, seed, typ, kvt)
				want := runLayer(t, newWant, seed, typ, kvt)
				for i, st := range want {
					scale := 0.0
					for _, v := range st.vals {
						scale = max(scale, math.Abs(float64(v)))
					}
					g := got[i].vals
					for j, v := range st.vals {
						if d := math.Abs(float64(g[j] - v)); !(d <= 1e-6+rel*scale) {
							t.Errorf("%s[%d]: got %g, want %g (|Δ| %.3g > %.3g)", st.name, j, g[j], v, d, 1e-6+rel*scale)
							break
						}
					}
				}
			})
		}
	}
}

type stage struct {
	name string
	vals []float32
}

// runLayer is one qwen2-like layer (GQA 4/2, head dim 64, q/k norm, biases) over a
// 5-token prompt after 3 cached positions, then the classifier on the last row.
func runLayer(t *testing.T, newBackend func() backend.Backend, seed uint64, typ quant.Type, kvt backend.KVType) []stage {
	t.Helper()
	e := newEnv(t, newBackend, seed)
	const (
		vocab, dim, heads, kvHeads, hd, ff = 96, 256, 4, 2, 64, 512
		pre, nt                            = 3, 5
	)
	qn, kn := heads*hd, kvHeads*hd
	rng := rand.New(rand.NewPCG(seed, 1))
	w := func(nm string, rows, cols int, sigma float64) backend.Weight {
		wt, err := RandomWeight(rng, typ, rows, cols, sigma)
		if err != nil {
			t.Fatal(err)
		}
		bw, err := e.b.NewWeight(nm, typ, rows, cols, wt.Data)
		if err != nil {
			t.Fatal(err)
		}
		return bw
	}
	vec := func(nm string, n int, mean, sigma float64) backend.Weight {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(mean + rng.NormFloat64()*sigma)
		}
		return e.vector(nm, v)
	}
	embd := w("embd", vocab, dim, 1)
	wq, wk, wv, wo := w("q", qn, dim, 0.06), w("k", kn, dim, 0.06), w("v", kn, dim, 0.06), w("o", dim, qn, 0.06)
	gate, up, down := w("gate", ff, dim, 0.06), w("up", ff, dim, 0.06), w("down", dim, ff, 0.04)
	n1, n2, qnorm, knorm := vec("n1", dim, 1, 0.1), vec("n2", dim, 1, 0.1), vec("qn", hd, 1, 0.1), vec("kn", hd, 1, 0.1)
	bq, bk, bv := vec("bq", qn, 0, 0.2), vec("bk", kn, 0, 0.2), vec("bv", kn, 0, 0.2)
	kv, err := e.b.NewKV(backend.KVSpec{Layers: 1, KVHeads: kvHeads, HeadDim: hd, Ctx: 16, Type: kvt})
	if err != nil {
		t.Fatal(err)
	}
	a := backend.Attn{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 0.125}
	r := backend.RoPE{Mode: backend.RoPENeoX, Dims: hd, Base: 1e6, FreqScale: 1}

	var out []stage
	read := func(nm string, b backend.Buffer, n int) { out = append(out, stage{nm, e.read(b, n)}) }
	ids := make([]int32, pre+nt)
	for i := range ids {
		ids[i] = int32(rng.IntN(vocab))
	}
	logits := e.zeros(vocab)
	for _, span := range [][2]int{{0, pre}, {pre, pre + nt}} {
		lo, hi := span[0], span[1]
		m := hi - lo
		pos := make([]int32, m)
		for i := range pos {
			pos[i] = int32(lo + i)
		}
		posb := e.i32(pos)
		x, h := e.zeros(m*dim), e.zeros(m*dim)
		e.b.Embed(x, embd, e.i32(ids[lo:hi]), m)
		e.b.RMSNorm(h, x, n1, m, 1e-6)
		q, k, v := e.zeros(m*qn), e.zeros(m*kn), e.zeros(m*kn)
		e.b.MatMul(q, wq, h, m)
		e.b.MatMul(k, wk, h, m)
		e.b.MatMul(v, wv, h, m)
		e.b.AddBias(q, bq, m)
		e.b.AddBias(k, bk, m)
		e.b.AddBias(v, bv, m)
		e.b.HeadNorm(q, qnorm, m, heads, 1e-6)
		e.b.HeadNorm(k, knorm, m, kvHeads, 1e-6)
		e.b.RoPEStoreKV(q, k, v, kv, 0, posb, m, r, a)
		att := e.zeros(m * qn)
		e.b.Attention(att, q, kv, 0, posb, m, a)
		if lo == 0 {
			continue // the prefix only fills the cache
		}
		read("q (normed, rotated)", q, m*qn)
		read("attention", att, m*qn)
		o := e.zeros(m * dim)
		e.b.MatMul(o, wo, att, m)
		e.b.Add(x, o, m*dim)
		read("residual 1", x, m*dim)
		e.b.RMSNorm(h, x, n2, m, 1e-6)
		g, u := e.zeros(m*ff), e.zeros(m*ff)
		e.b.MatMul(g, gate, h, m)
		e.b.MatMul(u, up, h, m)
		e.b.SwiGLU(g, g, u, m, ff)
		read("swiglu", g, m*ff)
		e.b.MatMul(o, down, g, m)
		e.b.Add(x, o, m*dim)
		read("residual 2", x, m*dim)
		last := e.zeros(dim)
		e.b.CopyRows(last, 0, x, m-1, 1, dim)
		e.b.RMSNorm(last, last, n1, 1, 1e-6)
		e.b.MatMul(logits, embd, last, 1)
		read("logits", logits, vocab)
	}
	ids3, vals3 := make([]int32, 3), make([]float32, 3)
	if err := e.b.TopK(logits, 1, vocab, 3, ids3, vals3); err != nil {
		t.Fatalf("TopK: %v", err)
	}
	out = append(out, stage{"top-3 logits", vals3})
	return out
}
