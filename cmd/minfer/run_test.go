package main

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minfer/minfer/internal/testpath"
)

// emptyConfig writes an empty minfer.toml so tests do not depend on the user's.
func emptyConfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "minfer.toml")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type goldenGreedy struct {
	Prompt   string `json:"prompt"`
	Variants struct {
		Norepack struct {
			Greedy struct {
				IDs []int32 `json:"ids"`
				Hex string  `json:"text_hex"`
			} `json:"greedy"`
		} `json:"norepack"`
	} `json:"variants"`
}

func TestRunEmbeddedMatchesLlamaCpp(t *testing.T) {
	var g goldenGreedy
	b, err := os.ReadFile(testpath.Path(t, "golden", "cases", "stories260K.p1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	want := g.Variants.Norepack.Greedy
	wantText, _ := hex.DecodeString(want.Hex)
	cfg := emptyConfig(t)
	for _, tc := range []struct {
		name    string
		args    []string
		drafter bool // a drafter plugin drafts: not every token is accepted
	}{
		{"plain", nil, false},
		{"speculative, draft = target", []string{"--draft", testpath.Path(t, "models", "stories260K.gguf"), "--depth", "3"}, false},
		{"speculative, adaptive", []string{"--draft", testpath.Path(t, "models", "stories260K.gguf"), "--depth", "auto"}, false},
		{"ngram drafter, no draft model", []string{"--drafter", "ngram", "--depth", "4"}, true},
		{"ngram drafter beside the draft model, adaptive", []string{"--drafter", "ngram", "--draft", testpath.Path(t, "models", "stories260K.gguf")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"run", "--config", cfg, "-p", g.Prompt, "-n", "32", "--temp", "0", "--json", "--top-logits", "2"}, tc.args...)
			out, stderr, err := runCLI(t, "", args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			var got struct {
				PromptTokens int     `json:"prompt_tokens"`
				Tokens       []int32 `json:"tokens"`
				Text         string  `json:"text"`
				TopLogits    []struct {
					ID int32 `json:"id"`
				} `json:"top_logits"`
				Spec *struct {
					Rounds   int `json:"rounds"`
					Drafted  int `json:"drafted"`
					Accepted int `json:"accepted"`
				} `json:"spec"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%v in %q", err, out)
			}
			if !slices.Equal(got.Tokens, want.IDs) || got.Text != string(wantText) {
				t.Fatalf("got %v %q, want %v %q", got.Tokens, got.Text, want.IDs, wantText)
			}
			if len(got.TopLogits) != 2 || got.TopLogits[0].ID != want.IDs[0] {
				t.Fatalf("top logits: got %+v, want 2 led by %d", got.TopLogits, want.IDs[0])
			}
			if tc.drafter {
				if got.Spec == nil || got.Spec.Rounds == 0 {
					t.Fatalf("spec stats: got %+v, want speculative rounds", got.Spec)
				}
			} else if tc.args != nil && (got.Spec == nil || got.Spec.Drafted == 0 || got.Spec.Accepted != got.Spec.Drafted) {
				t.Fatalf("spec stats: got %+v, want full acceptance with draft = target", got.Spec)
			}
		})
	}
}

func TestRunStreamsText(t *testing.T) {
	out, stderr, err := runCLI(t, "", "run", "--config", emptyConfig(t), "-p", "Once upon a time", "-n", "16", "--seed", "7")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.HasPrefix(out, "Once upon a time") || len(out) <= len("Once upon a time\n") {
		t.Fatalf("got %q, want the prompt and a continuation", out)
	}
	if !strings.Contains(stderr, "generated: 16 tokens") {
		t.Fatalf("stderr: got %q, want timings for 16 tokens", stderr)
	}
	again, _, _ := runCLI(t, "", "run", "--config", emptyConfig(t), "-p", "Once upon a time", "-n", "16", "--seed", "7")
	if again != out {
		t.Fatalf("same seed, different text: %q vs %q", again, out)
	}
}

func TestRunErrors(t *testing.T) {
	cfg := emptyConfig(t)
	bad := filepath.Join(t.TempDir(), "bad.gguf")
	os.WriteFile(bad, []byte("GGUF garbage"), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no prompt", []string{}, 2, "no prompt"},
		{"p and f", []string{"-p", "a", "-f", "b"}, 2, "-p and -f"},
		{"bad depth", []string{"-p", "a", "--depth", "deep"}, 2, "--depth"},
		{"bad kv", []string{"-p", "a", "--kv", "q4_0"}, 2, "q4_0"},
		{"missing model", []string{"-p", "a", "-m", "/nonexistent/model.gguf"}, 1, "/nonexistent/model.gguf"},
		{"corrupt model", []string{"-p", "a", "-m", bad}, 1, "gguf"},
		{"prompt too long", []string{"-p", strings.Repeat("Once upon a time ", 40), "--ctx", "32"}, 1, "does not fit the context of 32"},
		{"unknown sampler", []string{"-p", "a", "--sampler", "nope"}, 2, "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := runCLI(t, "", append([]string{"run", "--config", cfg}, tc.args...)...)
			if got := exitCode(err); got != tc.code || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got exit %d, %v (stderr %q); want exit %d with %q", got, err, stderr, tc.code, tc.want)
			}
		})
	}
}

func TestRunChatAndStop(t *testing.T) {
	cfg := emptyConfig(t)
	// conversation mode: two user lines on stdin, one reply each
	out, stderr, err := runCLI(t, "Hello\nTell me a story\n", "run", "--config", cfg, "--chat", "-n", "8", "--temp", "0")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if got := strings.Count(out, "\n"); got != 2 {
		t.Fatalf("chat: got %d reply lines in %q, want 2", got, out)
	}
	if strings.Count(stderr, "> ") != 3 {
		t.Fatalf("chat: prompts on stderr: got %q, want 3", stderr)
	}
	// a stop string ends the text just before it
	full, _, err := runCLI(t, "", "run", "--config", cfg, "-p", "Once upon a time", "-n", "32", "--temp", "0", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r struct{ Text string }
	json.Unmarshal([]byte(full), &r)
	words := strings.Fields(r.Text)
	if len(words) < 4 {
		t.Fatalf("too little text to pick a stop string: %q", r.Text)
	}
	stop := words[3]
	cut, _, err := runCLI(t, "", "run", "--config", cfg, "-p", "Once upon a time", "-n", "32", "--temp", "0", "--json", "--stop", stop)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Text string
		Stop string
	}
	json.Unmarshal([]byte(cut), &c)
	if want := r.Text[:strings.Index(r.Text, stop)]; c.Text != want || c.Stop != "stop" {
		t.Fatalf("--stop %q: got %q (%s), want %q (stop)", stop, c.Text, c.Stop, want)
	}
}

// TestRunRelativeModelPath: -m is relative to the working directory even when
// minfer.toml lives elsewhere (its own paths are relative to it).
func TestRunRelativeModelPath(t *testing.T) {
	wd, _ := os.Getwd()
	rel, err := filepath.Rel(wd, testpath.Path(t, "models", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runCLI(t, "", "run", "--config", emptyConfig(t), "-m", rel, "-p", "Once", "-n", "2"); err != nil {
		t.Fatalf("-m %s: %v\n%s", rel, err, stderr)
	}
}

// TestRunDraftersIdentity: on a prompt whose continuation copies it, every built-in
// drafter (alone, together, at a fixed depth and under the adaptive policy, beside the
// draft model) gives plain decoding's greedy tokens, and gets drafts accepted.
func TestRunDraftersIdentity(t *testing.T) {
	cfg := emptyConfig(t)
	const story = "Once upon a time, there was a little girl named Lily. She liked to play in the park with her dog."
	prompt := story + " " + story + " " + story[:40]
	run := func(args ...string) (tokens []int32, accepted int, byDrafter map[string]struct{ Rounds int }) {
		t.Helper()
		all := append([]string{"run", "--config", cfg, "-p", prompt, "-n", "40", "--temp", "0", "--json"}, args...)
		out, stderr, err := runCLI(t, "", all...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr)
		}
		var got struct {
			Tokens []int32 `json:"tokens"`
			Spec   *struct {
				Accepted  int                             `json:"accepted"`
				ByDrafter map[string]struct{ Rounds int } `json:"by_drafter"`
			} `json:"spec"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v in %q", err, out)
		}
		if got.Spec != nil {
			accepted, byDrafter = got.Spec.Accepted, got.Spec.ByDrafter
		}
		return got.Tokens, accepted, byDrafter
	}
	plain, _, _ := run()
	draft := testpath.Path(t, "models", "stories260K.gguf")
	for _, args := range [][]string{
		{"--drafter", "ngram", "--depth", "4"},
		{"--drafter", "suffix", "--depth", "4"},
		{"--drafter", "suffix,ngram"},
		{"--drafter", "ngram", "--draft", draft, "--depth", "3"},
		{"--drafter", "suffix", "--draft", draft},
	} {
		got, accepted, by := run(args...)
		if !slices.Equal(got, plain) {
			t.Fatalf("%v: got %v, want %v", args, got, plain)
		}
		if accepted == 0 {
			t.Fatalf("%v: nothing accepted on a prompt that the output copies (by drafter %v)", args, by)
		}
		t.Logf("%v: %d accepted, by drafter %v", args, accepted, by)
	}
}

// TestRunPluginSources: --policy, --sampler and --penalty take a source as --drafter
// does (config.UsePlugin declares it): a built-in's output equals its declared name's,
// a missing file is named, a plugin of the wrong role is refused by role, and
// --penalty none turns the penalty off.
func TestRunPluginSources(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cfg := emptyConfig(t)
	run := func(args ...string) (string, error) {
		out, _, err := runCLI(t, "", append([]string{"run", "--config", cfg, "-p", "Once upon a time", "-n", "8", "--temp", "0.7", "--seed", "3"}, args...)...)
		return out, err
	}
	want, err := run("--sampler", "sampling")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in the error; "" = the output equals want's
	}{
		{"built-in source", []string{"--sampler", "builtin:sampling"}, 0, ""},
		{"penalty none", []string{"--sampler", "sampling", "--penalty", "none"}, 0, ""},
		{"missing file", []string{"--policy", "file:./nope.wasm"}, 1, "--policy file:./nope.wasm: open " + filepath.Join(wd, "nope.wasm") + ": no such file"},
		{"wrong role", []string{"--sampler", "builtin:static"}, 2, `run: --sampler "builtin:static": plugin "static" is not a sampler plugin`},
		{"unknown built-in", []string{"--penalty", "builtin:nope"}, 2, `run: --penalty builtin:nope: no built-in plugin "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := run(tc.args...)
			switch {
			case exitCode(err) != tc.code:
				t.Fatalf("got exit %d (%v), want %d", exitCode(err), err, tc.code)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("got %v, want %q", err, tc.want)
			case tc.want == "" && got != want:
				t.Fatalf("got %q, want %q (the declared name's output)", got, want)
			}
		})
	}
}
