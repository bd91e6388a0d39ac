package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// runCLI runs minfer with args and returns stdout, stderr and the error.
func runCLI(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	m := &Main{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb}
	err := m.Run(context.Background(), args)
	return out.String(), errb.String(), err
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"no command", nil, 2},
		{"unknown command", []string{"frobnicate"}, 2},
		{"help", []string{"--help"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCLI(t, "", tc.args...)
			if got := exitCode(err); got != tc.code {
				t.Fatalf("exit code: got %d, want %d (err %v)", got, tc.code, err)
			}
		})
	}
}

func TestEveryCommandHasHelp(t *testing.T) {
	for name := range commands {
		t.Run(name, func(t *testing.T) {
			_, stderr, err := runCLI(t, "", name, "--help")
			if err != nil {
				t.Fatalf("%s --help: %v", name, err)
			}
			if !strings.Contains(stderr, "Example") {
				t.Fatalf("%s --help shows no examples:\n%s", name, stderr)
			}
		})
	}
}
