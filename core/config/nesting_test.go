package config

import (
	"strings"
	"testing"
)

// TestNestingBounded: a document that nests arrays or inline tables deeper than
// MaxNesting is refused before the decoder sees it (50,000 nested inline tables took
// the decoder past 2 GiB to a fatal out of memory), naming the line; brackets inside
// strings and comments do not count, and real nesting passes.
func TestNestingBounded(t *testing.T) {
	deep := func(open, close string, n int) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	for _, tc := range []struct {
		name, doc string
		want      string // "" = parses
	}{
		{"inline tables", "[plugins.x]\nsource = \"builtin:static\"\nparams = " + deep("{ a = ", " }", 50000) + "\n", "minfer.toml:3: arrays and inline tables nested deeper than 64 levels"},
		{"arrays", "[server]\n\nallow_plugins = " + deep("[", "]", 100000) + "\n", "minfer.toml:3: arrays and inline tables nested deeper than 64"},
		{"at the bound", "[plugins.x]\nsource = \"builtin:static\"\nparams = { a = " + deep("[", "]", MaxNesting-1) + " }\n", ""},
		{"brackets in strings and comments", "# [[[[ " + strings.Repeat("{", 100) + "\n[plugins.x]\nsource = \"builtin:static\"\n" +
			"params = { a = \"" + strings.Repeat("[", 100) + "\\\"[[\", b = '" + strings.Repeat("{", 100) + "', c = \"\"\"\n" +
			strings.Repeat("[", 100) + "\"\"\", d = '''" + strings.Repeat("{", 100) + "''' }\n", ""},
		{"real params", "[plugins.bias]\nsource = \"builtin:static\"\nparams = { depth = 2, m = { n = [[1, 2], [3]] } }\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), "minfer.toml")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("got %v, want it parsed", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}
