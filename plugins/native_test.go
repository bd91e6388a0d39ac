package plugins

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/internal/drafttest"
	"github.com/minfer/minfer/plugins/wasm"
	"github.com/minfer/minfer/sdk"
)

// TestBuiltinDraftersNative: the built-in drafters run natively by default and in
// builtin.wasm with WithWasmBuiltins (or WithInterruptibleBuiltins), and both propose
// the same tokens and confidences, round after round.
func TestBuiltinDraftersNative(t *testing.T) {
	ctx := context.Background()
	decls := map[string]config.Plugin{"ngram": {Timeout: 5 * time.Second}, "suffix": {Timeout: 5 * time.Second}}
	native, err := NewRegistry(ctx, decls, nil, WithInstances(1))
	if err != nil {
		t.Fatal(err)
	}
	defer native.Close()
	inWasm, err := NewRegistry(ctx, decls, nil, WithInstances(1), WithWasmBuiltins())
	if err != nil {
		t.Fatal(err)
	}
	defer inWasm.Close()
	seq := drafttest.CopyHeavyN(1200)
	for _, name := range []string{"ngram", "suffix"} {
		t.Run(name, func(t *testing.T) {
			a, _, err := native.Drafter(ctx, name, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer Release(a)
			b, _, err := inWasm.Drafter(ctx, name, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer Release(b)
			if _, ok := a.(*nativeDrafter); !ok {
				t.Fatalf("default registry: drafter %T, want a native one", a)
			}
			if _, ok := b.(*wasm.Drafter); !ok {
				t.Fatalf("WithWasmBuiltins: drafter %T, want the module's", b)
			}
			proposed := 0
			for pos, step := 0, 200; pos < len(seq); pos, step = pos+step, 3 {
				q := sdk.DraftRequest{Appended: seq[pos:min(pos+step, len(seq))], MaxDepth: 8, Vocab: 4096}
				ra, err := a.Draft(ctx, &q)
				if err != nil {
					t.Fatal(err)
				}
				rb, err := b.Draft(ctx, &q)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(ra.Tokens, rb.Tokens) || !slices.Equal(ra.Conf, rb.Conf) {
					t.Fatalf("at %d: native %v %v, wasm %v %v", pos, ra.Tokens, ra.Conf, rb.Tokens, rb.Conf)
				}
				proposed += len(ra.Tokens)
			}
			if proposed == 0 {
				t.Fatal("no proposal over a copy-heavy sequence")
			}
		})
	}
	r, err := NewRegistry(ctx, decls, nil, WithInstances(1), WithInterruptibleBuiltins())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d, _, err := r.Drafter(ctx, "ngram", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer Release(d)
	if _, ok := d.(*wasm.Drafter); !ok {
		t.Fatalf("WithInterruptibleBuiltins: drafter %T, want the module's", d)
	}
}

// TestNativeDrafterRules: a native built-in drafter is held to the WebAssembly host's
// rules: more memory than memory_mb after a call, a late answer, a panic and an error
// each fail the call with an error naming the plugin, and every later call fails the
// same way.
func TestNativeDrafterRules(t *testing.T) {
	ctx := context.Background()
	r, err := NewRegistry(ctx, map[string]config.Plugin{"suffix": {MemoryMB: 1}}, nil, WithInstances(1))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d, _, err := r.Drafter(ctx, "suffix", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer Release(d)
	q := sdk.DraftRequest{Appended: drafttest.CopyHeavyN(20000), MaxDepth: 8, Vocab: 4096}
	_, err = d.Draft(ctx, &q)
	if err == nil || !strings.Contains(err.Error(), `plugin "suffix" drafter: trap: out of memory`) || !strings.Contains(err.Error(), "memory_mb is 1") {
		t.Fatalf("20000 tokens under a 1 MiB cap: got %v, want an out-of-memory error naming the plugin and the cap", err)
	}
	q.Appended = q.Appended[:1]
	if _, err2 := d.Draft(ctx, &q); err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("after a failure: got %v, want the first failure again (%v)", err2, err)
	}
	for _, tc := range []struct {
		name string
		d    sdk.Drafter
		want string
	}{
		{"late", fakeDrafter(func() (sdk.DraftResult, error) { time.Sleep(20 * time.Millisecond); return sdk.DraftResult{}, nil }), "timeout: answered after"},
		{"panic", fakeDrafter(func() (sdk.DraftResult, error) { panic("index out of range") }), "trap: panic: index out of range"},
		{"error", fakeDrafter(func() (sdk.DraftResult, error) { return sdk.DraftResult{}, errors.New("out of ideas") }), "plugin: out of ideas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &nativeDrafter{guard: guard{name: "x", role: sdk.RoleDrafter, timeout: 5 * time.Millisecond}, d: tc.d}
			_, err := n.Draft(ctx, &sdk.DraftRequest{MaxDepth: 1, Vocab: 10})
			if err == nil || !strings.HasPrefix(err.Error(), `plugin "x" drafter: `) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming the plugin and containing %q", err, tc.want)
			}
			if n.Err() != err {
				t.Fatalf("Err() = %v, want the failure", n.Err())
			}
		})
	}
}

type fakeDrafter func() (sdk.DraftResult, error)

func (f fakeDrafter) Draft(context.Context, *sdk.DraftRequest) (sdk.DraftResult, error) { return f() }

// TestBuiltinsNative: every role's built-in runs natively by default, under a guard
// that makes a panic a trap naming the plugin and keeps failing after it.
func TestBuiltinsNative(t *testing.T) {
	ctx := context.Background()
	r, err := NewRegistry(ctx, config.Default().Plugins, nil, WithInstances(1))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p, _, err := r.Policy(ctx, "adaptive", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer Release(p)
	s, _, err := r.Sampler(ctx, "greedy", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer Release(s)
	q, _, err := r.Penalty(ctx, "penalty", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer Release(q)
	if _, ok := p.(*nativePolicy); !ok {
		t.Fatalf("policy %T, want a native one", p)
	}
	if _, ok := s.(*nativeSampler); !ok || s.Needs().TopK != 1 {
		t.Fatalf("sampler %T needing %+v, want a native greedy one (top-1)", s, s.Needs())
	}
	if _, ok := q.(*nativePenalty); !ok || q.Window() < 0 {
		t.Fatalf("penalty %T of window %d, want a native one", q, q.Window())
	}
	if d, err := p.NextDepth(ctx, sdk.RoundOutcome{Round: -1, MaxDepth: 8}); err != nil || d.Depth != 1 {
		t.Fatalf("adaptive's first decision %+v %v, want depth 1 (its start)", d, err)
	}
	n := &nativePolicy{guard: guard{name: "x", role: sdk.RolePolicy, timeout: time.Second}, p: panicPolicy{}}
	for range 2 {
		if _, err := n.NextDepth(ctx, sdk.RoundOutcome{}); err == nil || err.Error() != `plugin "x" policy: trap: panic: boom` {
			t.Fatalf("got %v, want the panic as a trap naming the plugin, every call", err)
		}
	}
}

type panicPolicy struct{}

func (panicPolicy) NextDepth(context.Context, sdk.RoundOutcome) (sdk.DepthDecision, error) {
	panic("boom")
}
