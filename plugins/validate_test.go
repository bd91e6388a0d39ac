package plugins

import (
	"strings"
	"testing"

	"github.com/minfer/minfer/core/config"
)

// TestCheckBuiltins: config check refuses what a run would refuse of a built-in — a
// params key it does not read, a value or a type it refuses, also through the settings
// of its role — naming the [plugins.NAME] table, and leaves file: and process: plugins
// (which it does not load) and good configs alone.
func TestCheckBuiltins(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string // "" = no error
	}{
		{"defaults", "", nil},
		{"good params", "[plugins.fast]\nsource = \"builtin:static\"\nparams = { depth = 2 }\n[spec]\npolicy = \"fast\"\n", nil},
		{"unknown key", "[plugins.static]\nparams = { dpeth = 2 }\n", []string{`[plugins.static]: params: unknown key "dpeth"`, "reads depth, min_conf"}},
		{"value out of range", "[plugins.fast]\nsource = \"builtin:static\"\nparams = { depth = -3 }\n", []string{"[plugins.fast]: static: params: depth = -3"}},
		{"wrong type", "[plugins.ucb]\nparams = { explore = \"lots\" }\n", []string{"[plugins.ucb]: ucb: params:", "explore"}},
		{"drafter value", "[plugins.ngram]\nparams = { n_min = 5, n_max = 2 }\n", []string{"[plugins.ngram]: ngram: params:"}},
		{"two plugins", "[plugins.ucb]\nparams = { nope = 1 }\n[plugins.suffix]\nparams = { depth = 1 }\n",
			[]string{`[plugins.suffix]: suffix: params: depth`, `[plugins.ucb]: params: unknown key "nope"`}},
		{"file and process plugins are not loaded", "[plugins.x]\nsource = \"file:./nope.wasm\"\nparams = { anything = 1 }\n" +
			"[plugins.y]\nsource = \"process:./nope\"\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tc.doc), "minfer.toml")
			if err != nil {
				t.Fatal(err)
			}
			err = CheckBuiltins(cfg)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("got no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to contain %q", err, w)
				}
			}
		})
	}
}
