package model_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/testpath"
)

// goldenCase is the part of ../shared/testdata/golden/cases/*.json these tests use.
type goldenCase struct {
	Model     string  `json:"model"`
	PromptIDs []int32 `json:"prompt_ids"`
	NVocab    int     `json:"n_vocab"`
	Variants  struct {
		Norepack struct {
			Last struct {
				Position int    `json:"position"`
				Full     string `json:"full_f32le_base64"`
			} `json:"last_prompt_logits"`
			Greedy struct {
				Steps []goldenStep `json:"steps"`
			} `json:"greedy"`
		} `json:"norepack"`
	} `json:"variants"`
}

// goldenStep is one greedy step: the logits row that chose ID (steps[0] is the last
// prompt position, steps[i] the row after feeding the id of step i-1).
type goldenStep struct {
	ID          int32   `json:"id"`
	Logit       float32 `json:"logit"`
	RunnerUp    int32   `json:"runner_up_id"`
	RunnerLogit float32 `json:"runner_up_logit"`
}

func loadCase(t *testing.T, path string) goldenCase {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c goldenCase
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

func decodeLogits(t *testing.T, s string) []float32 {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// tolerance is the bar: 5e-3 for F16/F32 files, 2e-2 for quantized ones. (Every
// quantized file matches llama.cpp's norepack logits bit for bit; the bar is the issue's.)
func tolerance(modelPath string) float64 {
	if strings.HasSuffix(modelPath, "-f16.gguf") || strings.HasSuffix(modelPath, "stories260K.gguf") {
		return 5e-3
	}
	return 2e-2
}

func loadModel(t *testing.T, b backend.Backend, rel, name string) *model.Model {
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

// TestGoldenLastPromptLogits: the whole prompt in one forward, last-row logits against
// llama.cpp's (norepack) within the tolerance.
func TestGoldenLastPromptLogits(t *testing.T) {
	paths, _ := filepath.Glob(testpath.Path(t, "golden", "cases", "*.json"))
	if len(paths) == 0 {
		t.Fatal("no golden cases")
	}
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	for _, p := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".json"), func(t *testing.T) {
			c := loadCase(t, p)
			m := loadModel(t, b, c.Model, "target")
			want := decodeLogits(t, c.Variants.Norepack.Last.Full)
			if len(want) != m.Params.Vocab || c.NVocab != m.Params.Vocab {
				t.Fatalf("vocab: got %d, golden %d/%d", m.Params.Vocab, c.NVocab, len(want))
			}
			kv, err := m.NewKV(512, backend.KVF16)
			if err != nil {
				t.Fatal(err)
			}
			defer kv.Close()
			l, err := m.Forward(c.PromptIDs, kv, false)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]float32, m.Params.Vocab)
			if err := m.ReadLogits(l, got); err != nil {
				t.Fatal(err)
			}
			worst, at := 0.0, 0
			for i := range got {
				if d := math.Abs(float64(got[i] - want[i])); d > worst || math.IsNaN(d) {
					worst, at = d, i
				}
			}
			tol := tolerance(c.Model)
			t.Logf("%s: max |Δlogit| %.2e at id %d (tolerance %.0e)", filepath.Base(p), worst, at, tol)
			if !(worst <= tol) {
				t.Fatalf("logit %d: got %v, want %v (|Δ| %.3g > %.0e)", at, got[at], want[at], worst, tol)
			}
		})
	}
}

// TestGoldenGreedySteps: llama.cpp's greedy continuation of the quantized files fed
// back one token at a time (its ids, so a near-tie cannot make the paths part): at
// every step the logits of the chosen id and of the runner-up equal llama.cpp's to
// 1e-5 (they match bit for bit: ggml's kernels and activation quantizers, and libm's
// sinf/cosf in the RoPE cache, reproduced). F16/F32 files are left to
// TestGoldenLastPromptLogits: llama.cpp runs their single-token steps with another
// kernel than batches (0.001-0.008 apart), this backend one kernel for every batch.
func TestGoldenGreedySteps(t *testing.T) {
	paths, _ := filepath.Glob(testpath.Path(t, "golden", "cases", "synth-*-q*.json"))
	if len(paths) < 24 {
		t.Fatalf("%d quantized golden cases, want 24", len(paths))
	}
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	for _, p := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".json"), func(t *testing.T) {
			c := loadCase(t, p)
			steps := c.Variants.Norepack.Greedy.Steps
			if len(steps) == 0 {
				t.Fatal("no greedy steps")
			}
			const tol = 1e-5
			m := loadModel(t, b, c.Model, "target")
			kv, err := m.NewKV(512, backend.KVF16)
			if err != nil {
				t.Fatal(err)
			}
			defer kv.Close()
			got := make([]float32, m.Params.Vocab)
			ids, worst := c.PromptIDs, 0.0
			for i, st := range steps {
				l, err := m.Forward(ids, kv, false)
				if err != nil {
					t.Fatal(err)
				}
				if err := m.ReadLogits(l, got); err != nil {
					t.Fatal(err)
				}
				for _, w := range []struct {
					id    int32
					logit float32
				}{{st.ID, st.Logit}, {st.RunnerUp, st.RunnerLogit}} {
					d := math.Abs(float64(got[w.id] - w.logit))
					worst = max(worst, d)
					if !(d <= tol) {
						t.Fatalf("step %d: logit of id %d: got %v, want %v (|Δ| %.3g > %.0e)", i, w.id, got[w.id], w.logit, d, tol)
					}
				}
				ids = []int32{st.ID}
			}
			t.Logf("%d steps: max |Δlogit| %.2e (tolerance %.0e)", len(steps), worst, tol)
		})
	}
}
