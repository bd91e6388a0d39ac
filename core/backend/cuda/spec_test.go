//go:build cuda

package cuda_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/enginetest"
)

// TestSpeculativeGreedyIdentityGPU: on the GPU, speculative greedy output equals plain
// greedy output token for token at depths up to the backend's identity bound
// (Caps().IdentityRows - 1: a round verifies depth + 1 rows), with the target as its own
// draft (every draft accepted, so every verify call has depth + 1 rows) and with the
// target in another quantization as the draft, on the synthetic models of every
// architecture (Q4_K_M files: Q4_K and Q6_K weights on the small-nt tensor-core kernel).
// It runs with the tier's kernel choices and with the tensor-core kernel for every
// verify call (MINFER_MMQ=all).
func TestSpeculativeGreedyIdentityGPU(t *testing.T) {
	for _, mode := range []string{"", "all"} {
		t.Run("MINFER_MMQ="+mode, func(t *testing.T) {
			t.Setenv("MINFER_MMQ", mode)
			specIdentity(t)
		})
	}
}

func specIdentity(t *testing.T) {
	g := open(t)
	defer g.Close()
	bound := g.Caps().IdentityRows - 1
	const n = 70
	prompt := []int32{1, 450, 1996, 1354, 1701, 432, 12, 1002}
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		load := func(q, name string) *model.Model {
			f, err := gguf.Open(testdata(t, "models", "synthetic", "synth-"+arch+"-"+q+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(g, f, model.Options{Name: name})
			if err != nil {
				t.Fatalf("%s %s: %v", arch, q, err)
			}
			return m
		}
		target, self, other := load("q4_k_m", "target"), load("q4_k_m", "draft"), load("q8_0", "draft-q8")
		plain := genGPU(t, target, nil, 0, prompt, n, bound)
		for _, d := range []int{1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 47, 63} {
			if d > bound {
				continue
			}
			for _, dr := range []*model.Model{self, other} {
				if dr == other && d%2 == 0 {
					continue
				}
				r := genGPU(t, target, dr, d, prompt, n, bound)
				if !slices.Equal(r.Tokens, plain.Tokens) {
					t.Fatalf("%s depth %d, draft %s: got %v, want %v", arch, d, dr.Name, r.Tokens, plain.Tokens)
				}
				if dr == self && r.Spec.Accepted != r.Spec.Drafted {
					t.Errorf("%s depth %d: the target as its own draft had %d of %d drafts accepted", arch, d, r.Spec.Accepted, r.Spec.Drafted)
				}
			}
		}
		target.Close()
		self.Close()
		other.Close()
	}
}

func genGPU(t *testing.T, target, draft *model.Model, d int, prompt []int32, n, maxDepth int) *engine.Result {
	t.Helper()
	s, err := engine.NewSession(engine.Config{Target: target, Draft: draft, Vocab: enginetest.Vocab[engine.TextStream]{}, Ctx: 256, KVType: backend.KVF16, DraftKVType: backend.KVF16, Batch: 64, DraftMax: maxDepth})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	req := engine.Request{Prompt: prompt, NPredict: n, Sampler: enginetest.Greedy{}}
	if draft != nil {
		req.Policy = engine.FixedDepth(d)
	}
	r, err := s.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(fmt.Errorf("depth %d: %w", d, err))
	}
	return r
}
