package replay

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/config"
)

// TestJobNamesInlinePolicies: a --policy source that does not load (a missing file, a
// file that is no WebAssembly, an unknown built-in or kind) fails naming the flag and
// its value as the user gave them — before, the error named [plugins.replay-0], a key
// the job made up.
func TestJobNamesInlinePolicies(t *testing.T) {
	notWasm := filepath.Join(t.TempDir(), "policy.wasm")
	if err := os.WriteFile(notWasm, []byte("not a module"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, policy, want string }{
		{"missing file", "file:./nope.wasm", "no such file"},
		{"not wasm", "file:" + notWasm, ""},
		{"unknown builtin", "builtin:nope", `no built-in plugin "nope"`},
		{"unknown kind", "foo:bar", `unknown kind "foo"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &Job{Policies: []string{"static", tc.policy}, Config: config.Default(), Stdout: io.Discard, Stderr: io.Discard}
			err := j.Run(t.Context())
			if err == nil {
				t.Fatal("got no error")
			}
			if msg := err.Error(); !strings.Contains(msg, "--policy "+tc.policy+": ") || !strings.Contains(msg, tc.want) || strings.Contains(msg, "replay-") {
				t.Errorf("got %q, want an error naming --policy %s (and %q), not the job's own key", msg, tc.policy, tc.want)
			}
		})
	}
}
