package main

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/minfer/minfer/examples/internal/extest"
	"github.com/minfer/minfer/sdk"
)

func TestBiasPicksAndAccepts(t *testing.T) {
	s, err := New([]byte(`{"top_k":4,"bias":{"7":-100,"9":3}}`))
	if err != nil {
		t.Fatal(err)
	}
	row := func(ids []int32, l []float32) sdk.SampleRow { return sdk.SampleRow{IDs: ids, Logits: l} }
	r := &sdk.SampleRound{Draft: []int32{5, 7}, Rows: []sdk.SampleRow{
		row([]int32{5, 6}, []float32{2, 1}),  // 5 wins: accepted
		row([]int32{7, 8}, []float32{9, 1}),  // 7 is banned: 8 wins, draft 7 rejected
		row([]int32{1, 9}, []float32{4, 2})}} // (not reached)
	got, err := s.Sample(context.Background(), r)
	if err != nil || got != (sdk.SampleResult{Accepted: 1, Next: 8}) {
		t.Fatalf("got %+v %v, want accepted 1 next 8", got, err)
	}
	r = &sdk.SampleRound{Rows: []sdk.SampleRow{row([]int32{1, 9}, []float32{4, 2})}}
	if got, _ := s.Sample(context.Background(), r); got.Next != 9 {
		t.Fatalf("positive bias: got next %d, want 9", got.Next)
	}
	if _, err := New([]byte(`{"bias":{"x":1}}`)); err == nil {
		t.Fatal("bad bias key: got nil error")
	}
}

// TestThroughConfig: swapping the config's sampler from the built-in greedy to this
// plugin, with the token greedy emits most often banned, changes the output and the
// banned token never appears, with and without speculative rounds.
func TestThroughConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a WebAssembly module and runs the engine")
	}
	wasm := extest.BuildWasm(t, ".")
	conf := func(sampler, bias string) string {
		return fmt.Sprintf(`
[sampling]
sampler = %q
temperature = 0
[plugins.logit-bias]
source = "file:%s"
params = { top_k = 8, bias = { %s } }
`, sampler, wasm, bias)
	}
	opts := extest.Options{Prompt: "Once upon a time", Tokens: 32}
	greedy := extest.Generate(t, extest.Config(t, conf("greedy", "")), opts)
	counts := map[int32]int{}
	for _, id := range greedy.Tokens {
		counts[id]++
	}
	banned := greedy.Tokens[0]
	for id, c := range counts {
		if c > counts[banned] {
			banned = id
		}
	}
	for _, draft := range []bool{false, true} {
		opts.Draft = draft
		res := extest.Generate(t, extest.Config(t, conf("logit-bias", fmt.Sprintf(`"%d" = -100.0`, banned))), opts)
		if slices.Contains(res.Tokens, banned) {
			t.Errorf("draft=%v: banned token %d appears in %v", draft, banned, res.Tokens)
		}
		if slices.Equal(res.Tokens, greedy.Tokens) {
			t.Errorf("draft=%v: output equals greedy's; the sampler was not used", draft)
		}
	}
	// with no bias it is greedy: the same tokens as the built-in
	res := extest.Generate(t, extest.Config(t, conf("logit-bias", "")), extest.Options{Prompt: "Once upon a time", Tokens: 32})
	if !slices.Equal(res.Tokens, greedy.Tokens) {
		t.Errorf("no bias: got %v, want greedy's %v", res.Tokens, greedy.Tokens)
	}
}
