package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minfer/minfer/internal/specbench"
	"github.com/minfer/minfer/internal/testpath"
	"github.com/minfer/minfer/sdk"
)

func TestPluginList(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "minfer.toml")
	os.WriteFile(cfg, []byte("[plugins.fast]\nsource = \"builtin:static\"\nparams = { depth = 2 }\n"), 0o644)
	out, _, err := runCLI(t, "", "plugin", "list", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	// the built-ins run natively (their ABI column says so); builtin.wasm is checked by
	// TestPluginCheck
	for _, want := range []string{"adaptive", "ucb", "greedy", "sampling", "penalty", "fast      policy   1.0.0    builtin:static    native"} {
		if !strings.Contains(out, want) {
			t.Errorf("plugin list output lacks %q:\n%s", want, out)
		}
	}
	// a built-in's PARAMS are the keys it declares (static's params struct)
	if !strings.Contains(out, "\nfast ") || !strings.HasSuffix(strings.SplitN(strings.SplitN(out, "\nfast ", 2)[1], "\n", 2)[0], "  depth,min_conf,keep_cut,draft_max") {
		t.Errorf("plugin list: want fast's declared params depth,min_conf,keep_cut,draft_max:\n%s", out)
	}
	out, _, err = runCLI(t, "", "plugin", "list", "--json", "--config", cfg)
	if err != nil || !strings.Contains(out, `"name": "fast"`) {
		t.Fatalf("plugin list --json: %v\n%s", err, out)
	}
	var rows []struct {
		Name   string    `json:"name"`
		Params *[]string `json:"params"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("plugin list --json: %v\n%s", err, out)
	}
	for _, r := range rows {
		if r.Params == nil || len(*r.Params) == 0 {
			t.Errorf("plugin list --json: %s: params %v, want the keys it declares", r.Name, r.Params)
		}
	}
}

// TestPluginCheckJSON: plugin check --json carries what the text report says: the
// module, the limits, each plugin with its declared params, and the checks.
func TestPluginCheckJSON(t *testing.T) {
	out, _, err := runCLI(t, "", "plugin", "check", "--timeout", "5s", "../../plugins/builtin/builtin.wasm", "--plugin", "greedy", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var got struct {
		Module  string
		ABI     string
		Limits  struct{ Timeout string }
		Plugins []struct {
			Name   string
			Params *[]string
		}
		Checks []struct {
			Plugin, Check string
			OK            bool
		}
		Failed int
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	params := map[string]string{}
	for _, p := range got.Plugins {
		if p.Params != nil {
			params[p.Name] = strings.Join(*p.Params, ",")
		}
	}
	if got.Module != "../../plugins/builtin/builtin.wasm" || got.ABI != fmt.Sprintf("v%d.%d", sdk.ABIMajor, sdk.ABIMinor) ||
		got.Limits.Timeout != "5s" || got.Failed != 0 || len(got.Checks) == 0 || got.Checks[0].Plugin != "greedy" {
		t.Errorf("got %+v\n%s", got, out)
	}
	for name, want := range map[string]string{"greedy": "temperature,top_k,top_p,min_p", "ngram": "n_min,n_max,decay"} {
		if params[name] != want {
			t.Errorf("plugin %s: params %q, want %q\n%s", name, params[name], want, out)
		}
	}
}

func TestPluginCheckAndUsage(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "x.wasm")
	os.WriteFile(garbage, []byte("not wasm"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		// check runs a file: module interruptible (10-15x slower calls than the trusted
		// built-ins), and a drafter's edge case indexes a 16384-token prompt in one call
		// (under at least 1 s): the deadline is a margin for a loaded 2-core machine,
		// not a speed assertion.
		{"builtin module", []string{"plugin", "check", "--timeout", "30s", "../../plugins/builtin/builtin.wasm"}, 0, "all 41 checks passed"},
		{"host's limits by default", []string{"plugin", "check", "../../plugins/builtin/builtin.wasm", "--plugin", "greedy"}, 0, "limits: 1s a call, 64 MiB of memory"},
		{"one plugin as json", []string{"plugin", "check", "--timeout", "5s", "../../plugins/builtin/builtin.wasm", "--plugin", "static", "--json"}, 0, `"check": "simulator trace kink.jsonl"`},
		{"failing checks", []string{"plugin", "check", "--timeout", "5s", "../../plugins/builtin/builtin.wasm", "--plugin", "sampling", "--params", `{"top_p":7}`}, 1, "FAIL sampling (sampler) init"},
		{"not wasm", []string{"plugin", "check", garbage}, 1, ""},
		{"missing file", []string{"plugin", "check", "nope.wasm"}, 1, ""},
		{"bad params", []string{"plugin", "check", garbage, "--params", "[1]"}, 2, ""},
		{"no subcommand", []string{"plugin"}, 2, ""},
		{"unknown subcommand", []string{"plugin", "frob"}, 2, ""},
		{"bad role", []string{"plugin", "new", "router", t.TempDir()}, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := runCLI(t, "", tc.args...)
			if got := exitCode(err); got != tc.code {
				t.Fatalf("exit code: got %d, want %d (err %v)\n%s", got, tc.code, err, out)
			}
			if !strings.Contains(out, tc.want) {
				t.Fatalf("output lacks %q:\n%s", tc.want, out)
			}
		})
	}
}

// TestPluginNewBuilds scaffolds each role outside the minfer module (the go.mod points
// at the checkout this test binary was built from, with no --minfer), runs the build
// command plugin new prints exactly as printed, offline and with no go mod tidy, and
// the conformance kit on the result; and once inside the checkout, where no go.mod is
// written.
func TestPluginNewBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds WebAssembly modules")
	}
	root, _ := filepath.Abs("../..")
	inside, err := os.MkdirTemp(filepath.Join(root, ".dev"), "scaffold-")
	if err != nil {
		if err = os.MkdirAll(filepath.Join(root, ".dev"), 0o755); err == nil {
			inside, err = os.MkdirTemp(filepath.Join(root, ".dev"), "scaffold-")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(inside) })
	for _, tc := range []struct{ role, dir, params string }{
		{"policy", filepath.Join(t.TempDir(), "my-policy"), "depth"},
		{"sampler", filepath.Join(t.TempDir(), "my-sampler"), "none"},
		{"penalty", filepath.Join(t.TempDir(), "my penalty"), "amount,last_n"},
		{"drafter", filepath.Join(t.TempDir(), "my-drafter"), "none"},
		{"policy", filepath.Join(inside, "my-inside"), "depth"},
	} {
		t.Run(filepath.Base(tc.dir), func(t *testing.T) {
			out, _, err := runCLI(t, "", "plugin", "new", tc.role, tc.dir)
			if err != nil {
				t.Fatal(err)
			}
			_, hasMod := os.Stat(filepath.Join(tc.dir, "go.mod"))
			if (hasMod == nil) == strings.HasPrefix(tc.dir, root) {
				t.Fatalf("go.mod written: %v, want it only outside the checkout", hasMod == nil)
			}
			// the printed lines: cd DIR, the build command, the check
			_, next, ok := strings.Cut(out, "next, build it and check it (README.md has the details):\n")
			lines := strings.Split(strings.TrimSpace(next), "\n")
			if !ok || len(lines) != 3 || !strings.HasPrefix(lines[2], "  minfer plugin check ") {
				t.Fatalf("plugin new printed no cd/build/check lines:\n%s", out)
			}
			cmd := exec.Command("sh", "-c", strings.TrimSpace(lines[0])+" && "+strings.TrimSpace(lines[1]))
			cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly")
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s && %s: %v\n%s", lines[0], lines[1], err, b)
			}
			wasm := filepath.Join(tc.dir, strings.TrimPrefix(lines[2], "  minfer plugin check "))
			name := strings.TrimSuffix(filepath.Base(wasm), ".wasm")
			out, _, err = runCLI(t, "", "plugin", "check", "--timeout", "5s", wasm)
			if err != nil || !strings.Contains(out, "plugin "+name+" 0.1.0: ["+tc.role+"], params "+tc.params+"\n") {
				t.Fatalf("plugin check: %v\n%s", err, out)
			}
			// the scaffold declares its params: a misspelt key is refused at start, by name
			cfg := filepath.Join(tc.dir, "minfer.toml")
			toml := fmt.Sprintf("[plugins.%s]\nsource = %q\nparams = { dpeth = 3 }\n", name, "file:"+wasm)
			if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, _, err := runCLI(t, "", "plugin", "list", "--config", cfg); err == nil || !strings.Contains(err.Error(), `unknown key "dpeth"`) {
				t.Errorf("a misspelt params key: got %v, want it refused by name", err)
			}
			if b, err := os.ReadFile(filepath.Join(tc.dir, ".gitignore")); err != nil || string(b) != "/"+name+".wasm\n" {
				t.Errorf(".gitignore: got %q %v, want the .wasm output ignored", b, err)
			}
		})
	}
	if _, _, err := runCLI(t, "", "plugin", "new", "policy", t.TempDir()+"/Bad Name!"); err != nil {
		t.Fatalf("a directory name is cleaned into a plugin name: %v", err)
	}
	// a --minfer that is not a checkout is refused by name
	_, _, err = runCLI(t, "", "plugin", "new", "policy", filepath.Join(t.TempDir(), "p"), "--minfer", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "not a minfer checkout") {
		t.Errorf("--minfer of a non-checkout: got %v", err)
	}
}

func TestPolicyReplay(t *testing.T) {
	trace := "../../plugins/check/simtraces/kink.jsonl"
	out, _, err := runCLI(t, "", "policy", "replay", trace, "--policy", "adaptive,static,builtin:ucb", "--params", `{"draft_max":12}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"300 rounds", "recorded", "adaptive", "static", "builtin:ucb", "vs recorded"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte("{\"round\":0,\"depth\":2,\"drafted\":3,\"verify_ns\":5}\n"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"policy", "replay", trace}, 2},                              // no --policy
		{[]string{"policy", "replay", "--policy", "adaptive"}, 2},             // no trace
		{[]string{"policy", "replay", trace, "--policy", "nope"}, 2},          // unknown policy
		{[]string{"policy", "replay", trace, "--policy", "greedy"}, 1},        // not a policy
		{[]string{"policy", "replay", bad, "--policy", "adaptive"}, 1},        // inconsistent trace
		{[]string{"policy", "replay", "missing.jsonl", "--policy", "ucb"}, 1}, // no file
		{[]string{"policy", "frob"}, 2},
	} {
		_, _, err := runCLI(t, "", tc.args...)
		if got := exitCode(err); got != tc.code {
			t.Errorf("%v: exit code %d, want %d (err %v)", tc.args, got, tc.code, err)
		}
	}
}

// TestPolicyReplayWalk records a specbench trace (which keys every round by its prompt)
// and walks policies over it: the walked static depth 2 lands on the recorded one, and a
// trace without prompt keys is refused by name. The recorded times are replaced by a
// fixed cost model first (draft steps, verify rows and the rest of a round at set
// prices): the tiny model's rounds take microseconds, so on a loaded machine one
// preempted round moves a run's total by more than the walk's error, which is what the
// comparison is about.
func TestPolicyReplayWalk(t *testing.T) {
	model := testpath.Path(t, "models", "stories260K.gguf")
	trace := filepath.Join(t.TempDir(), "bench.jsonl")
	if _, stderr, err := runCLI(t, "", "specbench", "--config", emptyConfig(t), "-m", model, "--draft", model,
		"--depths", "0,1,2,3", "-n", "24", "-r", "2", "--warmup", "0", "-t", "1", "--curve=false", "--trace", trace); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	fixCosts(t, trace, func(steps, nt int) (int64, int64) { return int64(steps) * 40_000, 100_000 + int64(nt)*15_000 })
	out, _, err := runCLI(t, "", "policy", "replay", trace, "--walk", "--policy", "builtin:static", "--params", `{"depth":2}`, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Prompts  int `json:"prompts"`
		Recorded []struct {
			Policy   string  `json:"policy"`
			TokensPS float64 `json:"tokens_per_s"`
		} `json:"recorded"`
		Walked []struct {
			Policy   string  `json:"policy"`
			TokensPS float64 `json:"tokens_per_s"`
		} `json:"walked"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	rec := map[string]float64{}
	for _, r := range got.Recorded {
		rec[r.Policy] = r.TokensPS
	}
	d2 := rec["static depth 2"]
	if got.Prompts != len(specbench.DefaultPrompts) || len(got.Walked) != 1 || d2 == 0 {
		t.Fatalf("got %s", out)
	}
	if w := got.Walked[0].TokensPS; math.Abs(w/d2-1) > 0.01 {
		t.Errorf("walked static depth 2: %.0f t/s, recorded %.0f: want within 1%%", w, d2)
	}
	text, _, err := runCLI(t, "", "policy", "replay", trace, "--walk", "--policy", "adaptive,static")
	if err != nil || !strings.Contains(text, "recorded static depth 3") || !strings.Contains(text, "walked adaptive") {
		t.Errorf("text output: %v\n%s", err, text)
	}
	_, _, err = runCLI(t, "", "policy", "replay", "../../plugins/check/simtraces/kink.jsonl", "--walk", "--policy", "adaptive")
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "no prompt key") {
		t.Errorf("a trace without prompt keys: %v", err)
	}
}

// fixCosts rewrites a trace's draft and verify times with cost(draft steps, verify rows)
// and its host times with 7 µs, after checking that every round recorded one.
func fixCosts(t *testing.T, path string, cost func(steps, nt int) (draftNs, verifyNs int64)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v in %s", err, line)
		}
		drafted, _ := r["drafted"].(float64)
		steps := int(drafted) // specbench's static depths set no cut-off: a step per draft
		if h, _ := r["host_ns"].(float64); !(h > 0) {
			t.Fatalf("a live round without its host time: %s", line)
		}
		d, v := cost(steps, steps+1)
		r["draft_ns"], r["verify_ns"], r["host_ns"] = d, v, 7_000
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(append(out, b...), '\n')
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPolicyReplayWarnsOnMixedDepths: plain replay of rounds recorded at several depths
// (a specbench trace of --depths 1,2) warns that its baseline mixes them and points to
// --walk; a trace of one policy does not warn.
func TestPolicyReplayWarnsOnMixedDepths(t *testing.T) {
	var b strings.Builder
	for i := range 20 {
		d := 1 + i%2
		fmt.Fprintf(&b, `{"seq":%d,"round":0,"policy":"static","depth":%d,"max_depth":8,"drafted":%d,"accepted":%d,"draft_conf":[%s],"draft_ns":1000,"verify_ns":5000}`+"\n",
			i, d, d, d, strings.TrimSuffix(strings.Repeat("0.9,", d), ","))
	}
	mixed := filepath.Join(t.TempDir(), "mixed.jsonl")
	os.WriteFile(mixed, []byte(b.String()), 0o644)
	_, stderr, err := runCLI(t, "", "policy", "replay", mixed, "--policy", "adaptive")
	if err != nil || !strings.Contains(stderr, "mixes rounds of 2 recorded policies and depths (static:1, static:2)") || !strings.Contains(stderr, "--walk") {
		t.Fatalf("got %v, stderr %q; want a warning naming the depths and --walk", err, stderr)
	}
	if _, stderr, _ := runCLI(t, "", "policy", "replay", "../../plugins/check/simtraces/kink.jsonl", "--policy", "adaptive"); strings.Contains(stderr, "mixes rounds") {
		t.Errorf("one recorded policy: unexpected warning %q", stderr)
	}
}

// TestPluginListShowsFailures: plugin list with a plugin that does not load lists the
// rest, that one with its error, and exits 1.
func TestPluginListShowsFailures(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "minfer.toml")
	os.WriteFile(cfg, []byte("[plugins.x]\nsource = \"file:./nope.wasm\"\n"), 0o644)
	out, _, err := runCLI(t, "", "plugin", "list", "--config", cfg)
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "1 of 9 declared plugins failed to load") {
		t.Fatalf("got %v, want exit 1 counting the failure", err)
	}
	for _, want := range []string{"\nadaptive ", "\nucb "} {
		if !strings.Contains(out, want) {
			t.Errorf("plugin list lacks %q:\n%s", want, out)
		}
	}
	_, x, _ := strings.Cut(out, "\nx ")
	if f := strings.Fields(x); len(f) < 7 || f[2] != "file:./nope.wasm" || f[5] != "not" || !strings.Contains(x, "nope.wasm: no such file") {
		t.Errorf("plugin list: x's row: got %q, want its source and why it did not load", x)
	}
}
