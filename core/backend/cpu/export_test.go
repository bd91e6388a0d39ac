package cpu

import "github.com/minfer/minfer/core/quant"

// SetSerialWork changes the serial-work threshold for a test (0 parallelises every op)
// and returns a function restoring it.
func SetSerialWork(n int) (restore func()) {
	old := serialWork
	serialWork = n
	return func() { serialWork = old }
}

// SetRepack makes NewWeight keep every Q4_0 weight repacked (on) or none (off), on any
// CPU, and returns a function restoring the CPU's choice.
func SetRepack(on bool) (restore func()) {
	old := repackWeights
	repackWeights = func(t quant.Type, n int) bool { return on && t == quant.Q4_0 }
	return func() { repackWeights = old }
}
