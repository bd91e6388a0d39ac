package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(good, []byte("[draft]\npath = \"d.gguf\"\n[spec]\ndepth = 4\nbatch_depth = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("[model]\nkv = \"q4\"\n\n[server]\nparalel = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // in stdout on success, in the error otherwise
	}{
		{"repository file", []string{"config", "check", "../../minfer.toml"}, 0, []string{"ok: ../../minfer.toml", "policy", "sampler sampling"}},
		{"good", []string{"config", "check", good}, 0, []string{"ok: " + good, "spec:     policy static, depth 4, draft_max 16, batch_depth 1", filepath.Join(dir, "d.gguf")}},
		{"bad", []string{"config", "check", bad}, 1, []string{bad + ":5: [server] paralel: unknown key"}},
		{"missing file", []string{"config", "check", filepath.Join(dir, "none.toml")}, 1, []string{"none.toml"}},
		{"no subcommand", []string{"config"}, 2, []string{"missing subcommand"}},
		{"unknown subcommand", []string{"config", "print"}, 2, []string{`unknown subcommand "print"`}},
		{"two files", []string{"config", "check", good, bad}, 2, []string{"at most one FILE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, _, err := runCLI(t, "", tc.args...)
			if got := exitCode(err); got != tc.code {
				t.Fatalf("exit code: got %d, want %d (err %v)", got, tc.code, err)
			}
			text := stdout
			if err != nil {
				text = err.Error()
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("output %q lacks %q", text, w)
				}
			}
		})
	}
}

func TestConfigCheckFindsFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))
	stdout, _, err := runCLI(t, "", "config", "check")
	if err != nil || !strings.Contains(stdout, "built-in defaults") {
		t.Fatalf("no file: got %q, %v", stdout, err)
	}
	if err := os.WriteFile("minfer.toml", []byte("[log]\nlevel = \"debug\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, err = runCLI(t, "", "config", "check")
	if err != nil || !strings.Contains(stdout, "ok: minfer.toml") {
		t.Fatalf("./minfer.toml: got %q, %v", stdout, err)
	}
}
