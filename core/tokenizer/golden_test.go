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
