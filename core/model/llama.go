package model

import "github.com/minfer/minfer/core/backend"

// llama: pre-norm transformer with RMSNorm, GQA attention with normal (adjacent-pair)
// RoPE, SwiGLU feed-forward, optional q/k/v biases and llama3 rope frequency factors.
func init() {
	archs["llama"] = &arch{
		rope: backend.RoPENormal,
		specs: func(p *Params, w *Weights) []tensorSpec {
			s := commonSpecs(p, w)
			s = append(s, opt(vec("rope_freqs.weight", p.HeadDim/2, &w.RopeFreq)))
			return append(s, biasSpecs(p, w, true)...)
		},
		forward: forwardLlama,
	}
}

// forwardLlama is one forward pass over s.nt tokens (also qwen2's: it differs only by
// its biases, which llama may have too).
func forwardLlama(b backend.Backend, p *Params, w *Weights, s *pass) {
	nt, eps, r := s.nt, p.RMSEps, s.rows()
	b.Embed(s.x, w.TokEmbd, s.ids, nt) // x (nt, embd)
	for l := range w.Layers {
		L := &w.Layers[l]
		// attention
		b.RMSNorm(s.xb, s.x, L.AttnNorm, nt, eps) // xb (nt, embd)
		b.MatMul(s.q, L.Wq, s.xb, nt)             // q (nt, heads*head_dim)
		b.MatMul(s.k, L.Wk, s.xb, nt)             // k (nt, kv_heads*head_dim)
		b.MatMul(s.v, L.Wv, s.xb, nt)             // v (nt, kv_heads*head_dim)
		addBias(b, s.q, L.Bq, nt)                 // optional biases (required for qwen2)
		addBias(b, s.k, L.Bk, nt)
		addBias(b, s.v, L.Bv, nt)
		r = s.attend(b, p, l, r)         // cache ← k, v; att (n, heads*head_dim), n = nt or 1 (the last row)
		b.MatMul(s.xb, L.Wo, s.att, r.n) // xb (n, embd)
		b.Add(r.x, s.xb, r.n*p.Embd)     // x += attention
		s.feedForward(b, p, L, r)        // x += feed-forward
	}
	s.classify(b, p, w, r) // logits (nt or 1, vocab)
}

// feedForward is the SwiGLU block of every architecture: x += down(silu(gate(xn)) ·
// up(xn)), xn = RMSNorm(x). A one-row forward (decode, draft step) puts the SwiGLU in
// act, apart from gate and up, so a backend may compute it again where down reads it
// (the CUDA mat-vec prologue) without racing the reads of gate; the values are the same.
func (s *pass) feedForward(b backend.Backend, p *Params, L *Layer, r rows) {
	b.RMSNorm(s.xb, r.x, L.FFNNorm, r.n, p.RMSEps) // xb (n, embd)
	b.MatMul(s.gate, L.Gate, s.xb, r.n)            // gate (n, ff)
	b.MatMul(s.up, L.Up, s.xb, r.n)                // up (n, ff)
	act := s.gate
	if r.n == 1 {
		act = s.act
	}
	b.SwiGLU(act, s.gate, s.up, r.n, p.FF) // act (n, ff) = silu(gate) * up
	b.MatMul(s.xb, L.Down, act, r.n)       // xb (n, embd)
	b.Add(r.x, s.xb, r.n*p.Embd)           // x += feed-forward
}

// addBias adds an optional bias to every row.
func addBias(b backend.Backend, x backend.Buffer, bias backend.Weight, nt int) {
	if bias != nil {
		b.AddBias(x, bias, nt)
	}
}
