package scaffold

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/minfer/minfer/sdk"
)

// TestModulePath: a --module that go would refuse in the go.mod is refused before
// anything is written, naming it; real module paths pass.
func TestModulePath(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"example.com/mypolicy", true},
		{"github.com/me/my-policy.v2", true},
		{"mypolicy", true},
		{"gitlab.example.com/a_b/c~d", true},
		{"not a module!", false},
		{"example.com//x", false},
		{"/abs", false},
		{"trailing/", false},
		{"example.com/.hidden", false},
		{"example.com/dot.", false},
		{"example.com/ünicode", false},
	} {
		t.Run(tc.path, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "p")
			_, err := Scaffold(ScaffoldOptions{Role: sdk.RolePolicy, Dir: dir, Module: tc.path, MinferDir: "../.."})
			if tc.ok && err != nil {
				t.Fatalf("got %v, want it written", err)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), `--module "`+tc.path+`": want a Go module path`)) {
				t.Fatalf("got %v, want the module path refused by name", err)
			}
		})
	}
}
