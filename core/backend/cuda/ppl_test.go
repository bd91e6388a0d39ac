//go:build cuda

package cuda_test

import (
	"context"
	"math"
	"os"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/core/tokenizer"
)

// TestPerplexityVsCPU: `minfer perplexity --device cuda` on both trained targets (Q4_K_M:
// Q4_K and Q6_K weights; Q8_0) and both of their eval texts, 512-token chunks, every
// chunk. Every prefill form is within issue 20's 0.1% of the CPU backend: cuBLAS with
// flash attention (the default), minfer's own GEMM (MINFER_NO_CUBLAS=1), the split-K
// attention (MINFER_NO_FLASH=1), and forwards of 128 tokens over a filled cache
// (chunked prefill). The forms that keep the default's attention (the two GEMMs, the
// 128-token chunks) agree with it within 0.02%, and the default gives the same value on
// a second run (deterministic prefill).
//
// The CPU bound holds because the GEMM rounds its activations to the CPU's 8-bit levels
// first (gemm.cu act_round_*): with x straight to f16 (MINFER_NO_ACT_ROUND=1, logged
// here) the Q4_K_M target was 0.125% below the CPU on eval-prose (28.3252 against
// 28.3608), as far as the CPU itself moves with f32 activations instead of Q8_K
// (28.3256). The split-K and flash attentions round differently (flash: P to f16 for
// the tensor cores) and measured 0.031-0.084% apart on the H200 (largest: Q8_0,
// eval-prose), so they are held to the CPU bound, not to each other's 0.02%.
func TestPerplexityVsCPU(t *testing.T) {
	gpu := open(t)
	defer gpu.Close()
	t.Setenv("MINFER_NO_CUBLAS", "1")
	own := open(t)
	defer own.Close()
	t.Setenv("MINFER_NO_CUBLAS", "")
	t.Setenv("MINFER_NO_FLASH", "1")
	split := open(t)
	defer split.Close()
	t.Setenv("MINFER_NO_FLASH", "")
	t.Setenv("MINFER_NO_ACT_ROUND", "1")
	f16x := open(t)
	defer f16x.Close()
	c := cpu.New(cpu.Options{})
	defer c.Close()
	for _, file := range []string{"target-q4_k_m.gguf", "target-q8_0.gguf"} {
		t.Run(file, func(t *testing.T) { perplexityVsCPU(t, file, c, gpu, own, split, f16x) })
	}
}

func perplexityVsCPU(t *testing.T, file string, c, gpu, own, split, f16x backend.Backend) {
	path := testdata(t, "models", "trained", file)
	if _, err := os.Stat(path); err != nil && os.Getenv("MINFER_TESTDATA") != "" {
		t.Skipf("%v: copy ../shared/testdata/models/trained/{%s,eval-prose.txt,eval-code.txt} into $MINFER_TESTDATA/models/trained", err, file)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	bos := int32(-1)
	if tok.AddBOS() {
		bos = tok.BOS()
	}
	load := func(b backend.Backend) *model.Model {
		m, err := model.Load(b, f, model.Options{Name: "target"})
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		return m
	}
	mc, mg, mo, ms, mx := load(c), load(gpu), load(own), load(split), load(f16x)
	defer func() {
		for _, m := range []*model.Model{mc, mg, mo, ms, mx} {
			m.Close()
		}
	}()
	for _, text := range []string{"eval-prose.txt", "eval-code.txt"} {
		raw, err := os.ReadFile(testdata(t, "models", "trained", text))
		if err != nil {
			t.Fatal(err)
		}
		ids, err := tok.Encode(string(raw), true, false)
		if err != nil {
			t.Fatal(err)
		}
		ppl := func(m *model.Model, batch int) float64 {
			r, err := engine.Perplexity(context.Background(), m, ids, engine.PerplexityOptions{Ctx: 512, Batch: batch, BOS: bos})
			if err != nil {
				t.Fatalf("%s %s: %v", file, text, err)
			}
			return r.Final
		}
		want, ref := ppl(mc, 512), ppl(mg, 512)
		t.Logf("%s %s: cpu %.4f, cuda %.4f (%+.3f%%)", file, text, want, ref, 100*(ref/want-1))
		if again := ppl(mg, 512); again != ref {
			t.Errorf("%s %s: cuda perplexity %v, then %v on the same input", file, text, ref, again)
		}
		if math.Abs(ref/want-1) > 1e-3 {
			t.Errorf("%s %s: cuda perplexity %.4f, cpu %.4f: off by %.3f%% (> 0.1%%)", file, text, ref, want, 100*math.Abs(ref/want-1))
		}
		x := ppl(mx, 512)
		t.Logf("%s %s: cuda MINFER_NO_ACT_ROUND=1 %.4f (%+.3f%% from the cpu)", file, text, x, 100*(x/want-1))
		for _, run := range []struct {
			name  string
			m     *model.Model
			batch int
			same  bool // the default's attention: within 0.02% of the default
		}{{"MINFER_NO_CUBLAS=1", mo, 512, true}, {"MINFER_NO_FLASH=1", ms, 512, false}, {"batch 128", mg, 128, true}} {
			got := ppl(run.m, run.batch)
			t.Logf("%s %s: cuda %s %.4f (%+.3f%% from the cpu)", file, text, run.name, got, 100*(got/want-1))
			if run.same && math.Abs(got/ref-1) > 2e-4 {
				t.Errorf("%s %s: cuda %s perplexity %.4f, default %.4f: off by %.3f%% (> 0.02%%)", file, text, run.name, got, ref, 100*math.Abs(got/ref-1))
			}
			if math.Abs(got/want-1) > 1e-3 {
				t.Errorf("%s %s: cuda %s perplexity %.4f, cpu %.4f: off by %.3f%% (> 0.1%%)", file, text, run.name, got, want, 100*math.Abs(got/want-1))
			}
		}
	}
}
