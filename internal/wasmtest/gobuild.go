package wasmtest

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	guestsMu sync.Mutex
	guests   = map[string][]byte{}
)

// BuildGo compiles the Go guest in dir (relative to the test's package, e.g.
// "../testdata/badguest") to WebAssembly with GOOS=wasip1 -buildmode=c-shared, once per
// test binary, and returns the module's bytes.
func BuildGo(t testing.TB, dir string) []byte {
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

// SyncWriter serialises writes to W: guest output of several instances arrives
// concurrently.
type SyncWriter struct {
	mu sync.Mutex
	W  io.Writer
}

func (s *SyncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.W.Write(b)
}
