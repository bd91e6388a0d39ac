package plugins

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minfer/minfer/plugins/builtin"
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
	for _, want := range []string{"policy golden trace shifting.jsonl", "sampler greedy identity", "penalty edge-case rows", "policy edge-case outcomes"} {
		if !seen[want] {
			t.Errorf("no %q check ran", want)
		}
	}
}

var (
	guestsMu sync.Mutex
	guests   = map[string][]byte{}
)

// buildGuest compiles a Go guest of testdata to WebAssembly (once per test binary).
func buildGuest(t *testing.T, dir string) []byte {
	t.Helper()
	guestsMu.Lock()
	defer guestsMu.Unlock()
	if bin, ok := guests[dir]; ok {
		return bin
	}
	out := filepath.Join(t.TempDir(), "g.wasm")
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-trimpath", "-o", out, "./"+filepath.ToSlash(dir))
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", dir, err, b)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	guests[dir] = bin
	return bin
}

// A sampler that ignores the draft fails the greedy identity check, and only it.
func TestCheckCatchesWrongSampler(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a WebAssembly module")
	}
	bin := buildGuest(t, "testdata/badguest")
	var log strings.Builder
	_, results, err := Check(context.Background(), bin, CheckOptions{Plugin: "lazy", Timeout: 5 * time.Second, Log: &syncWriter{w: &log}})
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

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}
