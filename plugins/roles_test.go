package plugins

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/internal/wasmtest"
	"github.com/minfer/minfer/sdk"
)

// TestRoles: Registry.Roles builds a request's instances as the config names them —
// the sampler always, the penalty only when configured, the policy only with Spec —
// wraps a policy that fails in the [spec] fallback (one line on the log), names an
// unknown plugin in its error, and Close releases everything.
func TestRoles(t *testing.T) {
	ctx := context.Background()
	trap := filepath.Join(t.TempDir(), "trap.wasm")
	mod := wasmtest.Plugin{Minor: sdk.ABIMinor, Info: wasmtest.PolicyInfo("trap", "1.0.0", sdk.ABIMinor), Policy: []byte{0x00}} // unreachable
	if err := os.WriteFile(trap, mod.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Plugins["trap"] = config.Plugin{Source: "file:" + trap, Timeout: 5 * time.Second}
	for k, v := range cfg.Plugins {
		v.Timeout = 5 * time.Second // generous: tests share a loaded machine
		cfg.Plugins[k] = v
	}
	var log bytes.Buffer
	r, err := NewRegistry(ctx, cfg.Plugins, &log)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	plain, err := r.Roles(ctx, cfg, RolesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Sampler == nil || plain.Penalty != nil || plain.Policy != nil {
		t.Errorf("plain roles: sampler %v, penalty %v, policy %v; want a sampler only", plain.Sampler, plain.Penalty, plain.Policy)
	}
	plain.Close()
	plain.Close() // a second Close does nothing

	c := *cfg
	c.Sampling.Penalty = "penalty"
	c.Spec.Policy, c.Spec.Fallback = "trap", "static"
	var trace bytes.Buffer
	spec, err := r.Roles(ctx, &c, RolesOptions{Spec: true, Tracer: NewTracer(&trace)})
	if err != nil {
		t.Fatal(err)
	}
	defer spec.Close()
	if spec.Penalty == nil || spec.Policy == nil || spec.PolicyName != "trap" || spec.PolicyVersion != "1.0.0" {
		t.Fatalf("spec roles: penalty %v, policy %v, name %q, version %q", spec.Penalty, spec.Policy, spec.PolicyName, spec.PolicyVersion)
	}
	d, err := spec.Policy.NextDepth(ctx, sdk.RoundOutcome{MaxDepth: 8})
	if err != nil {
		t.Fatalf("the fallback should have answered for the trapping policy: %v", err)
	}
	if d.Depth < 0 || d.Depth > 8 {
		t.Errorf("fallback depth %d outside [0, 8]", d.Depth)
	}
	if _, err := spec.Policy.NextDepth(ctx, sdk.RoundOutcome{Round: 0, Depth: d.Depth, VerifyNs: 1000, MaxDepth: 8}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(trace.String(), `"policy":"trap"`) {
		t.Errorf("the tracer recorded no round of policy trap: %q", trace.String())
	}
	if !strings.Contains(log.String(), `depth policy "trap" failed, using [spec] fallback "static"`) {
		t.Errorf("log lacks the fallback line:\n%s", log.String())
	}

	c.Spec.Policy, c.Spec.Fallback = "nope", ""
	if _, err := r.Roles(ctx, &c, RolesOptions{Spec: true}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown policy: err = %v, want one naming it", err)
	}
}
