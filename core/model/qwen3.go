package model

import "github.com/minfer/minfer/core/backend"

// qwen3: llama's block without biases, with a per-head RMSNorm of q and k before RoPE
// (NeoX), and a head size set by attention.key_length (q width may differ from embd).
func init() {
	archs["qwen3"] = &arch{
		rope: backend.RoPENeoX,
		specs: func(p *Params, w *Weights) []tensorSpec {
			return append(commonSpecs(p, w), qkNormSpecs(p, w)...)
		},
		forward: forwardQwen3,
	}
}

// forwardQwen3 is one forward pass over s.nt tokens.
func forwardQwen3(b backend.Backend, p *Params, w *Weights, s *pass) {
	nt, eps, r := s.nt, p.RMSEps, s.rows()
	b.Embed(s.x, w.TokEmbd, s.ids, nt) // x (nt, embd)
	for l := range w.Layers {
		L := &w.Layers[l]
		// attention
		b.RMSNorm(s.xb, s.x, L.AttnNorm, nt, eps)    // xb (nt, embd)
		b.MatMul(s.q, L.Wq, s.xb, nt)                // q (nt, heads*head_dim)
		b.MatMul(s.k, L.Wk, s.xb, nt)                // k (nt, kv_heads*head_dim)
		b.MatMul(s.v, L.Wv, s.xb, nt)                // v (nt, kv_heads*head_dim)
		b.HeadNorm(s.q, L.QNorm, nt, p.Heads, eps)   // q per head /= rms, *= q_norm
		b.HeadNorm(s.k, L.KNorm, nt, p.KVHeads, eps) // k per head /= rms, *= k_norm
		r = s.attend(b, p, l, r)                     // cache ← k, v; att (n, heads*head_dim), n = nt or 1 (the last row)
		b.MatMul(s.xb, L.Wo, s.att, r.n)             // xb (n, embd)
		b.Add(r.x, s.xb, r.n*p.Embd)                 // x += attention
		s.feedForward(b, p, L, r)                    // x += feed-forward
	}
	s.classify(b, p, w, r) // logits (nt or 1, vocab)
}
