package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/minfer/minfer/internal/testpath"
)

// The synthesis itself is tested in internal/synth; these test the command line.

// TestSynthThenInspect writes each synthetic family at each type (half of them with
// --fast) through the command line and runs inspect on the result.
func TestSynthThenInspect(t *testing.T) {
	families := map[string][]string{
		"llama": {"--arch", "llama", "--n-embd", "256", "--n-layer", "2", "--n-head", "8", "--n-head-kv", "4", "--n-ff", "768"},
		"qwen2": {"--arch", "qwen2", "--n-embd", "256", "--n-layer", "2", "--n-head", "8", "--n-head-kv", "2", "--n-ff", "704", "--tied"},
		"qwen3": {"--arch", "qwen3", "--n-embd", "256", "--n-layer", "2", "--n-head", "8", "--n-head-kv", "4", "--head-dim", "64", "--n-ff", "704", "--tied"},
	}
	for fam, shape := range families {
		for i, typ := range []string{"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", "q4_k_m"} {
			name := fam + "-" + typ
			args := append(append([]string{"synth"}, shape...), "--type", typ, "--n-vocab", "512", "--seed", "5")
			if i%2 == 1 {
				name += "-fast"
				args = append(args, "--fast")
			}
			t.Run(name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "m.gguf")
				_, stderr, err := runCLI(t, "", append(args, "-o", path)...)
				if err != nil {
					t.Fatalf("synth: %v\n%s", err, stderr)
				}
				// not a terminal: a start line and a summary, no redrawn progress
				if !strings.Contains(stderr, "; writing ") || !strings.Contains(stderr, "synth: wrote ") || strings.Contains(stderr, "\r") {
					t.Errorf("stderr %q: want a start line, a summary and no \\r", stderr)
				}
				out, _, err := runCLI(t, "", "inspect", path)
				if err != nil {
					t.Fatalf("inspect: %v", err)
				}
				if !strings.Contains(out, "synth-"+fam) {
					t.Errorf("inspect output does not name the model synth-%s:\n%s", fam, out)
				}
			})
		}
	}
}

func TestSynthErrors(t *testing.T) {
	small := []string{"--arch", "llama", "--n-embd", "64", "--n-layer", "1", "--n-head", "4", "--n-ff", "128", "--n-vocab", "300"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no output", []string{"--preset", "qwen2.5-0.5b", "--type", "f16"}, "-o OUT.gguf is required"},
		{"no type", append(small, "-o", "x.gguf"), "--type is required"},
		{"bad type", append(small, "--type", "q3_k", "-o", "x.gguf"), `unknown --type "q3_k"`},
		{"bad preset", []string{"--preset", "gpt-5", "--type", "f16", "-o", "x.gguf"}, `unknown preset "gpt-5"`},
		{"arch contradicts preset", []string{"--preset", "qwen3-0.6b", "--arch", "llama", "--type", "f16", "-o", "x.gguf"}, "contradicts preset"},
		{"no arch", []string{"--n-embd", "64", "--type", "f16", "-o", "x.gguf"}, "--arch"},
		{"bad arch", []string{"--arch", "gpt2", "--type", "f16", "-o", "x.gguf"}, `unknown --arch "gpt2"`},
		{"missing shape", []string{"--arch", "llama", "--n-embd", "64", "--type", "f16", "-o", "x.gguf"}, "--n-layer must be > 0"},
		{"gqa mismatch", append(small, "--n-head-kv", "3", "--type", "f16", "-o", "x.gguf"), "not a multiple of --n-head-kv 3"},
		{"no vocab size", []string{"--arch", "llama", "--n-embd", "64", "--n-layer", "1", "--n-head", "4", "--n-ff", "128", "--type", "f16", "-o", "x.gguf"}, "--n-vocab must be > 0"},
		{"extra argument", append(small, "--type", "f16", "-o", "x.gguf", "extra"), `unexpected argument "extra"`},
		{"bad init", append(small, "--type", "f16", "--init", "xavier", "-o", "x.gguf"), `unknown --init "xavier"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runCLI(t, "", append([]string{"synth"}, tt.args...)...)
			if exitCode(err) != 2 || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v (exit %d), want a usage error containing %q", err, exitCode(err), tt.want)
			}
		})
	}
	dir := t.TempDir()
	for _, tt := range []struct {
		name  string
		extra []string
		want  string
	}{
		{"vocab too small", []string{"--n-vocab", "100"}, "too small for the generated vocabulary"},
		{"missing vocab", []string{"--vocab", filepath.Join(dir, "nope.json")}, "no such file"},
		{"explicit n-vocab below vocab", []string{"--vocab", testpath.Path(t, "tokenizer", "ggml-vocab-gpt-2.gguf"), "--n-vocab", "1000"}, "has 50257 tokens, more than --n-vocab 1000"},
		{"unwritable output", []string{"-o", filepath.Join(dir, "no", "such", "dir.gguf")}, "no such file"},
		{"no room for codes", []string{"--n-embd", "8"}, "use --init gaussian"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{"synth"}, small...), "--type", "f16", "-o", filepath.Join(dir, "x.gguf"))
			_, _, err := runCLI(t, "", append(args, tt.extra...)...)
			if exitCode(err) != 1 || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v (exit %d), want a runtime error containing %q", err, exitCode(err), tt.want)
			}
		})
	}
}

func TestSynthDryRun(t *testing.T) {
	out, _, err := runCLI(t, "", "synth", "--preset", "qwen2.5-7b", "--type", "q4_k_m", "--dry-run")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"qwen2 Qwen2.5-7B-synth: n_embd 3584, 28 layers, 28/4 heads of 128, n_ff 18944, n_vocab 152064",
		"  output.weight ", "Q6_K   3584 x 152064",
		"339 tensors, 7.62 B params, 4.36 GiB of tensor data",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q", want)
		}
	}
}
