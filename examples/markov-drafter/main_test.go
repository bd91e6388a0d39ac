package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/minfer/minfer/examples/internal/extest"
	"github.com/minfer/minfer/sdk"
)

func TestChain(t *testing.T) {
	d, err := New([]byte(`{"order":1,"min_conf":0.3}`))
	if err != nil {
		t.Fatal(err)
	}
	// after 1: 2 twice, 3 once; after 2: 5 always; after 5: 1 always
	seq := []int32{1, 2, 5, 1, 3, 9, 1, 2, 5, 1}
	res, err := d.Draft(context.Background(), &sdk.DraftRequest{Appended: seq, MaxDepth: 8, Vocab: 16})
	if err != nil {
		t.Fatal(err)
	}
	// 1 → 2 (2/3) → 5 (2/3) → 1 (2/3·2/2... ) → 2 (4/9) → 5 → 1 → 2 (8/27 < 0.3: stop)
	if want := []int32{2, 5, 1, 2, 5, 1}; !slices.Equal(res.Tokens, want) {
		t.Fatalf("got %v %v, want %v", res.Tokens, res.Conf, want)
	}
	if err := sdk.CheckDraft(&sdk.DraftRequest{MaxDepth: 8, Vocab: 16}, res); err != nil {
		t.Fatal(err)
	}
	if res.Conf[0] != float32(2.0/3) || !(res.Conf[5] < res.Conf[0]) {
		t.Fatalf("confidences %v: want 2/3 first, then falling", res.Conf)
	}
	for _, bad := range []string{`{"order":0}`, `{"min_conf":2}`, `{"order":"x"}`} {
		if _, err := New([]byte(bad)); err == nil {
			t.Errorf("%s: got nil error", bad)
		}
	}
}

// TestThroughConfig builds the example, declares it in a minfer.toml as the request's
// drafter, with no draft model, and decodes with the engine: the output equals plain
// decoding's (greedy identity) and the drafter's rounds got tokens accepted.
func TestThroughConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a WebAssembly module and runs the engine")
	}
	wasm := extest.BuildWasm(t, ".")
	const toml = `
[sampling]
temperature = 0
[spec]
drafter = %q
[plugins.markov]
source = "file:%s"
params = { order = 2, min_conf = 0.2 }
`
	story := "Once upon a time, there was a little girl named Lily. She liked to play in the park."
	prompt := strings.Repeat(story+" ", 3)
	plain := extest.Generate(t, extest.Config(t, fmt.Sprintf(toml, "", wasm)), extest.Options{Prompt: prompt, Tokens: 40})
	got := extest.Generate(t, extest.Config(t, fmt.Sprintf(toml, "markov", wasm)), extest.Options{Prompt: prompt, Tokens: 40})
	if !slices.Equal(got.Tokens, plain.Tokens) {
		t.Fatalf("markov: got %v, want plain decoding's %v", got.Tokens, plain.Tokens)
	}
	if st := got.Spec.ByDrafter["markov"]; st.Rounds == 0 || st.Accepted == 0 {
		t.Fatalf("markov drafted %+v; want rounds with accepted tokens (spec %+v)", st, got.Spec)
	}
}
