package model_test

import (
	"fmt"
	"github.com/minfer/minfer/internal/golden"
	"math"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
)

// graphCPU is the CPU backend posing as a graph-capable one: Run records the keys it
// sees and executes record every time (a real backend would replay a capture).
type graphCPU struct {
	*cpu.Backend
	runs map[string]int
}

var _ backend.Graphs = (*graphCPU)(nil)

func (g *graphCPU) Run(key string, record func()) error {
	g.runs[key]++
	record()
	return nil
}

// TestForwardUsesGraphs: on a backend.Graphs backend every forward goes through Run,
// keyed by model, cache, row count and logits mode, with the same results.
func TestForwardUsesGraphs(t *testing.T) {
	g := &graphCPU{Backend: cpu.New(cpu.Options{Threads: 1}), runs: map[string]int{}}
	defer g.Close()
	plain := cpu.New(cpu.Options{Threads: 1})
	defer plain.Close()
	ids := []int32{1, 400, 1000, 7}
	var logits [2][]float32
	var kvID uint64
	for i, b := range []backend.Backend{g, plain} {
		m := golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q8_0.gguf", "target")
		kv, err := m.NewKV(16, backend.KVF16)
		if err != nil {
			t.Fatal(err)
		}
		defer kv.Close()
		if i == 0 {
			kvID = kv.ID()
		}
		for _, step := range [][]int32{ids[:3], ids[3:]} {
			l, err := m.Forward(step, kv, true)
			if err != nil {
				t.Fatal(err)
			}
			row := make([]float32, l.Rows*l.Cols)
			if err := m.ReadLogits(l, row); err != nil {
				t.Fatal(err)
			}
			logits[i] = append(logits[i], row...)
		}
	}
	want := map[string]int{
		fmt.Sprintf("target/kv%d/nt3/all=true", kvID): 1,
		fmt.Sprintf("target/kv%d/nt1/all=true", kvID): 1,
	}
	if fmt.Sprint(g.runs) != fmt.Sprint(want) {
		t.Fatalf("graph keys: got %v, want %v", g.runs, want)
	}
	for i := range logits[0] {
		if math.Float32bits(logits[0][i]) != math.Float32bits(logits[1][i]) {
			t.Fatalf("logit %d: got %v through Run, %v without", i, logits[0][i], logits[1][i])
		}
	}
}
