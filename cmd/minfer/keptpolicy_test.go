package main

import (
	"context"
	"io"
	"testing"

	"github.com/minfer/minfer/core/config"
)

// TestStackKeepsPolicy: a session's requests share one depth-policy instance while the
// configuration names the same policy and params; another configuration gets its own
// (kept too), and a failed instance is replaced.
func TestStackKeepsPolicy(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Spec.Depth = config.DepthAuto
	plug, err := newPluginSet(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	st := &stack{plug: plug, closeRequest: func() {}}
	defer func() {
		for _, k := range st.kept {
			k.Close()
		}
		plug.close()
	}()
	a1, err := st.policy(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := st.policy(ctx, cfg)
	if a1 != a2 {
		t.Error("the same configuration got a new policy instance")
	}
	static := *cfg
	static.Spec.Depth = 3
	s1, _ := st.policy(ctx, &static)
	if s1 == a1 || s1.name != "static" {
		t.Errorf("depth 3 got %q (same instance: %v), want its own static policy", s1.name, s1 == a1)
	}
	if a3, _ := st.policy(ctx, cfg); a3 != a1 {
		t.Error("returning to the first configuration did not find its kept instance")
	}
	a1.broken = true
	if a4, _ := st.policy(ctx, cfg); a4 == a1 {
		t.Error("a failed instance was kept")
	}
}
