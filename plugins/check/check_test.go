package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/internal/wasmtest"
	"github.com/minfer/minfer/plugins/builtin"
	"github.com/minfer/minfer/sdk"
)

func TestCheckBuiltins(t *testing.T) {
	infos, results, err := Check(context.Background(), builtin.WASM, CheckOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != len(builtin.Plugins) {
		t.Fatalf("got %d plugins, want %d", len(infos), len(builtin.Plugins))
	}
	seen := map[string]bool{}
	for _, r := range results {
		if r.Err != nil {
			t.Errorf("%s (%s) %s: %v", r.Plugin, r.Role, r.Name, r.Err)
		}
		seen[string(r.Role)+" "+r.Name] = true
		t.Logf("%s (%s) %s: %s", r.Plugin, r.Role, r.Name, r.Note)
	}
	for _, want := range []string{"policy simulator trace shifting.jsonl", "sampler greedy identity", "penalty edge-case rows", "policy edge-case outcomes",
		"drafter greedy rounds over a copy-heavy sequence", "drafter determinism", "drafter edge-case requests"} {
		if !seen[want] {
			t.Errorf("no %q check ran", want)
		}
	}
}

// A sampler that ignores the draft fails the greedy identity check, and only it.
func TestCheckCatchesWrongSampler(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a WebAssembly module")
	}
	bin := wasmtest.BuildGo(t, "../testdata/badguest")
	var log strings.Builder
	_, results, err := Check(context.Background(), bin, CheckOptions{Plugin: "lazy", Timeout: 5 * time.Second, Log: &wasmtest.SyncWriter{W: &log}})
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, r := range results {
		if r.Err != nil {
			failed = append(failed, r.Name)
		}
	}
	if strings.Join(failed, ",") != "greedy identity" {
		t.Fatalf("failed checks: got %v, want [greedy identity]", failed)
	}
	if !strings.Contains(log.String(), "[plugin lazy] lazy: started\n") {
		t.Fatalf("guest stderr not in the log with the plugin's prefix: %q", log.String())
	}
}

// A policy that names a drafter the sequence does not offer fails the several-drafters
// check (with one drafter, Drafters 0 or 1, its drafter 0 or 1 is what the engine
// accepts or refuses as well, and the other checks do not ask).
func TestCheckCatchesStrayDrafter(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a WebAssembly module")
	}
	bin := wasmtest.BuildGo(t, "../testdata/badguest")
	_, results, err := Check(context.Background(), bin, CheckOptions{Plugin: "stray", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Name == "several drafters" {
			if r.Err == nil || !strings.Contains(r.Err.Error(), "drafter 3 chosen, the sequence offers 3") {
				t.Fatalf("several drafters: got %v, want the stray drafter named", r.Err)
			}
			return
		}
	}
	t.Fatalf("no several-drafters check in %+v", results)
}

// TestCheckLimitsAreTheHosts: with no --timeout or --memory-mb a check runs under the
// deadline and memory cap minfer run and serve give a declared plugin (config's
// defaults for a builtin: or file: plugin), not under tighter ones of its own.
func TestCheckLimitsAreTheHosts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     CheckOptions
		deadline time.Duration
		memory   int
	}{
		{"defaults", CheckOptions{}, config.Default().Plugins["adaptive"].Timeout, config.Default().Plugins["adaptive"].MemoryMB},
		{"set", CheckOptions{Timeout: 5 * time.Second, MemoryMB: 128}, 5 * time.Second, 128},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.opts.Deadline(); got != tc.deadline {
				t.Errorf("deadline: got %v, want %v", got, tc.deadline)
			}
			if got := tc.opts.Memory(); got != tc.memory {
				t.Errorf("memory: got %d MiB, want %d", got, tc.memory)
			}
			var b strings.Builder
			WriteLimits(&b, tc.opts)
			if want := fmt.Sprintf("limits: %v a call, %d MiB", tc.deadline, tc.memory); !strings.HasPrefix(b.String(), want) {
				t.Errorf("limits line: got %q, want it to start %q", b.String(), want)
			}
		})
	}
}

// TestReportShowsDeclaredParams: each plugin's line of the report says which params
// keys it declares it reads (plugins.ParamsLabel), and so does its entry of the JSON
// report (left out when it declares nothing, [] when none).
func TestReportShowsDeclaredParams(t *testing.T) {
	infos := []sdk.Info{
		{Name: "keyed", Version: "0.1.0", Roles: []sdk.Role{sdk.RolePolicy}, Params: []string{"depth", "draft_max"}, ParamsDeclared: true},
		{Name: "keyless", Version: "0.1.0", Roles: []sdk.Role{sdk.RoleSampler}, ParamsDeclared: true},
		{Name: "open", Version: "0.1.0", Roles: []sdk.Role{sdk.RolePenalty}},
	}
	var b strings.Builder
	WriteReport(&b, "m.wasm", infos, nil)
	for _, want := range []string{"plugin keyed 0.1.0: [policy], params depth,draft_max\n",
		"plugin keyless 0.1.0: [sampler], params none\n", "plugin open 0.1.0: [penalty], params -\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	results := []CheckResult{{Plugin: "keyed", Role: sdk.RolePolicy, Name: "init"},
		{Plugin: "open", Role: sdk.RolePenalty, Name: "self-test round", Err: errors.New("boom")}}
	if err := WriteJSON(&b, "m.wasm", infos, CheckOptions{}, results); err != nil {
		t.Fatal(err)
	}
	var got JSONReport
	if err := json.Unmarshal([]byte(b.String()), &got); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	want := map[string]*[]string{"keyed": {"depth", "draft_max"}, "keyless": {}, "open": nil}
	if len(got.Plugins) != len(want) {
		t.Fatalf("plugins: got %d, want %d\n%s", len(got.Plugins), len(want), b.String())
	}
	for _, p := range got.Plugins {
		w := want[p.Name]
		if (p.Params == nil) != (w == nil) || w != nil && !slices.Equal(*p.Params, *w) {
			t.Errorf("json: %s params: got %v, want %v\n%s", p.Name, p.Params, w, b.String())
		}
	}
	if !strings.Contains(b.String(), `"params": []`) || strings.Count(b.String(), `"params"`) != 2 {
		t.Errorf("json: want keyless's params as [] and open's left out:\n%s", b.String())
	}
	if got.Module != "m.wasm" || got.Failed != 1 || len(got.Checks) != 2 || got.Checks[1].Error != "boom" ||
		got.Limits.MemoryMB != config.DefaultMemoryMB || got.Limits.Timeout != config.DefaultWasmTimeout.String() {
		t.Errorf("json: got %+v", got)
	}
}

// TestCheckRefusesUndeclaredParams: --params with a key the plugin does not declare
// fails a "declared params" check naming the key, as the host refuses it at load; a
// declared key, or a plugin that declares nothing, passes it.
func TestCheckRefusesUndeclaredParams(t *testing.T) {
	module := func(keys []string) []byte {
		info := sdk.AppendInfo(nil, []sdk.Info{{Name: "p", Version: "0.1.0", Roles: []sdk.Role{sdk.RolePolicy},
			Params: keys, ParamsDeclared: keys != nil}})
		return wasmtest.Plugin{Minor: sdk.ABIMinor, Info: info, Policy: wasmtest.I64Const(0)}.Bytes()
	}
	for _, tc := range []struct {
		name   string
		keys   []string // nil: declares nothing
		params string
		want   string // "" = the check does not fail
	}{
		{"misspelt key", []string{"depth"}, `{"dpeth":1}`, `params: unknown key "dpeth": plugin "p" reads depth`},
		{"declared key", []string{"depth"}, `{"depth":1}`, ""},
		{"declares none", []string{}, `{"depth":1}`, `params: unknown key "depth": plugin "p" reads no params`},
		{"declares nothing", nil, `{"anything":1}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, results, err := Check(context.Background(), module(tc.keys), CheckOptions{Params: []byte(tc.params), Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range results {
				if r.Name == "declared params" {
					got = append(got, fmt.Sprint(r.Err))
				}
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("got %q, want no declared-params failure", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("got %q, want one failure containing %q", got, tc.want)
			}
		})
	}
}
