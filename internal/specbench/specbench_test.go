package specbench

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine/bench"
	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/tokenizer"
	"github.com/minfer/minfer/internal/cli"
	"github.com/minfer/minfer/internal/testpath"
)

func TestRows(t *testing.T) {
	cfg := config.Default()
	cfg.Draft.Path = "draft.gguf"
	policy, drafter := cfg.Spec.Policy, cfg.Spec.Drafter
	depths, err := ParseDepths("0, 2,auto")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := Rows(cfg, depths, "ucb,builtin:static")
	if err != nil {
		t.Fatal(err)
	}
	if rows, err = DrafterRows(cfg, rows, "model,ngram,auto"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Label)
	}
	want := []string{"0", "2", "auto", "auto:ucb", "auto:builtin:static", "drafter:model", "drafter:ngram", "drafter:auto"}
	if !slices.Equal(got, want) {
		t.Fatalf("labels %q, want %q", got, want)
	}
	if r := rows[5]; r.Drafter != "-" || r.NoDraftModel {
		t.Errorf("drafter:model = %+v, want the draft model alone", r)
	}
	if r := rows[6]; r.Drafter == "" || r.Drafter == "-" || !r.NoDraftModel {
		t.Errorf("drafter:ngram = %+v, want the plugin without the draft model", r)
	}
	if r := rows[7]; r.Drafter != rows[6].Drafter || r.NoDraftModel {
		t.Errorf("drafter:auto = %+v, want the draft model and every listed plugin", r)
	}
	if cfg.Spec.Policy != policy || cfg.Spec.Drafter != drafter {
		t.Errorf("the config's own policy %q and drafter %q changed", cfg.Spec.Policy, cfg.Spec.Drafter)
	}
	for _, tc := range []struct{ depths, policies, drafters, want string }{
		{"0,x", "", "", "--depths"},
		{"0", "ucb,", "", "an empty name"},
		{"0", "", "model", "no draft model"},
		{"0", "", "ngram,,auto", "an empty name"},
	} {
		c := config.Default()
		ds, err := ParseDepths(tc.depths)
		if err == nil {
			var rs []bench.Row
			if rs, err = Rows(c, ds, tc.policies); err == nil {
				_, err = DrafterRows(c, rs, tc.drafters)
			}
		}
		if cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want a usage error containing %q", tc, err, tc.want)
		}
	}
}

func TestPrompts(t *testing.T) {
	f, err := gguf.Open(testpath.Path(t, "models", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	corpus := write("corpus.txt", strings.Repeat("Once upon a time, there was a little girl who loved the sea. ", 20))
	lines := write("p.jsonl", "{\"prompt\": \"Hello\"}\n\n\"The dog\"\n")
	builtin, err := Prompts(tok, PromptOptions{Count: 3, Tokens: 16, CopyTokens: 4})
	if err != nil || len(builtin) != len(DefaultPrompts) {
		t.Fatalf("no files: %d prompts, %v; want the %d built-in ones", len(builtin), err, len(DefaultPrompts))
	}
	got, err := Prompts(tok, PromptOptions{Corpus: []string{corpus, lines}, Copies: []string{corpus}, Count: 3, Tokens: 16, CopyTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3+2+3 {
		t.Fatalf("%d prompts, want 3 windows, 2 lines and 3 copy-heavy windows", len(got))
	}
	bos := 0
	if tok.AddBOS() {
		bos = 1
	}
	for i, p := range got[:3] {
		if len(p) != bos+16 {
			t.Errorf("window %d: %d tokens, want %d", i, len(p), bos+16)
		}
	}
	for i, p := range got[5:] {
		if n := len(p); n != bos+16+4 || !slices.Equal(p[n-4:], p[bos:bos+4]) {
			t.Errorf("copy-heavy prompt %d: %v, want a window followed by its first 4 tokens", i, p)
		}
	}
	for _, tc := range []struct {
		o    PromptOptions
		want string
	}{
		{PromptOptions{Corpus: []string{corpus}, Count: 1, Tokens: 1 << 20}, "fewer than --prompt-tokens"},
		{PromptOptions{Lines: []string{write("bad.jsonl", "{\"x\": 1}\n")}, Count: 1, Tokens: 8}, "bad.jsonl:1"},
		{PromptOptions{Lines: []string{write("empty.txt", "\n \n")}, Count: 1, Tokens: 8}, "holds no prompt"},
	} {
		if _, err := Prompts(tok, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error containing %q", tc.o, err, tc.want)
		}
	}
}

func TestWriteTable(t *testing.T) {
	r := Result{Target: "t.gguf", Drafter: "ngram", Prompts: 2, NPredict: 8, Reps: 1,
		Depths: []bench.RowResult{{Depth: "2", Speedup: 1.5, RoundsByDrafter: map[string]int{"model": 3, "ngram": 1}}}}
	var b strings.Builder
	r.WriteTable(&b)
	out := b.String()
	for _, want := range []string{"draft none, drafter ngram", "|       - |         - |", "2: drafting rounds by drafter: model 3, ngram 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q (no depth 0: no speedup, no identity):\n%s", want, out)
		}
	}
	if strings.Contains(out, "verify cost") {
		t.Errorf("a curve printed without one:\n%s", out)
	}
	if !strings.Contains(out, "| depth |           tokens/s |") || strings.Contains(out, "%!") {
		t.Errorf("header not padded to the depth column, or a formatting error:\n%s", out)
	}
}
