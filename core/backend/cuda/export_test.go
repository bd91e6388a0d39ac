package cuda

import "github.com/minfer/minfer/core/quant"

// NativeTypes are the weight types of the type table (wtypes), for the GPU tests.
func NativeTypes() []quant.Type {
	var ts []quant.Type
	for _, w := range wtypes {
		ts = append(ts, w.t)
	}
	return ts
}
