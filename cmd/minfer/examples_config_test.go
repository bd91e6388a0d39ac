package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExampleConfigs: every minfer.toml variant in examples/configs passes `config check`
// and drives a real run (the server variant is checked, then its model runs through
// `run` with the same file).
func TestExampleConfigs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "configs", "*.toml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("examples/configs: got %d files (%v), want ≥ 3", len(files), err)
	}
	t.Setenv("MINFER_API_KEY", "secret")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			out, stderr, err := runCLI(t, "", "config", "check", f)
			if err != nil || !strings.Contains(out, "ok") {
				t.Fatalf("config check: %v\n%s%s", err, out, stderr)
			}
			if strings.Contains(stderr, "does not exist") {
				t.Fatalf("config check warns about a missing file:\n%s", stderr)
			}
			out, stderr, err = runCLI(t, "", "run", "--config", f, "-p", "Once upon a time", "-n", "8", "--json", "--ctx", "256")
			if err != nil {
				t.Fatalf("run: %v\n%s", err, stderr)
			}
			if !strings.Contains(out, `"tokens"`) {
				t.Fatalf("run --json: got %s", out)
			}
			if strings.Contains(f, "speculative") && !strings.Contains(out, `"policy":"adaptive"`) {
				t.Fatalf("the speculative config ran without its draft and policy: %s", out)
			}
			if strings.Contains(f, "drafter") && !strings.Contains(out, `"policy":"adaptive"`) {
				t.Fatalf("the drafter config ran without its drafters and policy: %s", out)
			}
		})
	}
}

func TestExampleConfigsAreDocumented(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "examples", "configs", "*.toml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), "#") || !strings.Contains(string(b), "minfer ") {
			t.Errorf("%s: want a leading comment with the command that uses it", f)
		}
	}
}
