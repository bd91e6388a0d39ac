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

// TestPerplexityVsCPU: `minfer perplexity --device cuda` on the trained target (Q4_K_M:
// Q4_K and Q6_K weights) and both of its eval texts, 512-token chunks, every chunk.
// The prefill forms — cuBLAS with flash attention (the default), minfer's own GEMM
// (MINFER_NO_CUBLAS=1), the split-K attention (MINFER_NO_FLASH=1), and forwards of 128
// tokens over a filled cache (chunked prefill) — agree with each other within 0.02%,
// the default gives the same value on a second run (deterministic prefill), and each is
// within 0.5% of the CPU backend's.
//
// The CPU bound is not issue 20's 0.1%: on the H200 the GPU's value is 0.126% below the
// CPU's on eval-prose (28.3250 against 28.3608, all 27 chunks), and the mat-vec/int8
// path (MINFER_NO_GEMM=1: 28.3229) is as far off, so the gap is not the prefill GEMM's
// or attention's: the CPU quantizes activations to Q8_K (256-value blocks) for K-quant
// weights, the GPU's GEMM rounds them to f16 (docs/perf-cuda.md).
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
	c := cpu.New(cpu.Options{})
	defer c.Close()
	const file = "target-q4_k_m.gguf"
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
	mc, mg, mo, ms := load(c), load(gpu), load(own), load(split)
	defer func() {
		for _, m := range []*model.Model{mc, mg, mo, ms} {
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
		if math.Abs(ref/want-1) > 5e-3 {
			t.Errorf("%s %s: cuda perplexity %.4f, cpu %.4f: off by %.3f%% (> 0.5%%)", file, text, ref, want, 100*math.Abs(ref/want-1))
		}
		for _, run := range []struct {
			name  string
			m     *model.Model
			batch int
		}{{"MINFER_NO_CUBLAS=1", mo, 512}, {"MINFER_NO_FLASH=1", ms, 512}, {"batch 128", mg, 128}} {
			got := ppl(run.m, run.batch)
			t.Logf("%s %s: cuda %s %.4f", file, text, run.name, got)
			if math.Abs(got/ref-1) > 2e-4 {
				t.Errorf("%s %s: cuda %s perplexity %.4f, default %.4f: off by %.3f%% (> 0.02%%)", file, text, run.name, got, ref, 100*math.Abs(got/ref-1))
			}
		}
	}
}
