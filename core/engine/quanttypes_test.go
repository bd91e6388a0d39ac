package engine

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/tokenizer"
	"github.com/minfer/minfer/internal/enginetest"
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
// greedy 24-token text equals llama.cpp's in at least 53 of the 54 cases and in at
// least 4 of the 6 cases (2 models × 3 prompts) of every type; a wrong kernel or
// dequantizer loses all of a type's cases. expected.json was recorded by an AVX2-only
// build of llama.cpp (an AVX2 build reproduces it, an AVX-512 one gets 42-46 of 54), so
// the backend runs in cpu.OrderAVX2, the float rounding of that build. Measured: 53 of
// 54 (with cpu.OrderAVX512 47). The one miss, qwen3 IQ4_NL "The weather today is", is
// also where llama.cpp's prompt batch takes tinyBLAS (one accumulator) and its decode
// steps ggml_vec_dot_iq4_nl_q8_0 (two); minfer keeps the decode order for every row.
func TestQuantTypesGreedy(t *testing.T) {
	var exp struct {
		Cases []quantTypeCase `json:"cases"`
	}
	golden.ReadJSON(t, testpath.Path(t, "quant-types", "expected.json"), &exp)
	if len(exp.Cases) == 0 {
		t.Fatal("no cases in quant-types/expected.json")
	}
	b := cpu.New(cpu.Options{Threads: 2, Order: cpu.OrderAVX2})
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
		res, err := s.Generate(bg, Request{Prompt: ids, NPredict: 24, Sampler: enginetest.Greedy{}})
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
	if want := len(exp.Cases) - 1; matched < want {
		t.Errorf("%d of %d greedy texts equal llama.cpp's, want ≥ %d", matched, len(exp.Cases), want)
	}
}
