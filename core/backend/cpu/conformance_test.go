package cpu_test

import (
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/backendtest"
	"github.com/minfer/minfer/core/backend/cpu"
)

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     cpu.Options
		parallel bool // parallelise every op, however small
	}{
		{"threads=1", cpu.Options{Threads: 1}, false},
		{"threads=3", cpu.Options{Threads: 3}, true},
		{"threads=2/default", cpu.Options{Threads: 2}, false},
		{"threads=2/avx2-order", cpu.Options{Threads: 2, Order: cpu.OrderAVX2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.parallel {
				defer cpu.SetSerialWork(0)()
			}
			backendtest.Run(t, func() backend.Backend { return cpu.New(tc.opts) })
		})
	}
}

// TestDifferential holds a 3-thread backend to a 1-thread one with backendtest's
// device-vs-reference check (identical here: threads never change results).
func TestDifferential(t *testing.T) {
	defer cpu.SetSerialWork(0)()
	backendtest.Differential(t,
		func() backend.Backend { return cpu.New(cpu.Options{Threads: 3}) },
		func() backend.Backend { return cpu.New(cpu.Options{Threads: 1}) },
		backendtest.Options{})
}
