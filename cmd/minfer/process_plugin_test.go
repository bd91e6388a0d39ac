package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProcessPluginRolesThroughConfig: a go-plugin process plugin declared in
// minfer.toml is used for each role the config gives it — the penalty changes the
// greedy output, the sampler (a greedy one) reproduces it, and a sampler or policy
// that fails on purpose fails the run with an error naming the plugin.
func TestProcessPluginRolesThroughConfig(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "testplugin")
	build := exec.Command("go", "build", "-o", bin, "./plugins/process/testdata/testplugin")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test plugin: %v\n%s", err, out)
	}
	conf := func(name, body string) string {
		p := filepath.Join(dir, name+".toml")
		text := fmt.Sprintf("[sampling]\ntemperature = 0\n%s\n[plugins.proc]\nsource = \"process:%s\"\n", body, bin)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run := func(cfg string, extra ...string) (string, error) {
		args := append([]string{"run", "--config", cfg, "-p", "Once upon a time", "-n", "24"}, extra...)
		out, stderr, err := runCLI(t, "", args...)
		if err != nil {
			return stderr, err
		}
		return out, nil
	}
	plain, err := run(conf("plain", ""))
	if err != nil {
		t.Fatalf("plain greedy: %v\n%s", err, plain)
	}
	t.Run("penalty", func(t *testing.T) {
		got, err := run(conf("pen", "penalty = \"proc\"\nrepeat_last_n = 64\n") + "")
		if err != nil {
			t.Fatalf("run: %v\n%s", err, got)
		}
		if got == plain {
			t.Fatalf("the process penalty did not change the greedy output %q", got)
		}
	})
	t.Run("sampler", func(t *testing.T) {
		got, err := run(conf("samp", "sampler = \"proc\"\n"))
		if err != nil {
			t.Fatalf("run: %v\n%s", err, got)
		}
		if got != plain {
			t.Fatalf("the process greedy sampler: got %q, want (builtin greedy) %q", got, plain)
		}
	})
	t.Run("failing sampler", func(t *testing.T) {
		p := conf("fail", "sampler = \"proc\"\n")
		b, _ := os.ReadFile(p)
		os.WriteFile(p, append(b, []byte("params = { mode = \"fail\" }\n")...), 0o644)
		msg, err := run(p)
		if err == nil || !strings.Contains(err.Error(), `"proc"`) || !strings.Contains(err.Error(), "failing on purpose") {
			t.Fatalf("want an error naming plugin proc, got %v\n%s", err, msg)
		}
	})
}
