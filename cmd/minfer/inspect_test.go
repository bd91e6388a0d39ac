package main

import (
	"strings"
	"testing"

	"github.com/minfer/minfer/internal/testpath"
)

func TestInspectErrors(t *testing.T) {
	p := testpath.Path(t, "models", "synthetic", "synth-llama-q4_0.gguf")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no model", []string{"inspect"}, 2, "want one MODEL.gguf"},
		{"two models", []string{"inspect", p, p}, 2, "want one MODEL.gguf"},
		{"dequant without tensor", []string{"inspect", p, "--dequant"}, 2, "--dequant needs --tensor"},
		{"unknown flag", []string{"inspect", p, "--bogus"}, 2, "bogus"},
		{"missing file", []string{"inspect", "/nonexistent/x.gguf"}, 1, "no such file"},
		{"not gguf", []string{"inspect", testpath.Path(t, "models", "README.md")}, 1, "bad magic"},
		{"no such tensor", []string{"inspect", p, "--tensor", "nope"}, 1, `no tensor "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runCLI(t, "", tt.args...)
			if got := exitCode(err); got != tt.code {
				t.Fatalf("exit code %d (err %v), want %d", got, err, tt.code)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}
