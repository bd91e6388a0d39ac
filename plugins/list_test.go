package plugins

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/internal/wasmtest"
	"github.com/minfer/minfer/sdk"
)

// TestListShowsDeclaredParams: plugin list shows the params keys a plugin declares it
// reads (ABI v1.3) — the keys (a built-in's too), "none" for a plugin that declares it
// reads none, "-" for one that declares nothing — in the table and in the JSON.
func TestListShowsDeclaredParams(t *testing.T) {
	dir := t.TempDir()
	decls := map[string]config.Plugin{}
	for _, tc := range []struct {
		name string
		keys []string // nil: declares nothing
	}{{"keyed", []string{"depth", "draft_max"}}, {"keyless", []string{}}, {"undeclared", nil}} {
		info := sdk.AppendInfo(nil, []sdk.Info{{Name: tc.name, Version: "0.1.0", Roles: []sdk.Role{sdk.RolePolicy},
			Params: tc.keys, ParamsDeclared: tc.keys != nil}})
		mod := wasmtest.Plugin{Minor: sdk.ABIMinor, Info: info, Policy: wasmtest.I64Const(0)}
		path := filepath.Join(dir, tc.name+".wasm")
		if err := os.WriteFile(path, mod.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		decls[tc.name] = config.Plugin{Source: "file:" + path}
	}
	decls["static"] = config.Plugin{Source: "builtin:static"}
	for _, mode := range []struct {
		name string
		opts []Option
	}{{"wasm built-ins", []Option{WithWasmBuiltins()}}, {"native built-ins", nil}} {
		t.Run(mode.name, func(t *testing.T) {
			r, err := NewRegistry(context.Background(), decls, nil, append(mode.opts, WithInstances(1))...)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			checkList(t, r)
		})
	}
}

func checkList(t *testing.T, r *Registry) {
	t.Helper()
	var table strings.Builder
	if err := WriteList(&table, r, false); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for i, line := range strings.Split(strings.TrimSpace(table.String()), "\n") {
		f := strings.Fields(line)
		if i == 0 {
			if f[len(f)-1] != "PARAMS" {
				t.Fatalf("header %q: want a PARAMS column last", line)
			}
			continue
		}
		got[f[0]] = f[len(f)-1]
	}
	for name, want := range map[string]string{"keyed": "depth,draft_max", "keyless": "none", "undeclared": "-",
		"static": "depth,min_conf,keep_cut,draft_max"} {
		if got[name] != want {
			t.Errorf("table: %s params: got %q, want %q\n%s", name, got[name], want, table.String())
		}
	}
	var js strings.Builder
	if err := WriteList(&js, r, true); err != nil {
		t.Fatal(err)
	}
	var rows []ListRow
	if err := json.Unmarshal([]byte(js.String()), &rows); err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		var want *[]string
		switch row.Name {
		case "keyed":
			want = &[]string{"depth", "draft_max"}
		case "keyless":
			want = &[]string{}
		case "static":
			want = &[]string{"depth", "min_conf", "keep_cut", "draft_max"}
		}
		if (row.Params == nil) != (want == nil) || want != nil && strings.Join(*row.Params, ",") != strings.Join(*want, ",") {
			t.Errorf("json: %s params: got %v, want %v", row.Name, row.Params, want)
		}
	}
}

// TestListDeclaredShowsFailures: where some declared plugins do not load, plugin list
// still lists the others, and each failed one with its source and why (before, one
// missing file made plugin list print nothing but that error).
func TestListDeclaredShowsFailures(t *testing.T) {
	decls := map[string]config.Plugin{
		"fast":    {Source: "builtin:static", Params: map[string]any{"depth": int64(2)}},
		"static":  {Params: map[string]any{"dpeth": int64(2)}}, // a built-in that fails
		"missing": {Source: "file:" + filepath.Join(t.TempDir(), "nope.wasm")},
	}
	rows, err := ListDeclared(context.Background(), decls, nil, WithInstances(1))
	if err == nil || !strings.Contains(err.Error(), "2 of 3 declared plugins failed to load") {
		t.Fatalf("got %v, want 2 of 3 failed", err)
	}
	got := map[string]ListRow{}
	for _, r := range rows {
		got[r.Name] = r
	}
	if r := got["fast"]; r.Error != "" || r.Version == "" || strings.Join(r.Roles, ",") != "policy" {
		t.Errorf("fast: got %+v, want it loaded", r)
	}
	for name, want := range map[string]string{"static": `params: unknown key "dpeth"`, "missing": "nope.wasm: no such file"} {
		if r := got[name]; !strings.Contains(r.Error, want) || r.Source == "" || r.Roles == nil {
			t.Errorf("%s: got %+v, want its source and an error containing %q", name, r, want)
		}
	}
	var table strings.Builder
	if err := WriteRows(&table, rows, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "not loaded: params: unknown key \"dpeth\"") || !strings.Contains(table.String(), "fast ") {
		t.Errorf("table:\n%s", table.String())
	}
}

// TestWasmBuiltinsEnv: MINFER_WASM_BUILTINS=1 runs the built-ins in builtin.wasm (they
// list with the module's ABI, not "native"), and an option given to NewRegistry still
// decides over it.
func TestWasmBuiltinsEnv(t *testing.T) {
	decls := map[string]config.Plugin{"static": {Source: "builtin:static"}}
	for _, tc := range []struct {
		name, env string
		opts      []Option
		native    bool
	}{
		{"unset", "", nil, true},
		{"set", "1", nil, false},
		{"set, native asked for", "1", []Option{WithNativeBuiltins()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("MINFER_WASM_BUILTINS", tc.env)
			r, err := NewRegistry(context.Background(), decls, nil, append(tc.opts, WithInstances(1))...)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			info, _ := r.Info("static")
			if got := row("static", info).ABI == "native"; got != tc.native {
				t.Errorf("ABI %q: native %v, want %v", row("static", info).ABI, got, tc.native)
			}
		})
	}
}
