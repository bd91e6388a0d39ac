// Package golden reads llama.cpp's reference outputs in ../shared/testdata/golden (see
// its README) for the golden tests of several packages, and holds the one statement of
// the tolerances those tests compare against.
package golden

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/testpath"
)

// Step is one greedy step: the logits row that chose ID (Steps[0] is the last prompt
// position, Steps[i] the row after feeding the id of step i-1).
type Step struct {
	ID            int32   `json:"id"`
	Logit         float32 `json:"logit"`
	RunnerUp      int32   `json:"runner_up_id"`
	RunnerUpLogit float32 `json:"runner_up_logit"`
}

// Case is the part of cases/<model>.p<N>.json the tests use (the norepack variant).
type Case struct {
	Model     string  `json:"model"` // relative to shared/testdata
	Prompt    string  `json:"prompt"`
	PromptIDs []int32 `json:"prompt_ids"`
	NVocab    int     `json:"n_vocab"`
	Variants  struct {
		Norepack struct {
			Last struct {
				Position int    `json:"position"`
				Full     string `json:"full_f32le_base64"`
			} `json:"last_prompt_logits"`
			Greedy struct {
				IDs   []int32 `json:"ids"`
				Steps []Step  `json:"steps"`
				Hex   string  `json:"text_hex"`
			} `json:"greedy"`
		} `json:"norepack"`
	} `json:"variants"`
}

// PPL is the part of perplexity/<model>.json the tests use.
type PPL struct {
	Model    string  `json:"model"`
	TextIDs  []int32 `json:"text_ids"`
	Scored   int     `json:"scored_tokens"`
	Variants struct {
		Norepack struct {
			Running []float64 `json:"ppl_running"`
			Final   float64   `json:"ppl_final"`
			NChunks int       `json:"n_chunks"`
			NCtx    int       `json:"n_ctx"`
			NBatch  int       `json:"n_batch"`
		} `json:"norepack"`
	} `json:"variants"`
}

// ReadJSON decodes the JSON file at path into v.
func ReadJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// LoadCase reads a case file.
func LoadCase(t testing.TB, path string) Case {
	t.Helper()
	var c Case
	ReadJSON(t, path, &c)
	return c
}

// LastLogits decodes the case's last-prompt logits (little-endian float32, base64).
func (c *Case) LastLogits(t testing.TB) []float32 {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(c.Variants.Norepack.Last.Full)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// Tolerance is issue 4's logit bar for a model file: 5e-3 for F16/F32 files, 2e-2 for
// quantized ones.
func Tolerance(modelPath string) float32 {
	if strings.HasSuffix(modelPath, "-f16.gguf") || strings.HasSuffix(modelPath, "stories260K.gguf") {
		return 5e-3
	}
	return 2e-2
}

// LoadModel opens shared/testdata/rel and loads it on b under name, closed when the
// test ends.
func LoadModel(t testing.TB, b backend.Backend, rel, name string) *model.Model {
	t.Helper()
	f, err := gguf.Open(testpath.Path(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(b, f, model.Options{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
