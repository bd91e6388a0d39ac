package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/minfer/minfer/internal/testpath"
	"github.com/minfer/minfer/sdk"
)

// TestRunTrace: --trace records one line per speculative round (the last round
// included), and policy replay reads the file back.
func TestRunTrace(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.jsonl")
	target := testpath.Path(t, "models", "trained", "target-q8_0.gguf")
	draft := testpath.Path(t, "models", "trained", "draft-q8_0.gguf")
	out, stderr, err := runCLI(t, "", "run", "-m", target, "--draft", draft, "--depth", "auto",
		"-p", "The old man walked", "-n", "24", "--temp", "0", "--json", "--trace", trace)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	var res struct {
		Spec struct {
			Rounds  int    `json:"rounds"`
			Policy  string `json:"policy"`
			Drafted int    `json:"drafted"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("run --json: %v\n%s", err, out)
	}
	f, err := os.Open(trace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rounds, drafted int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r sdk.TraceRound
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("trace line %d: %v", rounds, err)
		}
		if r.Policy != "adaptive" || r.Round != rounds {
			t.Fatalf("trace line %d: got policy %q round %d", rounds, r.Policy, r.Round)
		}
		rounds++
		drafted += r.Drafted
	}
	if rounds != res.Spec.Rounds || drafted != res.Spec.Drafted {
		t.Fatalf("trace: got %d rounds / %d drafted, want %d / %d (run --json)", rounds, drafted, res.Spec.Rounds, res.Spec.Drafted)
	}
	if _, stderr, err := runCLI(t, "", "policy", "replay", trace, "--policy", "static"); err != nil {
		t.Fatalf("policy replay: %v\n%s", err, stderr)
	}
}
