package engine

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/tokenizer"
	"github.com/minfer/minfer/internal/golden"
	"github.com/minfer/minfer/internal/testpath"
)

// quantTypeCase is one entry of quant-types/expected.json: llama.cpp's greedy text for a
// llama-quantize output and a prompt.
type quantTypeCase struct {
	File     string `json:"file"`
	Type     string `json:"type"`
	Prompt   string `json:"prompt"`
	TextHex  string `json:"text_hex"`
	Complete bool   `json:"complete"`
}

// TestQuantTypesGreedy: on the files of quant-types (the block formats beyond the golden
// set: Q4_1, Q5_1, Q2_K, Q3_K_M, Q5_K_M, IQ4_NL, IQ4_XS, IQ3_S, BF16) the engine's
// greedy 24-token text equals llama.cpp's in at least 5 of 6 cases overall and in at
// least 4 of the 6 cases (2 models × 3 prompts) of every type; a wrong kernel or
// dequantizer loses all of a type's cases. Measured: 46 of 54 (IQ4_XS and IQ3_S 6 of 6,
// IQ4_NL 5, Q4_1 4, the others 5). Every miss is a qwen3 case but one, and parts from
// llama.cpp late (step 13-21 of 24, but Q2_K at step 2) at a step whose top-2 gap in
// minfer is 0.003-0.07: the decode steps of these files are not all bit-identical to
// llama.cpp's (the golden files' are), and the cause is not found yet.
func TestQuantTypesGreedy(t *testing.T) {
	var exp struct {
		Cases []quantTypeCase `json:"cases"`
	}
	golden.ReadJSON(t, testpath.Path(t, "quant-types", "expected.json"), &exp)
	if len(exp.Cases) == 0 {
		t.Fatal("no cases in quant-types/expected.json")
	}
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	matched, perType, casesPerType := 0, map[string]int{}, map[string]int{}
	for _, c := range exp.Cases {
		want, err := hex.DecodeString(c.TextHex)
		if err != nil || !c.Complete {
			t.Fatalf("%s %q: bad case (hex %v, complete %v)", c.File, c.Prompt, err, c.Complete)
		}
		casesPerType[c.Type]++
		m := golden.LoadModel(t, b, "quant-types/"+c.File, "target")
		tok, err := tokenizer.FromGGUF(m.File())
		if err != nil {
			t.Fatal(err)
		}
		ids, err := tok.Encode(c.Prompt, true, true)
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewSession(Config{Target: m, Vocab: testVocab(tok), Ctx: 512, Batch: 512})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Generate(bg, Request{Prompt: ids, NPredict: 24, Sampler: greedy{}})
		s.Close()
		m.Close()
		if err != nil {
			t.Fatalf("%s %q: %v", c.File, c.Prompt, err)
		}
		if res.Text == string(want) {
			matched++
			perType[c.Type]++
		} else {
			t.Logf("%s %q: got %q, llama.cpp %q", c.File, c.Prompt, res.Text, want)
		}
	}
	var types []string
	for typ, n := range casesPerType {
		types = append(types, typ)
		if perType[typ] < n-2 {
			t.Errorf("%s: %d of %d greedy texts equal llama.cpp's, want ≥ %d", typ, perType[typ], n, n-2)
		}
	}
	t.Logf("%d of %d greedy texts equal llama.cpp's (%s: %v)", matched, len(exp.Cases), strings.Join(types, " "), perType)
	if 6*matched < 5*len(exp.Cases) {
		t.Errorf("%d of %d greedy texts equal llama.cpp's, want ≥ 5 in 6", matched, len(exp.Cases))
	}
}
