package plugins

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/internal/wasmtest"
	"github.com/minfer/minfer/plugins/builtin"
	"github.com/minfer/minfer/plugins/process"
	"github.com/minfer/minfer/sdk"
)

func TestDefaultRegistry(t *testing.T) {
	ctx := context.Background()
	for _, native := range []bool{false, true} {
		name := map[bool]string{false: "wasm", true: "native"}[native]
		t.Run(name, func(t *testing.T) {
			var opts []Option
			if !native {
				opts = append(opts, WithWasmBuiltins())
			}
			decls := config.Default().Plugins
			for k, v := range decls {
				v.Timeout = 5 * time.Second // generous: tests share a loaded machine
				decls[k] = v
			}
			r, err := NewRegistry(ctx, decls, nil, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if got, want := strings.Join(r.Names(), ","), strings.Join(config.BuiltinNames(), ","); got != want {
				t.Fatalf("names: got %s, want %s", got, want)
			}
			p, info, err := r.Policy(ctx, "static", map[string]any{"depth": 5})
			if err != nil {
				t.Fatal(err)
			}
			defer Release(p)
			if info.Name != "static" || info.Source != "builtin:static" {
				t.Fatalf("info: got %+v", info)
			}
			d, err := p.NextDepth(ctx, sdk.RoundOutcome{Round: -1, MaxDepth: 8})
			if err != nil || d.Depth != 5 {
				t.Fatalf("static with override depth 5: got %+v %v", d, err)
			}
			s, _, err := r.Sampler(ctx, "sampling", map[string]any{"top_k": 7})
			if err != nil {
				t.Fatal(err)
			}
			defer Release(s)
			if s.Needs().TopK != 7 {
				t.Fatalf("sampling needs: got %+v, want TopK 7", s.Needs())
			}
			pen, _, err := r.Penalty(ctx, "penalty", map[string]any{"repeat_penalty": 1.1, "repeat_last_n": 32})
			if err != nil {
				t.Fatal(err)
			}
			defer Release(pen)
			if pen.Window() != 32 {
				t.Fatalf("penalty window: got %d, want 32", pen.Window())
			}
		})
	}
}

func TestRegistryErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	notWasm := filepath.Join(dir, "x.wasm")
	os.WriteFile(notWasm, []byte("hello"), 0o644)
	for _, tc := range []struct {
		name  string
		decls map[string]config.Plugin
		want  string
	}{
		{"unknown builtin", map[string]config.Plugin{"x": {Source: "builtin:nope"}}, `no built-in plugin "nope"`},
		{"missing file", map[string]config.Plugin{"x": {Source: "file:" + filepath.Join(dir, "missing.wasm")}}, "missing.wasm"},
		{"not wasm", map[string]config.Plugin{"x": {Source: "file:" + notWasm}}, "not a valid WebAssembly module"},
		{"bad source", map[string]config.Plugin{"x": {Source: "ftp:x"}}, "unknown kind"},
		{"role mismatch", map[string]config.Plugin{"x": {Source: "builtin:greedy", Roles: []string{"policy"}}}, "roles"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewRegistry(ctx, tc.decls, nil, WithCacheDir("-"))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "[plugins.x]") {
				t.Fatalf("got %v, want an error naming [plugins.x] and containing %q", err, tc.want)
			}
		})
	}

	r, err := NewRegistry(ctx, map[string]config.Plugin{"greedy": {}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, _, err := r.Policy(ctx, "greedy", nil); err == nil || !strings.Contains(err.Error(), "not a policy") {
		t.Fatalf("wrong role: got %v", err)
	}
	if _, _, err := r.Sampler(ctx, "nope", nil); err == nil || !strings.Contains(err.Error(), `no plugin "nope"`) {
		t.Fatalf("unknown name: got %v", err)
	}
	if _, _, err := r.Sampler(ctx, "greedy", map[string]any{"bogus": 1}); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("bad override: got %v", err)
	}
}

func TestBuiltinTableMatchesConfig(t *testing.T) {
	for _, p := range builtin.Plugins {
		role, ok := config.Builtins[p.Info.Name]
		if !ok || role != p.Info.Roles[0] {
			t.Errorf("%s: config.Builtins has %q, plugin declares %v", p.Info.Name, role, p.Info.Roles)
		}
	}
	if len(config.Builtins) != len(builtin.Plugins) {
		t.Errorf("config.Builtins has %d entries, plugins/builtin %d", len(config.Builtins), len(builtin.Plugins))
	}
}

// TestProcessSource loads the example process plugin through the registry: params from
// the declaration, and per-sequence overrides (which start a process of their own).
func TestProcessSource(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin executable")
	}
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "step")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/process-plugin").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	r, err := NewRegistry(ctx, map[string]config.Plugin{
		"step": {Source: "process:" + bin, Params: map[string]any{"start": 3}, Timeout: 5 * time.Second},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	info, ok := r.Info("step")
	if !ok || !info.Has(sdk.RolePolicy) || info.Source != "process:"+bin {
		t.Fatalf("info: got %+v", info)
	}
	for _, tc := range []struct {
		overrides map[string]any
		want      int
	}{{nil, 3}, {map[string]any{"start": 5}, 5}} {
		p, _, err := r.Policy(ctx, "step", tc.overrides)
		if err != nil {
			t.Fatal(err)
		}
		d, err := p.NextDepth(ctx, sdk.RoundOutcome{Round: -1, MaxDepth: 8})
		if err != nil || d.Depth != tc.want {
			t.Errorf("overrides %v: got %+v %v, want depth %d", tc.overrides, d, err, tc.want)
		}
		if err := Release(p); err != nil {
			t.Errorf("release: %v", err)
		}
	}
	if _, _, err := r.Sampler(ctx, "step", nil); err == nil {
		t.Error("a policy-only process plugin served as a sampler")
	}
}

// TestDeclaredParams: a process plugin that declares its params (the example does) is
// offered only the [spec] settings among them (not keep_cut, which it does not read),
// and a [plugins.NAME] params key outside them fails the registry, naming the key and
// what the plugin reads. A plugin that declares nothing is offered everything.
func TestDeclaredParams(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin executable")
	}
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "step")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/process-plugin").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfg, err := config.Parse([]byte("[spec]\npolicy = \"step\"\nmin_conf = 0.5\nkeep_cut = true\n[plugins.step]\nsource = \"process:"+bin+"\"\nparams = { start = 2 }\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRegistry(ctx, cfg.Plugins, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if info, _ := r.Info("step"); !info.ParamsDeclared || !slices.Contains(info.Params, "start") {
		t.Fatalf("info: got %+v, want the example's declared params", info)
	}
	got, err := r.Params(cfg, "step")
	if want := map[string]any{"draft_max": 16, "min_conf": 0.5, "start": int64(2)}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("params: got %v %v, want %v", got, err, want)
	}
	if all, err := Params(cfg, "step"); err != nil || all["keep_cut"] != true {
		t.Errorf("undeclared: got %v %v, want keep_cut offered", all, err)
	}
	decls := maps.Clone(cfg.Plugins)
	bad := decls["step"]
	bad.Params = map[string]any{"strat": 3}
	decls["step"] = bad
	_, err = NewRegistry(ctx, decls, nil)
	for _, want := range []string{"[plugins.step]", `unknown key "strat"`, "start, min, draft_max"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("misspelt key: got %v, want it to say %q", err, want)
		}
	}
}

// TestProcessInstancesShareTheProcess: ten sequences with overrides (serve always
// passes some) run in the one process the registry started, each with its own params
// (before: 11 processes for 10 requests, +100 ms each).
func TestProcessInstancesShareTheProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin executable")
	}
	var starts atomic.Int64
	defer func(open func(context.Context, string, string, process.Options) (*process.Client, error)) {
		openProcess = open
	}(openProcess)
	open := openProcess
	openProcess = func(ctx context.Context, name, path string, o process.Options) (*process.Client, error) {
		starts.Add(1)
		return open(ctx, name, path, o)
	}
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "step")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/process-plugin").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	r, err := NewRegistry(ctx, map[string]config.Plugin{
		"step": {Source: "process:" + bin, Params: map[string]any{"start": 3}, Timeout: 5 * time.Second},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var live []sdk.DepthPolicy
	for i := range 10 {
		p, _, err := r.Policy(ctx, "step", map[string]any{"start": 2 + i%3})
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, p)
	}
	for i, p := range live { // all alive at once, each with its own params
		d, err := p.NextDepth(ctx, sdk.RoundOutcome{Round: -1, MaxDepth: 8})
		if err != nil || d.Depth != 2+i%3 {
			t.Errorf("sequence %d: got %+v %v, want depth %d", i, d, err, 2+i%3)
		}
		if err := Release(p); err != nil {
			t.Errorf("release: %v", err)
		}
	}
	if got := starts.Load(); got != 1 {
		t.Fatalf("processes started: got %d, want 1", got)
	}
}

// TestHostileGoGuest: Go plugins that loop forever, exhaust memory or crash each fail
// their call with an error naming them, within the deadline for the loop, and the
// registry keeps serving the other plugins of the same module and the built-ins.
func TestHostileGoGuest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a WebAssembly module")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "bad.wasm")
	if err := os.WriteFile(path, wasmtest.BuildGo(t, "testdata/badguest"), 0o644); err != nil {
		t.Fatal(err)
	}
	decls := map[string]config.Plugin{"greedy": {Timeout: 5 * time.Second}}
	for _, name := range []string{"spin", "hog", "crash", "lazy"} {
		// a generous deadline but for spin: filling 32 MB takes a while on a loaded machine
		decls[name] = config.Plugin{Source: "file:" + path, Timeout: 10 * time.Second, MemoryMB: 32}
	}
	decls["spin"] = config.Plugin{Source: "file:" + path, Timeout: 200 * time.Millisecond, MemoryMB: 32}
	var log strings.Builder
	r, err := NewRegistry(ctx, decls, &wasmtest.SyncWriter{W: &log}, WithInstances(1))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, tc := range []struct{ name, want string }{
		{"spin", "timeout: no answer within 200ms"},
		{"hog", "fatal error: out of memory"},
		{"crash", "panic: runtime error: integer divide by zero"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _, err := r.Policy(ctx, tc.name, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer Release(p)
			_, err = p.NextDepth(ctx, sdk.RoundOutcome{Round: -1, MaxDepth: 4})
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), `plugin "`+tc.name+`" policy`) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %s and containing %q", err, tc.name, tc.want)
			}
		})
	}
	// the module and the built-ins still serve
	s, _, err := r.Sampler(ctx, "lazy", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer Release(s)
	g, _, err := r.Sampler(ctx, "greedy", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer Release(g)
	round := &sdk.SampleRound{Rows: []sdk.SampleRow{{IDs: []int32{3, 4}, Logits: []float32{2, 1}}}}
	for _, x := range []sdk.Sampler{s, g} {
		if _, err := x.Sample(ctx, round); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(log.String(), "[plugin hog] fatal error: out of memory") {
		t.Errorf("guest output not logged with the module's prefix: %q", log.String())
	}
}
