package cpu_test

import (
	"math"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/internal/golden"
	"github.com/minfer/minfer/internal/testpath"
)

// TestGoldenExact: the last-prompt logits of Q8_0, Q4_0 and Q4_K_M synthetic models
// equal llama.cpp's (norepack) bit for bit, up to the F16/F32 rows of the last layer
// that llama.cpp runs with one row (ggml_vec_dot order) and this backend in tinyBLAS
// order (≤ 1e-5). It needs ggml's exact float order in every op, core/quant's dot
// kernels included; one rounding difference anywhere spreads to ~0.1 in the logits.
//
// The Q4_0 model runs a second time with its weights repacked (cpu.SetRepack; the
// layout of AVX2 CPUs), whatever this CPU would choose, and must give the same bits.
func TestGoldenExact(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	for _, name := range []string{"synth-qwen2-q8_0.p2", "synth-llama-q4_0.p1", "synth-qwen3-q4_k_m.p2", "synth-llama-q8_0.p1", "synth-llama-q4_0.p1/repacked"} {
		t.Run(name, func(t *testing.T) {
			if n, ok := strings.CutSuffix(name, "/repacked"); ok {
				name = n
				defer cpu.SetRepack(true)()
			}
			c := golden.LoadCase(t, testpath.Path(t, "golden", "cases", name+".json"))
			m := golden.LoadModel(t, b, c.Model, "golden")
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
			want := c.LastLogits(t)
			if len(want) != len(got) {
				t.Fatalf("golden logits: %d values, model vocabulary %d", len(want), len(got))
			}
			worst := 0.0
			for i := range got {
				worst = max(worst, math.Abs(float64(got[i]-want[i])))
			}
			if !(worst <= 1e-5) { // NaN logits fail too (max(x, NaN) is NaN)
				t.Errorf("max |Δlogit| = %g, want ≤ 1e-5", worst)
			}
		})
	}
}
