package main

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/minfer/minfer/examples/internal/extest"
	"github.com/minfer/minfer/sdk"
)

func TestRecentWeighsMore(t *testing.T) {
	p, err := New([]byte(`{"strength":2,"decay":0.5,"last_n":3}`))
	if err != nil {
		t.Fatal(err)
	}
	// window (last 3): 4 5 6 — token 3 fell out; 6 is the most recent
	rows := []sdk.PenaltyRow{{History: []int32{3, 4, 5, 6}, IDs: []int32{3, 4, 5, 6}, Logits: []float32{1, 1, 1, 1}}}
	if err := p.Apply(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	want := []float32{1, 1 - 2*0.25, 1 - 2*0.5, 1 - 2*1}
	if !slices.Equal(rows[0].Logits, want) {
		t.Fatalf("got %v, want %v", rows[0].Logits, want)
	}
	if _, err := New([]byte(`{"decay":2}`)); err == nil {
		t.Fatal("decay 2: got nil error")
	}
}

func distinct(ids []int32) int {
	m := map[int32]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return len(m)
}

// TestThroughConfig: naming the plugin as [sampling] penalty changes greedy output and
// makes it less repetitive; with speculative rounds the output is the same as without
// (the penalty sees each row's drafted prefix).
func TestThroughConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a WebAssembly module and runs the engine")
	}
	wasm := extest.BuildWasm(t, ".")
	cfg := extest.Config(t, fmt.Sprintf(`
[sampling]
temperature = 0
penalty = "decay-penalty"
[plugins.decay-penalty]
source = "file:%s"
params = { strength = 3.0, decay = 0.95, last_n = 48 }
`, wasm))
	opts := extest.Options{Prompt: "Once upon a time", Tokens: 48}
	plain := extest.Generate(t, cfg, opts)
	opts.Penalty = true
	pen := extest.Generate(t, cfg, opts)
	if slices.Equal(plain.Tokens, pen.Tokens) {
		t.Fatal("the penalty did not change the output")
	}
	if distinct(pen.Tokens) < distinct(plain.Tokens) {
		t.Errorf("distinct tokens: %d with the penalty, %d without; want no fewer", distinct(pen.Tokens), distinct(plain.Tokens))
	}
	opts.Draft = true
	spec := extest.Generate(t, cfg, opts)
	if !slices.Equal(spec.Tokens, pen.Tokens) {
		t.Errorf("speculative output %v differs from plain %v", spec.Tokens, pen.Tokens)
	}
}
