package cpu_test

import (
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/backendtest"
	"github.com/minfer/minfer/core/backend/cpu"
)

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts cpu.Options
	}{
		{"threads=1", cpu.Options{Threads: 1}},
		{"threads=3", cpu.Options{Threads: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backendtest.Run(t, func() backend.Backend { return cpu.New(tc.opts) })
		})
	}
}

// TestDifferential holds a 3-thread backend to a 1-thread one with backendtest's
// device-vs-reference check (identical here: threads never change results).
func TestDifferential(t *testing.T) {
	backendtest.Differential(t,
		func() backend.Backend { return cpu.New(cpu.Options{Threads: 3}) },
		func() backend.Backend { return cpu.New(cpu.Options{Threads: 1}) },
		backendtest.Options{})
}
