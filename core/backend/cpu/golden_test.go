package cpu_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/testpath"
)

// TestGoldenExact: the last-prompt logits of Q8_0, Q4_0 and Q4_K_M synthetic models
// equal llama.cpp's (norepack) bit for bit, up to the F16/F32 rows of the last layer
// that llama.cpp runs with one row (ggml_vec_dot order) and this backend in tinyBLAS
// order (≤ 1e-5). It needs ggml's exact float order in every op, core/quant's dot
// kernels included; one rounding difference anywhere spreads to ~0.1 in the logits.
func TestGoldenExact(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	for _, name := range []string{"synth-qwen2-q8_0.p2", "synth-llama-q4_0.p1", "synth-qwen3-q4_k_m.p2", "synth-llama-q8_0.p1"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(testpath.Path(t, "golden", "cases", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var c struct {
				Model     string  `json:"model"`
				PromptIDs []int32 `json:"prompt_ids"`
				Variants  struct {
					Norepack struct {
						Last struct {
							Full string `json:"full_f32le_base64"`
						} `json:"last_prompt_logits"`
					} `json:"norepack"`
				} `json:"variants"`
			}
			if err := json.Unmarshal(raw, &c); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(testpath.Path(t, c.Model))
			if err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(b, f, model.Options{Name: "golden"})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
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
			wantRaw, err := base64.StdEncoding.DecodeString(c.Variants.Norepack.Last.Full)
			if err != nil || len(wantRaw) != 4*len(got) {
				t.Fatalf("golden logits: %d bytes, err %v", len(wantRaw), err)
			}
			worst := 0.0
			for i := range got {
				want := math.Float32frombits(binary.LittleEndian.Uint32(wantRaw[4*i:]))
				worst = max(worst, math.Abs(float64(got[i]-want)))
			}
			if worst > 1e-5 {
				t.Errorf("max |Δlogit| = %g, want ≤ 1e-5", worst)
			}
		})
	}
}
