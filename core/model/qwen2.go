package model

import "github.com/minfer/minfer/core/backend"

// qwen2: llama's block with required q/k/v biases, NeoX RoPE (pairs i, i+head_dim/2)
// and usually a tied classifier. Its forward pass is llama's (forwardLlama applies the
// biases when present).
func init() {
	archs["qwen2"] = &arch{
		rope: backend.RoPENeoX,
		specs: func(p *Params, w *Weights) []tensorSpec {
			return append(commonSpecs(p, w), biasSpecs(p, w, false)...)
		},
		forward: forwardLlama,
	}
}
