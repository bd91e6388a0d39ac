package config

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/minfer/minfer/sdk"
)

func TestUsePlugin(t *testing.T) {
	wd, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		role     sdk.Role
		arg      string
		wantName string // the name the role then uses
		wantSrc  string // its source
		wantErr  string
	}{
		{"declared name", sdk.RolePolicy, "ucb", "ucb", "builtin:ucb", ""},
		{"builtin source", sdk.RoleSampler, "builtin:greedy", "greedy", "builtin:greedy", ""},
		{"wasm file", sdk.RolePolicy, "file:plugins/my.policy.wasm", "my-policy", "file:" + filepath.Join(wd, "plugins/my.policy.wasm"), ""},
		{"process", sdk.RolePenalty, "process:./bin/rep", "rep", "process:" + filepath.Join(wd, "bin/rep"), ""},
		{"taken name", sdk.RoleSampler, "file:/x/greedy.wasm", "greedy-2", "file:/x/greedy.wasm", ""},
		{"no penalty", sdk.RolePenalty, "none", "", "", ""},
		{"unknown name", sdk.RolePolicy, "wizard", "", "", `--policy "wizard": no plugin "wizard" declared`},
		{"wrong role", sdk.RoleSampler, "adaptive", "", "", `plugin "adaptive" is not a sampler plugin`},
		{"unknown builtin", sdk.RolePolicy, "builtin:oracle", "", "", `--policy builtin:oracle: no built-in plugin "oracle"`},
		{"bad kind", sdk.RolePolicy, "http://x", "", "", `--policy http://x: source "http://x": unknown kind "http"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			c.Sampling.Penalty = "penalty"
			err := c.UsePlugin(tc.role, tc.arg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[sdk.Role]string{sdk.RolePolicy: c.Spec.Policy, sdk.RoleSampler: c.Sampling.Sampler, sdk.RolePenalty: c.Sampling.Penalty}[tc.role]
			if got != tc.wantName {
				t.Fatalf("name: got %q, want %q", got, tc.wantName)
			}
			if tc.wantName != "" {
				if src := c.Plugins[got].Source; src != tc.wantSrc {
					t.Fatalf("source: got %q, want %q", src, tc.wantSrc)
				}
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate after UsePlugin: %v", err)
			}
		})
	}
}

// TestPluginWhere: a plugin that a flag declared is named in errors by that flag and
// its value as the user wrote them, never by a [plugins.NAME] table (a name derived
// from the file) that the user never wrote; a table's plugin by its table.
func TestPluginWhere(t *testing.T) {
	c := Default()
	c.Plugins["mine"] = Plugin{Source: "file:/x/mine.wasm"}
	if err := c.UsePlugin(sdk.RolePolicy, "file:./pol.wasm"); err != nil {
		t.Fatal(err)
	}
	if err := c.UseDrafters("ngram,process:./bin/dr"); err != nil {
		t.Fatal(err)
	}
	if err := c.UsePluginFlag("--policies", sdk.RolePolicy, "file:./other.wasm"); err != nil {
		t.Fatal(err)
	}
	if err := c.UsePluginFlag("--policies", sdk.RolePolicy, "nosuch"); err == nil || !strings.HasPrefix(err.Error(), `--policies "nosuch": no plugin`) {
		t.Errorf("UsePluginFlag of an unknown name: got %v, want an error naming --policies", err)
	}
	for _, tc := range []struct{ name, want string }{
		{"pol", "--policy file:./pol.wasm"},
		{"dr", "--drafter process:./bin/dr"},
		{"other", "--policies file:./other.wasm"},
		{"mine", "[plugins.mine]"},
		{"ngram", "[plugins.ngram]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := c.Plugins[tc.name]
			if !ok {
				t.Fatalf("no plugin %q declared (have %v)", tc.name, c.pluginNames())
			}
			if got := p.Where(tc.name); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCheckRequestPlugin(t *testing.T) {
	c, err := Parse([]byte("[server]\nallow_plugins = [\"greedy\", \"sampling\", \"ucb\", \"mine\"]\n[plugins.mine]\nsource = \"process:./x\"\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		role    sdk.Role
		name    string
		wantErr string
	}{
		{sdk.RoleSampler, "greedy", ""},
		{sdk.RolePolicy, "ucb", ""},
		{sdk.RolePolicy, "mine", ""}, // roles unknown until loaded
		{sdk.RoleSampler, "nucleus", `unknown plugin "nucleus"`},
		{sdk.RolePolicy, "adaptive", `plugin "adaptive" is not allowed per request`},
		{sdk.RolePolicy, "greedy", `plugin "greedy" is not a policy plugin`},
	} {
		t.Run(string(tc.role)+"/"+tc.name, func(t *testing.T) {
			err := c.CheckRequestPlugin(tc.role, tc.name)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
