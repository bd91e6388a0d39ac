package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/minfer/minfer/examples/internal/extest"
	"github.com/minfer/minfer/plugins"
	"github.com/minfer/minfer/sdk"
)

func TestStepping(t *testing.T) {
	p, err := New([]byte(`{"start":3,"step":2,"up":0.75,"down":0.25,"min":1,"draft_max":8}`))
	if err != nil {
		t.Fatal(err)
	}
	last := sdk.RoundOutcome{Round: -1, MaxDepth: 8}
	for i, tc := range []struct{ accepted, want int }{
		{-1, 3}, // first round: start
		{3, 5},  // 3/3 accepted: deeper by 2
		{3, 5},  // 3/5: between thresholds
		{5, 7},  // all accepted
		{7, 8},  // capped by draft_max
		{0, 6},  // none accepted: shallower
		{1, 4},
		{0, 2},
		{0, 1}, // floor at min
	} {
		if tc.accepted >= 0 {
			last = sdk.RoundOutcome{Round: i, Depth: last.Depth, Drafted: last.Depth, Accepted: tc.accepted, VerifyNs: 1, MaxDepth: 8}
		}
		d, err := p.NextDepth(context.Background(), last)
		if err != nil || d.Depth != tc.want {
			t.Fatalf("step %d: got %+v %v, want depth %d", i, d, err, tc.want)
		}
		last.Depth = d.Depth
	}
	if _, err := New([]byte(`{"down":0.9,"up":0.5}`)); err == nil {
		t.Fatal("down above up: got nil error")
	}
}

// TestThroughConfig builds the example, declares it in a minfer.toml as the depth
// policy and decodes with the engine, the model drafting for itself (every draft token
// is accepted): the policy climbs one depth per round to draft_max, which no built-in
// does; the built-in static policy, swapped in by the same config, stays at its depth.
func TestThroughConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a WebAssembly module and runs the engine")
	}
	wasm := extest.BuildWasm(t, ".")
	conf := func(policy string) string {
		return fmt.Sprintf(`
[spec]
policy = %q
draft_max = 6
[sampling]
temperature = 0
[plugins.threshold]
source = "file:%s"
params = { start = 1, step = 1, up = 0.75, down = 0.25 }
[plugins.static]
params = { depth = 3 }
`, policy, wasm)
	}
	res := extest.Generate(t, extest.Config(t, conf("threshold")), extest.Options{Prompt: "Once upon a time", Tokens: 40, Draft: true})
	by := res.Spec.ByDepth
	for d := 1; d <= 6; d++ {
		if by[fmt.Sprint(d)].Rounds == 0 {
			t.Errorf("threshold: no round drafted %d tokens; rounds by depth %v", d, by)
		}
	}
	if by["6"].Rounds < 2 || res.Spec.Policy != "threshold" {
		t.Errorf("threshold: want several rounds at draft_max 6 under policy threshold, got %v (policy %q)", by, res.Spec.Policy)
	}
	res = extest.Generate(t, extest.Config(t, conf("static")), extest.Options{Prompt: "Once upon a time", Tokens: 40, Draft: true})
	for k, v := range res.Spec.ByDepth {
		if k != "3" && v.Rounds > 1 { // the last round may draft fewer near the token budget
			t.Errorf("static: %d rounds drafted %s tokens, want depth 3 only: %v", v.Rounds, k, res.Spec.ByDepth)
		}
	}
}

// TestMisspeltParam: the module declares its params, so a [plugins.NAME] params key it
// does not read fails the config at load, naming the key and the declared ones,
// instead of being ignored.
func TestMisspeltParam(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a WebAssembly module")
	}
	wasm := extest.BuildWasm(t, ".")
	cfg := extest.Config(t, fmt.Sprintf("[plugins.threshold]\nsource = \"file:%s\"\nparams = { strat = 1 }\n", wasm))
	_, err := plugins.NewRegistry(context.Background(), cfg.Plugins, nil)
	for _, want := range []string{"[plugins.threshold]", `unknown key "strat"`, "start, step, up, down"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want it to say %q", err, want)
		}
	}
}
