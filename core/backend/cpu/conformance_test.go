package cpu_test

import (
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/backendtest"
	"github.com/minfer/minfer/core/backend/cpu"
)

func TestConformance(t *testing.T) {
	for _, threads := range []int{1, 3} {
		t.Run(map[int]string{1: "threads=1", 3: "threads=3"}[threads], func(t *testing.T) {
			backendtest.Run(t, func() backend.Backend { return cpu.New(cpu.Options{Threads: threads}) })
		})
	}
}
