package main

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/minfer/minfer/internal/testpath"
)

// TestPerplexityMatchesLlamaCpp: the embedded stories260K on golden/ppl.txt, tokenized
// by minfer, within 0.5% (ln ppl) of llama-perplexity's running values.
func TestPerplexityMatchesLlamaCpp(t *testing.T) {
	var g struct {
		Variants struct {
			Norepack struct {
				Running []float64 `json:"ppl_running"`
			} `json:"norepack"`
		} `json:"variants"`
	}
	b, err := os.ReadFile(testpath.Path(t, "golden", "perplexity", "stories260K.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runCLI(t, "", "perplexity", "--config", emptyConfig(t), "-f", testpath.Path(t, "golden", "ppl.txt"),
		"--ctx", "128", "-b", "128", "--chunks", "4", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var got struct {
		Running []float64 `json:"ppl_running"`
		NChunks int       `json:"n_chunks"`
		Scored  int       `json:"scored_tokens"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	want := g.Variants.Norepack.Running
	if got.NChunks != 4 || got.Scored != 252 || len(got.Running) != len(want) {
		t.Fatalf("got %+v, want 4 chunks, 252 scored tokens", got)
	}
	for k := range want {
		if rel := math.Abs(math.Log(got.Running[k])/math.Log(want[k]) - 1); rel > 0.005 {
			t.Errorf("chunk %d: got %.4f, want %.4f", k+1, got.Running[k], want[k])
		}
	}
}

func TestPerplexityErrors(t *testing.T) {
	short := t.TempDir() + "/short.txt"
	os.WriteFile(short, []byte("Once upon a time."), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, 2, "no text"},
		{[]string{"-f", short, "--ctx", "2"}, 2, "too small"},
		{[]string{"-f", short}, 1, "needs at least 1024 tokens"},
		{[]string{"-f", "/nonexistent.txt"}, 1, "nonexistent"},
		{[]string{"-f", short, "--cpu-order", "sse"}, 2, `--cpu-order "sse"`},
	} {
		_, _, err := runCLI(t, "", append([]string{"perplexity", "--config", emptyConfig(t)}, tc.args...)...)
		if exitCode(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v (exit %d), want exit %d with %q", tc.args, err, exitCode(err), tc.code, tc.want)
		}
	}
}
