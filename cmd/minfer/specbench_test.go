package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minfer/minfer/internal/specbench"
	"github.com/minfer/minfer/internal/testpath"
)

func TestSpecbenchDraftIsTarget(t *testing.T) {
	model := testpath.Path(t, "models", "stories260K.gguf")
	out, stderr, err := runCLI(t, "", "specbench", "--config", emptyConfig(t), "-m", model, "--draft", model,
		"--depths", "3,0,auto", "-n", "12", "-r", "2", "--warmup", "0", "-t", "1", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var got specbench.Result
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	if len(got.Depths) != 3 || len(got.VerifyMs) != 16 || !(got.DraftStepMs > 0) || !(got.DraftChainStepMs > 0) || got.Prompts != len(specbench.DefaultPrompts) {
		t.Fatalf("got %+v", got)
	}
	d0, d3 := got.Depths[0], got.Depths[1] // depth 0 is moved first
	if d0.Depth != "0" || d0.TokensPerRound != 1 || d0.Speedup != 1 || !(d0.TPSMean > 0) {
		t.Fatalf("depth 0: got %+v", d0)
	}
	// draft = target: every draft accepted; 12 tokens in rounds of 4 (3 drafts + 1)
	for _, d := range got.Depths {
		if !d.Identical {
			t.Fatalf("depth %s: output differs from depth 0", d.Depth)
		}
	}
	if d3.Acceptance != 1 || d3.TokensPerRound != 4 {
		t.Fatalf("depth 3: got acceptance %v, tokens/round %v; want 1 and 4", d3.Acceptance, d3.TokensPerRound)
	}
	// where a round's time went: depth 0 drafts nothing (its draft phase returns at
	// once); depth 3 drafts three tokens a round and verifies four rows; every round
	// calls the sampler
	if !(d0.PerRound.Draft < 0.01*d0.PerRound.Verify) || !(d0.PerRound.Verify > 0) || !(d0.PerRound.Plugins > 0) {
		t.Errorf("depth 0 per round: %+v", d0.PerRound)
	}
	if !(d3.PerRound.Draft > 0.1*d3.PerRound.Verify) || !(d3.PerRound.Verify > 0) || !(d3.PerRound.Plugins > 0) {
		t.Errorf("depth 3 per round: %+v", d3.PerRound)
	}
	text, stderr, err := runCLI(t, "", "specbench", "--config", emptyConfig(t), "-m", model, "--draft", model,
		"--depths", "0,2", "-n", "6", "-r", "1", "--warmup", "0", "-t", "1", "--curve=false")
	if err != nil || !strings.Contains(text, "draft ms/round | verify ms/round | plugins µs/round") {
		t.Errorf("text output: %v\n%s%s", err, text, stderr)
	}
}

// TestSpecbenchPolicies: --policies adds a row per depth policy, declared in the
// config (with its params) or given as a source, each at depth auto and interleaved
// with the depths.
func TestSpecbenchPolicies(t *testing.T) {
	model := testpath.Path(t, "models", "stories260K.gguf")
	cfg := filepath.Join(t.TempDir(), "minfer.toml")
	if err := os.WriteFile(cfg, []byte("[plugins.two]\nsource = \"builtin:static\"\nparams = { depth = 2 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runCLI(t, "", "specbench", "--config", cfg, "-m", model, "--draft", model,
		"--depths", "auto,0", "--policies", "two, builtin:ucb", "-n", "12", "-r", "1", "--warmup", "0", "-t", "1",
		"--curve=false", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var got specbench.Result
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	var labels []string
	for _, d := range got.Depths {
		labels = append(labels, d.Depth)
		if !d.Identical || !(d.TPSMean > 0) {
			t.Errorf("%s: identical %v, tokens/s %v", d.Depth, d.Identical, d.TPSMean)
		}
	}
	if want := []string{"0", "auto", "auto:two", "auto:builtin:ucb"}; !slices.Equal(labels, want) {
		t.Fatalf("rows %q, want %q", labels, want)
	}
	// draft = target: the static policy's depth 2 from its params gives rounds of 3
	if two := got.Depths[2]; two.Acceptance != 1 || two.TokensPerRound != 3 {
		t.Errorf("auto:two: acceptance %v, tokens/round %v; want 1 and 3 (params depth = 2)", two.Acceptance, two.TokensPerRound)
	}
}

func TestSpecbenchErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "no draft"},
		{[]string{"--draft", "x.gguf", "--depths", "1,deep"}, "--depths"},
		{[]string{"--draft", "x.gguf", "-n", "0"}, "specbench: -n 0: want ≥ 1"},
		{[]string{"--draft", "x.gguf", "--curve-rows", "-2"}, "specbench: --curve-rows -2: want ≥ 1"},
		{[]string{"--draft", "x.gguf", "--policies", "nosuch"}, `specbench: --policies "nosuch": no plugin "nosuch" declared`},
		{[]string{"--draft", "x.gguf", "--policies", "penalty"}, `--policies "penalty": plugin "penalty" is not a policy plugin`},
		{[]string{"--draft", "x.gguf", "--policies", "adaptive,"}, "an empty name"},
		{[]string{"--drafters", "model"}, "--drafters model: no draft model"},
		{[]string{"--drafters", "greedy"}, `specbench: --drafters "greedy": plugin "greedy" is not a drafter plugin`},
		{[]string{"--drafters", "ngram,,auto"}, "an empty name"},
	} {
		_, _, err := runCLI(t, "", append([]string{"specbench", "--config", emptyConfig(t)}, tc.args...)...)
		if exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want a usage error with %q", tc.args, err, tc.want)
		}
	}
}

// TestSpecbenchDrafters: without a draft model, --drafter gives the depth rows a
// drafter plugin, and --drafters adds a row per drafter plugin and one for all of them
// (the policy choosing); every row keeps the greedy identity, and with a draft model
// the drafter:model row drafts with it alone.
func TestSpecbenchDrafters(t *testing.T) {
	model := testpath.Path(t, "models", "stories260K.gguf")
	run := func(args ...string) specbench.Result {
		t.Helper()
		all := append([]string{"specbench", "--config", emptyConfig(t), "-m", model, "-n", "12", "-r", "1", "--warmup", "0", "-t", "1", "--curve=false", "--json"}, args...)
		out, stderr, err := runCLI(t, "", all...)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		var got specbench.Result
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v in %q", err, out)
		}
		return got
	}
	got := run("--drafter", "ngram", "--depths", "0,4", "--drafters", "suffix,auto")
	var labels []string
	for _, d := range got.Depths {
		labels = append(labels, d.Depth)
		if !d.Identical {
			t.Errorf("%s: output differs from depth 0", d.Depth)
		}
	}
	if want := []string{"0", "4", "drafter:suffix", "drafter:auto"}; !slices.Equal(labels, want) || got.Drafter != "ngram" {
		t.Fatalf("rows %v, drafter %q; want %v with ngram", labels, got.Drafter, want)
	}
	if by := got.Depths[2].RoundsByDrafter; by["ngram"] != 0 || by["suffix"] == 0 {
		t.Errorf("drafter:suffix drafted with %v, want suffix alone", by)
	}
	if by := got.Depths[1].RoundsByDrafter; by["ngram"] == 0 || by["suffix"] != 0 {
		t.Errorf("depth 4 drafted with %v, want the configured ngram", by)
	}
	got = run("--draft", model, "--depths", "0", "--drafters", "model,ngram")
	if by := got.Depths[1].RoundsByDrafter; got.Depths[1].Depth != "drafter:model" || by["model"] == 0 || len(by) != 1 {
		t.Errorf("drafter:model: %s drafted with %v, want the model alone", got.Depths[1].Depth, by)
	}
	if by := got.Depths[2].RoundsByDrafter; by["model"] != 0 || by["ngram"] == 0 {
		t.Errorf("drafter:ngram drafted with %v, want ngram alone", by)
	}
}

// TestSpecbenchCopyPrompts: --copy-prompts draws windows that end with their own start
// again, beside the --prompts ones; drafter plugins get tokens accepted on them.
func TestSpecbenchCopyPrompts(t *testing.T) {
	model := testpath.Path(t, "models", "stories260K.gguf")
	text := filepath.Join(t.TempDir(), "story.txt")
	story := strings.Repeat("Once upon a time, there was a little girl named Lily. She liked to play in the park with her dog Max. ", 4)
	if err := os.WriteFile(text, []byte(story), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runCLI(t, "", "specbench", "--config", emptyConfig(t), "-m", model, "--prompts", text, "--copy-prompts", text,
		"--prompt-count", "2", "--prompt-tokens", "40", "--copy-tokens", "6", "-n", "12", "-r", "1", "--warmup", "0", "-t", "1",
		"--curve=false", "--depths", "0", "--drafters", "ngram", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var got specbench.Result
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	if got.Prompts != 4 || len(got.Depths) != 2 || !got.Depths[1].Identical {
		t.Fatalf("got %+v, want 4 prompts and an identical drafter:ngram row", got)
	}
	if _, _, err := runCLI(t, "", "specbench", "--config", emptyConfig(t), "-m", model, "--copy-prompts", text, "--copy-tokens", "0", "--drafters", "ngram"); exitCode(err) != 2 {
		t.Fatalf("--copy-tokens 0: got %v, want a usage error", err)
	}
}

// TestSpecbenchPromptLines: a file of short prompts, one per line (and the same as
// JSONL), is read as users write it: a prompt per line, not a corpus too short for
// --prompt-tokens windows; a start line says what will run.
func TestSpecbenchPromptLines(t *testing.T) {
	model := testpath.Path(t, "models", "stories260K.gguf")
	dir := t.TempDir()
	txt, jsonl := filepath.Join(dir, "prompts.txt"), filepath.Join(dir, "prompts.jsonl")
	os.WriteFile(txt, []byte("Once upon a time\n\nThe dog ran\nLily said\n"), 0o644)
	os.WriteFile(jsonl, []byte(`{"prompt": "Once upon a time"}`+"\n"+`"The dog ran"`+"\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--prompt-lines", txt}, 3},
		{[]string{"--prompts", jsonl}, 2},
		{[]string{"--prompt-lines", txt, "--prompt-lines", jsonl}, 5},
	} {
		out, stderr, err := runCLI(t, "", append([]string{"specbench", "--config", emptyConfig(t), "-m", model, "--draft", model,
			"-n", "4", "-r", "1", "--warmup", "0", "-t", "1", "--curve=false", "--depths", "0,1", "--json"}, tc.args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", tc.args, err, stderr)
		}
		var got specbench.Result
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v in %q", err, out)
		}
		if got.Prompts != tc.want || !strings.Contains(stderr, fmt.Sprintf("specbench: 2 rows × %d prompts × 1 repetitions", tc.want)) {
			t.Errorf("%v: got %d prompts, stderr %q; want %d and a start line", tc.args, got.Prompts, stderr, tc.want)
		}
	}
	// the corpus mode names the per-line flag when the file is too short for a window
	_, _, err := runCLI(t, "", "specbench", "--config", emptyConfig(t), "-m", model, "--draft", model, "--prompts", txt, "--curve=false")
	if err == nil || !strings.Contains(err.Error(), "--prompt-lines "+txt) {
		t.Errorf("short corpus: got %v, want a pointer to --prompt-lines", err)
	}
}
