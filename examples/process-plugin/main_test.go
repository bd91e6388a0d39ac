package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/internal/testpath"
	"github.com/minfer/minfer/plugins"
	"github.com/minfer/minfer/plugins/process"
	"github.com/minfer/minfer/sdk"
)

// drive feeds a policy rounds in which accept(depth) draft tokens are accepted and
// returns the depths it chose.
func drive(t *testing.T, p sdk.DepthPolicy, rounds int, accept func(depth int) int) []int {
	t.Helper()
	last := sdk.RoundOutcome{Round: -1, MaxDepth: 16}
	var depths []int
	for r := range rounds {
		d, err := p.NextDepth(context.Background(), last)
		if err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		depths = append(depths, d.Depth)
		last = sdk.RoundOutcome{Round: r, Depth: d.Depth, Drafted: d.Depth, Accepted: accept(d.Depth), MaxDepth: 16}
	}
	return depths
}

func all(int) int  { return 1 << 30 }
func none(int) int { return 0 }

func clampAccept(f func(int) int) func(int) int {
	return func(d int) int { return min(d, f(d)) }
}

func TestStepLogic(t *testing.T) {
	for _, tc := range []struct {
		name   string
		params string
		accept func(int) int
		want   int // depth after the rounds
	}{
		{"high acceptance climbs to draft_max", `{"start": 2, "draft_max": 8}`, all, 8},
		{"no acceptance falls to min", `{"start": 6}`, none, 1},
		{"min 0 allows plain decoding", `{"start": 3, "min": 0}`, none, 0},
		{"half acceptance holds", `{"start": 4}`, func(d int) int { return d / 2 }, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := newStep([]byte(tc.params))
			if err != nil {
				t.Fatal(err)
			}
			depths := drive(t, p, 20, clampAccept(tc.accept))
			if got := depths[len(depths)-1]; got != tc.want {
				t.Fatalf("depths %v: got final %d, want %d", depths, got, tc.want)
			}
		})
	}
	for _, bad := range []string{`{"min": 20}`, `{"start": 0}`, `{"window": 0}`, `{"up": 0.2, "down": 0.5}`, `[1]`} {
		if _, err := newStep([]byte(bad)); err == nil {
			t.Errorf("params %s: got no error", bad)
		}
	}
}

// TestThroughConfig builds the plugin, declares it in a minfer.toml, and drives it
// through the process host exactly as minfer does.
func TestThroughConfig(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", "step"), ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	toml := `
[plugins.step]
source = "process:./bin/step"
params = { start = 2, window = 2 }

[spec]
policy = "step"
draft_max = 6
fallback = "adaptive"
`
	cfgPath := filepath.Join(dir, "minfer.toml")
	if err := os.WriteFile(cfgPath, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	name := cfg.Spec.PolicyName()
	pc := cfg.Plugins[name]
	kind, ref, err := pc.SourceKind()
	if err != nil || kind != config.SourceProcess {
		t.Fatalf("source %q: kind %q, %v", pc.Source, kind, err)
	}
	m, err := plugins.Params(cfg, name)
	if err != nil {
		t.Fatal(err)
	}
	params, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	c, err := process.Open(context.Background(), name, cfg.ResolvePath(ref), process.Options{Params: params, Timeout: pc.Timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if roles := c.Roles(); len(roles) != 1 || roles[0] != sdk.RolePolicy {
		t.Fatalf("roles: got %v, want [policy]", roles)
	}
	p, err := c.Policy()
	if err != nil {
		t.Fatal(err)
	}
	// draft_max = 6 comes from [spec] through plugins.Params.
	depths := drive(t, p, 10, clampAccept(all))
	if depths[0] != 2 || depths[len(depths)-1] != 6 {
		t.Fatalf("depths %v: want 2 first and 6 (draft_max) last", depths)
	}
	if _, err := c.Sampler(); err == nil {
		t.Fatal("Sampler of a policy-only plugin: got no error")
	}
}

// TestEngineUsesIt runs `minfer run` speculatively with the plugin as depth policy
// (draft = target, so every draft token is accepted) and checks from the --json stats
// that the engine asked it for each round's depth: the step policy starts at 2 and
// climbs by one per fully accepted round. Greedy output must equal plain decoding.
func TestEngineUsesIt(t *testing.T) {
	dir := t.TempDir()
	for pkg, out := range map[string]string{".": "bin/step", "../../cmd/minfer": "minfer"} {
		if b, err := exec.Command("go", "build", "-o", filepath.Join(dir, out), pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	cfg := "[plugins.step]\nsource = \"process:./bin/step\"\nparams = { start = 2 }\n\n[spec]\npolicy = \"step\"\n\n[sampling]\ntemperature = 0\n"
	if err := os.WriteFile(filepath.Join(dir, "minfer.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	model := testpath.Path(t, "models", "stories260K.gguf")
	type result struct {
		Text string `json:"text"`
		Spec *struct {
			Policy  string                    `json:"policy"`
			Rounds  int                       `json:"rounds"`
			ByDepth map[string]map[string]int `json:"by_depth"`
		} `json:"spec"`
	}
	run := func(args ...string) result {
		t.Helper()
		args = append([]string{"run", "--config", filepath.Join(dir, "minfer.toml"), "-m", model,
			"-p", "Once upon a time", "-n", "24", "--json"}, args...)
		cmd := exec.Command(filepath.Join(dir, "minfer"), args...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("minfer %v: %v\n%s", args, err, out)
		}
		var r result
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("minfer --json output: %v\n%s", err, out)
		}
		return r
	}
	spec := run("--draft", model)
	if spec.Spec == nil || spec.Spec.Policy != "step" || spec.Spec.Rounds == 0 {
		t.Fatalf("spec stats: got %+v, want rounds decided by policy step", spec.Spec)
	}
	// 24 tokens, all accepted: rounds of depth 2, 3, 4, 5 (+1 token each) make 18; the
	// rest at the depth the remaining budget allows.
	for _, d := range []string{"2", "3", "4"} {
		if spec.Spec.ByDepth[d]["rounds"] != 1 {
			t.Errorf("by_depth: got %v, want one round at each of depths 2, 3, 4", spec.Spec.ByDepth)
			break
		}
	}
	if plain := run(); plain.Text != spec.Text {
		t.Fatalf("greedy identity: speculative %q, plain %q", spec.Text, plain.Text)
	}
}
