package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/minfer/minfer/internal/testpath"
)

// TestGoldenPromptIDs checks Encode(prompt, addSpecial=true, parseSpecial=true) against
// llama.cpp's prompt ids for every model in shared/testdata/golden/cases.
func TestGoldenPromptIDs(t *testing.T) {
	files, err := filepath.Glob(testpath.Path(t, "golden", "cases", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden cases (%v)", err)
	}
	toks := map[string]*Tokenizer{}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var c struct {
				Model     string  `json:"model"`
				Prompt    string  `json:"prompt"`
				PromptIDs []int32 `json:"prompt_ids"`
				Tokenize  struct {
					AddSpecial   bool `json:"add_special"`
					ParseSpecial bool `json:"parse_special"`
				} `json:"tokenize"`
			}
			if err := json.Unmarshal(b, &c); err != nil {
				t.Fatal(err)
			}
			tok := toks[c.Model]
			if tok == nil {
				tok = loadGGUF(t, filepath.FromSlash(c.Model))
				toks[c.Model] = tok
			}
			got, err := tok.Encode(c.Prompt, c.Tokenize.AddSpecial, c.Tokenize.ParseSpecial)
			if err != nil {
				t.Fatal(err)
			}
			if !equalIDs(got, c.PromptIDs) {
				t.Fatalf("Encode(%q):\n got %v\nwant %v", c.Prompt, got, c.PromptIDs)
			}
		})
	}
}

// TestTrainedTokenizer checks the trained qwen2 pair's 4096-token BPE, from its
// tokenizer.json and from both GGUFs, against the ids HF tokenizers (= llama-tokenize)
// gives for the held-out prose and code.
func TestTrainedTokenizer(t *testing.T) {
	b, err := os.ReadFile(testpath.Path(t, "models", "trained", "train-report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		EvalTokenIDs map[string][]int32 `json:"eval_token_ids"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	hf, err := FromHF(testpath.Path(t, "models", "trained", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	toks := map[string]*Tokenizer{
		"tokenizer.json": hf,
		"draft-q8_0":     loadGGUF(t, "models", "trained", "draft-q8_0.gguf"),
		"target-q4_k_m":  loadGGUF(t, "models", "trained", "target-q4_k_m.gguf"),
	}
	for tname, tok := range toks {
		for _, doc := range []string{"prose", "code"} {
			t.Run(tname+"/"+doc, func(t *testing.T) {
				text, err := os.ReadFile(testpath.Path(t, "models", "trained", "eval-"+doc+".txt"))
				if err != nil {
					t.Fatal(err)
				}
				want := r.EvalTokenIDs[doc]
				if len(want) == 0 {
					t.Fatal("no reference ids")
				}
				got, err := tok.Encode(string(text), false, false)
				if err != nil {
					t.Fatal(err)
				}
				if !equalIDs(got, want) {
					n := 0
					for n < len(got) && n < len(want) && got[n] == want[n] {
						n++
					}
					t.Fatalf("%d ids, want %d; first difference at %d", len(got), len(want), n)
				}
			})
		}
	}
}
