// Package testpath locates ../shared/testdata (the read-only test data every developer
// and CI has beside the repository) for tests in any package.
package testpath

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Dir returns the absolute path of shared/testdata. Tests fail (not skip) when it is
// absent: CI always has it.
func Dir(t testing.TB) string {
	t.Helper()
	d, err := dir()
	if err != nil {
		t.Fatalf("shared testdata: %v", err)
	}
	return d
}

// Path joins elements under shared/testdata.
func Path(t testing.TB, elem ...string) string {
	t.Helper()
	return filepath.Join(append([]string{Dir(t)}, elem...)...)
}

func dir() (string, error) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..") // repository root
	d := filepath.Join(root, "..", "shared", "testdata")
	if _, err := os.Stat(d); err != nil {
		return "", err
	}
	// Resolve links so that filepath.Walk over the returned root descends into it.
	if r, err := filepath.EvalSymlinks(d); err == nil {
		d = r
	}
	return filepath.Abs(d)
}
