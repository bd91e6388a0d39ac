// Package watdrafter tests lookup.wasm, a drafter plugin written in WebAssembly text
// from sdk/ABI.md alone.
package watdrafter

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minfer/minfer/examples/internal/extest"
	"github.com/minfer/minfer/plugins/check"
)

// TestCurrent: lookup.wasm is what wat2wasm makes of lookup.wat (where wabt is
// installed; the module is committed so that nothing else needs it).
func TestCurrent(t *testing.T) {
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		t.Skip("wat2wasm (wabt) not installed")
	}
	out := filepath.Join(t.TempDir(), "lookup.wasm")
	if b, err := exec.Command("wat2wasm", "lookup.wat", "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm: %v\n%s", err, b)
	}
	got, _ := os.ReadFile(out)
	want, err := os.ReadFile("lookup.wasm")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("lookup.wasm is stale (%v): run wat2wasm lookup.wat -o lookup.wasm", err)
	}
}

// TestPluginCheck: the module passes minfer plugin check.
func TestPluginCheck(t *testing.T) {
	bin, err := os.ReadFile("lookup.wasm")
	if err != nil {
		t.Fatal(err)
	}
	infos, results, err := check.Check(context.Background(), bin, check.CheckOptions{Timeout: 5 * time.Second, CacheDir: "-"})
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Name != "lookup" || len(results) == 0 {
		t.Fatalf("plugins %+v, %d checks", infos, len(results))
	}
	for _, r := range results {
		if r.Err != nil || strings.Contains(r.Note, "warning") {
			t.Errorf("%s %s: %v %s", r.Plugin, r.Name, r.Err, r.Note)
		}
	}
}

// TestGreedyIdentity: as the request's drafter, with no draft model, the module keeps
// plain decoding's greedy output and gets drafts accepted on a prompt the output copies.
func TestGreedyIdentity(t *testing.T) {
	abs, _ := filepath.Abs("lookup.wasm")
	const toml = `
[sampling]
temperature = 0
[spec]
drafter = %q
depth = 4
[plugins.lookup]
source = "file:%s"
`
	story := "Once upon a time, there was a little girl named Lily. She liked to play in the park."
	prompt := strings.Repeat(story+" ", 3)
	plain := extest.Generate(t, extest.Config(t, fmt.Sprintf(toml, "", abs)), extest.Options{Prompt: prompt, Tokens: 40})
	got := extest.Generate(t, extest.Config(t, fmt.Sprintf(toml, "lookup", abs)), extest.Options{Prompt: prompt, Tokens: 40})
	if !slices.Equal(got.Tokens, plain.Tokens) {
		t.Fatalf("lookup: got %v, want plain decoding's %v", got.Tokens, plain.Tokens)
	}
	if st := got.Spec.ByDrafter["lookup"]; st.Rounds == 0 || st.Accepted == 0 {
		t.Fatalf("lookup drafted %+v; want rounds with accepted tokens", st)
	}
}
