package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// rootFile is the repository's minfer.toml.
func rootFile(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", FileName)
}

func TestRootFileEqualsDefault(t *testing.T) {
	path := rootFile(t)
	got, err := Load(path)
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	got.Dir = ""
	if want := Default(); !reflect.DeepEqual(got, want) {
		t.Fatalf("minfer.toml differs from Default():\ngot  %+v\nwant %+v", got, want)
	}
}

// TestRootFileHasEveryKey checks that minfer.toml writes out every key of the schema,
// for each declared plugin too.
func TestRootFileHasEveryKey(t *testing.T) {
	data, err := os.ReadFile(rootFile(t))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	md, err := toml.Decode(string(data), &raw)
	if err != nil {
		t.Fatal(err)
	}
	var walk func(t *testing.T, typ reflect.Type, key []string)
	walk = func(t *testing.T, typ reflect.Type, key []string) {
		if !md.IsDefined(key...) && len(key) > 0 {
			t.Errorf("minfer.toml lacks key %q", strings.Join(key, "."))
			return
		}
		switch {
		case typ == typeOfParams || typ.Kind() != reflect.Struct && typ.Kind() != reflect.Map:
		case typ.Kind() == reflect.Map:
			for _, name := range BuiltinNames() {
				walk(t, typ.Elem(), append(key[:len(key):len(key)], name))
			}
		default:
			for _, name := range tagNames(typ) {
				f, _ := fieldByTag(typ, name)
				walk(t, f.Type, append(key[:len(key):len(key)], name))
			}
		}
	}
	walk(t, typeOfConfig, nil)
}

// TestRootFileIsCommented: in minfer.toml every key outside the plugin tables (which
// share one block of documentation) has a comment line right above it.
func TestRootFileIsCommented(t *testing.T) {
	data, err := os.ReadFile(rootFile(t))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	section := ""
	for i, l := range lines {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "["):
			section = l
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(section, "[plugins."):
		case i == 0 || !strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#"):
			t.Errorf("minfer.toml:%d: %s %q has no comment above it", i+1, section, l)
		}
	}
}

func TestEmptyDocumentIsDefault(t *testing.T) {
	got, err := Parse(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := Default(); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate(): %v", err)
	}
}

// wantErr checks that err is a config error whose message contains every part and,
// when line > 0, that it is placed at that line.
func wantErr(t *testing.T, err error, line int, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", parts)
	}
	msg := err.Error()
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("error %q lacks %q", msg, p)
		}
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %q is not a *config.Error", msg)
	}
	if line > 0 && ce.Line != line {
		t.Errorf("error %q: got line %d, want %d", msg, ce.Line, line)
	}
}

func TestUnknownKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		line int
		want []string
	}{
		{"top level", "# c\nbogus = 1\n", 2, []string{"t.toml:2", "bogus: unknown key", "model, draft"}},
		{"unknown section", "[model]\nkv = \"f16\"\n\n[modle]\npath = \"x\"\n", 4, []string{`modle: unknown key; did you mean "model"?`}},
		{"misspelt key", "[sampling]\ntemprature = 0.5\n", 2, []string{`[sampling] temprature: unknown key; did you mean "temperature"?`}},
		{"in section", "[model]\npath = \"a.gguf\"\nctxsize = 4096\n", 3, []string{"[model] ctxsize: unknown key", "path, device, ctx"}},
		{"dotted key", "model.pth = \"a\"\n", 1, []string{"[model] pth: unknown key"}},
		{"case differs", "[model]\nPath = \"a\"\n", 2, []string{`[model] Path: unknown key; did you mean "path"?`}},
		{"in plugin table", "[plugins.mine]\nsource = \"file:x.wasm\"\n\nmemroy_mb = 5\n", 4, []string{"[plugins.mine] memroy_mb: unknown key", "source, params"}},
		{"inline plugin table", "plugins.mine = { source = \"file:x.wasm\", tmeout = \"1s\" }\n", 1, []string{"[plugins.mine] tmeout: unknown key"}},
		{"sub-table of section", "[server.tls]\ncert = \"x\"\n", 1, []string{"[server] tls: unknown key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), "t.toml")
			wantErr(t, err, tc.line, tc.want...)
		})
	}
}

func TestParamsAreFreeForm(t *testing.T) {
	doc := `
[plugins.mine]
source = "process:./bin/mine"
params = { anything = 1, nested = { deep = [1, 2, 3], when = 1979-05-27T07:32:00Z } }

[plugins.adaptive.params]
hysteresis = 0.2
Weird-Key = "yes"
`
	c, err := Parse([]byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	// (plugins' TestParams wants the JSON the plugin gets from them)
	got, err := json.Marshal(c.Plugins["mine"].Params)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"anything":1,"nested":{"deep":[1,2,3],"when":"1979-05-27T07:32:00Z"}}`
	if string(got) != want {
		t.Errorf("params: got %s, want %s", got, want)
	}
	if p := c.Plugins["mine"]; p.Timeout != DefaultProcessTimeout || p.MemoryMB != DefaultMemoryMB || p.Roles != nil {
		t.Errorf("process plugin defaults: got %+v", p)
	}
	// Overriding a built-in's table keeps its source and role.
	if p := c.Plugins["adaptive"]; p.Source != "builtin:adaptive" || p.Timeout != DefaultWasmTimeout || !reflect.DeepEqual(p.Roles, []string{"policy"}) {
		t.Errorf("overridden built-in: got %+v", p)
	}
}

func TestWrongTypes(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		line int
		want []string
	}{
		{"string for int", "[model]\nbatch = \"512\"\n", 2, []string{`[model] batch = "512": wrong type string, want an integer`}},
		{"float for int", "[server]\nparallel = 2.5\n", 2, []string{"[server] parallel = 2.5: wrong type float, want an integer"}},
		{"int for string", "[model]\n\ndevice = 1\n", 3, []string{"[model] device = 1: wrong type integer, want a string"}},
		{"bool for number", "[sampling]\ntemperature = true\n", 2, []string{"[sampling] temperature = true: wrong type boolean, want a number"}},
		{"int for duration", "[server]\nread_timeout = 30\n", 2, []string{"[server] read_timeout = 30: wrong type integer", "duration string"}},
		{"array elements", "[server]\nallow_plugins = [\"greedy\", 3]\n", 2, []string{"[server] allow_plugins: wrong type array, want an array of strings"}},
		{"scalar for section", "model = \"x.gguf\"\n", 1, []string{`model = "x.gguf": wrong type string, want a table`}},
		{"scalar for plugin", "[plugins]\nmine = \"file:x.wasm\"\n", 2, []string{"[plugins] mine", "want a table"}},
		{"bool for depth", "[spec]\ndepth = false\n", 2, []string{`[spec] depth = false: want "auto" or an integer ≥ 0`}},
		{"table for params", "[plugins.mine]\nsource = \"file:x.wasm\"\nparams = 3\n", 3, []string{"[plugins.mine] params = 3: wrong type integer, want a table"}},
		{"bad duration", "[plugins.mine]\nsource = \"file:x.wasm\"\ntimeout = \"fast\"\n", 3, []string{"t.toml:3", "fast"}},
		{"bad depth string", "[spec]\ndepth = \"deep\"\n", 2, []string{`t.toml:2: [spec] depth = "deep": want "auto" or an integer ≥ 0`}},
		{"negative depth", "[spec]\ndepth = -1\n", 2, []string{`[spec] depth = -1: want "auto" or an integer ≥ 0`}},
		{"dotted key below a scalar", "[model]\nkv.bits = 4\n", 2, []string{"[model] kv: wrong type table, want a string"}},
		{"syntax", "[model]\npath = \"unterminated\n", 2, []string{"t.toml:2"}},
		{"duplicate key", "[model]\nctx = 1\nctx = 2\n", 3, []string{"t.toml:3", "ctx"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), "t.toml")
			wantErr(t, err, tc.line, tc.want...)
		})
	}
}

func TestSeveralErrorsAreAllReported(t *testing.T) {
	doc := "[model]\nbogus = 1\nbatch = \"x\"\n[log]\nlevle = \"info\"\n"
	_, err := Parse([]byte(doc), "t.toml")
	if err == nil {
		t.Fatal("got no error")
	}
	for _, want := range []string{"t.toml:2: [model] bogus", "t.toml:3: [model] batch", "t.toml:5: [log] levle"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestManyErrorsAreCapped(t *testing.T) {
	var b strings.Builder
	for i := range 500 {
		fmt.Fprintf(&b, "k%d = %d\n", i, i)
	}
	_, err := Parse([]byte(b.String()), "t.toml")
	if err == nil {
		t.Fatal("got no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxErrors+1 || !strings.Contains(lines[maxErrors], "and 490 more problems") {
		t.Fatalf("got %d lines, last %q; want %d problems and a count of the rest", len(lines), lines[len(lines)-1], maxErrors)
	}
	if _, err := Parse(make([]byte, MaxFileBytes+1), "big.toml"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized file: got %v", err)
	}
}

func TestDepth(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want Depth
	}{
		{`depth = "auto"`, DepthAuto},
		{`depth = 4`, 4},
		{`depth = "4"`, 4},
		{`depth = 0`, 0},
	} {
		t.Run(tc.doc, func(t *testing.T) {
			c, err := Parse([]byte("[spec]\n"+tc.doc+"\n"), "")
			if err != nil {
				t.Fatal(err)
			}
			if c.Spec.Depth != tc.want {
				t.Fatalf("got %v, want %v", c.Spec.Depth, tc.want)
			}
			name := "adaptive"
			if tc.want != DepthAuto {
				name = "static"
			}
			if got := c.Spec.PolicyName(); got != name {
				t.Fatalf("PolicyName: got %q, want %q", got, name)
			}
		})
	}
}

func TestBatchDepth(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want BatchDepth
	}{
		{``, BatchDepthAuto},
		{`batch_depth = "off"`, BatchDepthOff},
		{`batch_depth = 1`, 1},
		{`batch_depth = 2`, 2},
		{`batch_depth = "0"`, 0},
		{`batch_depth = "auto"`, BatchDepthAuto},
	} {
		t.Run(tc.doc, func(t *testing.T) {
			c, err := Parse([]byte("[spec]\n"+tc.doc+"\n"), "")
			if err != nil {
				t.Fatal(err)
			}
			if c.Spec.BatchDepth != tc.want {
				t.Fatalf("got %v, want %v", c.Spec.BatchDepth, tc.want)
			}
		})
	}
}

// TestRoleSettings: the settings each role's plugin is offered (plugins' TestParams
// merges them with the plugin's own table and its declaration).
func TestRoleSettings(t *testing.T) {
	doc := `
[spec]
depth = 3
[sampling]
penalty = "penalty"
temperature = 0.5
repeat_last_n = 32
[plugins.sampling]
params = { top_k = 5, extra = "x" }
`
	c, err := Parse([]byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		want map[string]any
	}{
		{"sampling", map[string]any{"temperature": 0.5, "top_k": 40, "top_p": 0.95, "min_p": 0.05}},
		{"penalty", map[string]any{"repeat_penalty": 1.0, "repeat_last_n": 32, "presence_penalty": 0.0, "frequency_penalty": 0.0}},
		{"static", map[string]any{"draft_max": 16, "min_conf": 0.0, "depth": 3}},
		{"ucb", map[string]any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.RoleSettings(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	// keep_cut is offered only when set, depth only when [spec] forces one
	c, err = Parse([]byte("[spec]\nmin_conf = 0.7\nkeep_cut = true\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.RoleSettings("adaptive")
	if want := map[string]any{"draft_max": 16, "min_conf": 0.7, "keep_cut": true}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("keep_cut: got %v, %v, want %v", got, err, want)
	}
	if _, err := c.RoleSettings("nope"); err == nil {
		t.Fatal("RoleSettings of an undeclared plugin: got no error")
	}
}

func TestFindOrder(t *testing.T) {
	cwd := t.TempDir()
	xdg := t.TempDir()
	t.Chdir(cwd)
	t.Setenv("XDG_CONFIG_HOME", xdg)
	t.Setenv("HOME", t.TempDir())

	if p, ok := Find(); ok {
		t.Fatalf("Find with no files: got %q", p)
	}
	userFile := filepath.Join(xdg, "minfer", FileName)
	if err := os.MkdirAll(filepath.Dir(userFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(userFile, []byte("[log]\nlevel = \"debug\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, ok := Find(); !ok || p != userFile {
		t.Fatalf("Find: got %q %v, want %q", p, ok, userFile)
	}
	if err := os.WriteFile(FileName, []byte("[log]\nlevel = \"warn\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, ok := Find(); !ok || p != FileName {
		t.Fatalf("Find: got %q %v, want ./%s first", p, ok, FileName)
	}
	c, file, err := LoadOrDefault("")
	if err != nil || file != FileName || c.Log.Level != "warn" {
		t.Fatalf("LoadOrDefault: got %q %v %v", file, c, err)
	}
}

func TestResolvePath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, []byte("[model]\npath = \"m/a.gguf\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.ResolvePath(c.Model.Path), filepath.Join(dir, "m", "a.gguf"); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := c.ResolvePath("/abs/x"); got != "/abs/x" {
		t.Errorf("absolute: got %q", got)
	}
	if _, err := Load(filepath.Join(dir, "missing.toml")); err == nil {
		t.Error("Load of a missing file: got no error")
	}
}

func TestDurations(t *testing.T) {
	c, err := Parse([]byte("[server]\nread_timeout = \"1m30s\"\nidle_timeout = \"0s\"\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.ReadTimeout != 90*time.Second || c.Server.IdleTimeout != 0 {
		t.Fatalf("got %v %v", c.Server.ReadTimeout, c.Server.IdleTimeout)
	}
}
