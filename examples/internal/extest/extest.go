// Package extest is the harness the plugin examples test themselves with: build an
// example to WebAssembly, load it through a minfer.toml, and generate with the engine on
// the stories260K test model, so a test can check the engine really used the plugin.
package extest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/core/server"
	"github.com/minfer/minfer/core/tokenizer"
	"github.com/minfer/minfer/internal/testpath"
	"github.com/minfer/minfer/plugins"
)

// BuildWasm compiles the Go plugin in dir (the test's working directory when ".") with
// GOOS=wasip1 GOARCH=wasm -buildmode=c-shared and returns the .wasm path.
func BuildWasm(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "plugin.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build (GOOS=wasip1): %v\n%s", err, b)
	}
	return out
}

// Config writes toml to a minfer.toml in a temporary directory and loads it (relative
// plugin paths resolve against that directory).
func Config(t *testing.T, toml string) *config.Config {
	t.Helper()
	p := filepath.Join(t.TempDir(), "minfer.toml")
	if err := os.WriteFile(p, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	for name, pl := range c.Plugins { // tests share a loaded machine: no deadline flakes
		pl.Timeout = max(pl.Timeout, 5*time.Second)
		c.Plugins[name] = pl
	}
	return c
}

// Options of Generate.
type Options struct {
	Prompt  string
	Tokens  int  // tokens to generate
	Draft   bool // speculative decoding with the target as its own draft
	Seed    uint64
	Penalty bool // use the config's [sampling] penalty
}

// Generate runs one request on stories260K with the sampler, penalty and (with a draft
// or [spec] drafter plugins) the depth policy and drafters that cfg names, each
// instantiated from cfg's plugin table.
func Generate(t *testing.T, cfg *config.Config, o Options) *engine.Result {
	t.Helper()
	ctx := context.Background()
	b := cpu.New(cpu.Options{Threads: 2})
	t.Cleanup(func() { b.Close() })
	f, err := gguf.Open(testpath.Path(t, "models", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	target, err := model.Load(b, f, model.Options{Name: "target"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Close() })
	var draft *model.Model
	if o.Draft {
		if draft, err = model.Load(b, f, model.Options{Name: "draft"}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { draft.Close() })
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := plugins.NewRegistry(ctx, cfg.Plugins, os.Stderr, plugins.WithDir(cfg.Dir), plugins.WithInstances(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	params := func(name string) map[string]any {
		m, err := reg.Params(cfg, name) // as the CLI does: a declaring plugin gets only its keys
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	req := engine.Request{NPredict: o.Tokens, Seed: o.Seed}
	name := cfg.Sampling.SamplerName()
	s, _, err := reg.Sampler(ctx, name, params(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plugins.Release(s) })
	req.Sampler = s
	if name := cfg.Sampling.Penalty; name != "" && o.Penalty {
		p, _, err := reg.Penalty(ctx, name, params(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { plugins.Release(p) })
		req.Penalty = p
	}
	for _, name := range cfg.Spec.DrafterNames() {
		d, _, err := reg.Drafter(ctx, name, params(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { plugins.Release(d) })
		req.Drafters = append(req.Drafters, engine.Drafter{Name: name, Drafter: d})
	}
	if o.Draft || len(req.Drafters) > 0 {
		name := cfg.Spec.PolicyName()
		p, _, err := reg.Policy(ctx, name, params(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { plugins.Release(p) })
		req.Policy, req.PolicyName = plugins.WithFloors(p, plugins.SpecFloors(cfg)), name // as minfer's commands run it
	}
	// A failing drafter's rounds fall back and the output stays right; an example's
	// drafter must not fail at all.
	req.OnDrafterFailure = func(name string, err error) { t.Errorf("drafter %q failed: %v", name, err) }
	if req.Prompt, err = tok.Encode(o.Prompt, true, true); err != nil {
		t.Fatal(err)
	}
	sess, err := engine.NewSession(engine.Config{Target: target, Draft: draft, Vocab: server.TokenizerVocab(tok), Ctx: 256, DraftMax: cfg.Spec.DraftMax})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sess.Close)
	res, err := sess.Generate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Params is the params object cfg hands plugin name (plugins.Params).
func Params(t *testing.T, cfg *config.Config, name string) map[string]any {
	t.Helper()
	m, err := plugins.Params(cfg, name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
