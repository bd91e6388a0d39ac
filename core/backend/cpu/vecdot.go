package cpu

import "github.com/minfer/minfer/core/quant"

// vecDotOf returns the activation type and the block dot product core/quant provides
// for a weight type (ggml's vec_dot_type and vec_dot), or a nil func when it has none.
func vecDotOf(tr *quant.Traits) (quant.Type, func(n int, w, x []byte) float32) {
	return tr.VecDotType, tr.VecDot
}
