package engine

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/internal/enginetest"
	"github.com/minfer/minfer/internal/golden"
	"github.com/minfer/minfer/sdk"
)

// TestDraftChainMatchesPerStep: with the draft model's steps run as one chain
// (model.DraftChain) a speculative generation is, round for round, the per-step path's
// (MINFER_NO_DRAFT_CHAIN=1): the same tokens (plain decoding's: greedy identity), the
// same drafts and the same confidences bitwise, with min_conf cuts that drop or keep
// the token under the cut-off, and with and without a cut-off, at several depths.
func TestDraftChainMatchesPerStep(t *testing.T) {
	const n = 40
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	target := golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q8_0.gguf", "target")
	draft := golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q4_0.gguf", "draft")
	prompt := []int32{1, 450, 1996, 1354, 1701, 432, 12, 1002}
	atOnce, cutChains := true, true
	run := func(perStep bool, p sdk.DepthPolicy, m bool) *Result {
		t.Helper()
		defer func(v, a, c bool) { noDraftChain, chainAtOnce, chainCuts = v, a, c }(noDraftChain, chainAtOnce, chainCuts)
		noDraftChain, chainAtOnce, chainCuts = perStep, atOnce, cutChains
		cfg := Config{Target: target, Vocab: fakeVocab{}, Ctx: 256, KVType: backend.KVF16, DraftKVType: backend.KVF16, Batch: 16}
		if m {
			cfg.Draft = draft
		}
		s, err := NewSession(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		res, err := s.Generate(bg, Request{Prompt: prompt, NPredict: n, Sampler: enginetest.Greedy{}, Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		cut := false
		if cp, ok := p.(*cutPolicy); ok && cp.conf > 0 {
			cut = true
		}
		if chained := m && len(s.draft.(*seq).chain.IDs) > 0; m && chained != (!perStep && atOnce && (cutChains || !cut)) {
			t.Fatalf("per-step %v, chains at once %v, chains with cuts %v, a cut-off %v: the draft ran chains: %v", perStep, atOnce, cutChains, cut, chained)
		}
		return res
	}
	plain := run(false, nil, false)
	cuts := 0
	for _, tc := range []struct {
		depth int
		conf  float32
		keep  bool
	}{{1, 0, false}, {3, 0, false}, {8, 0, false}, {8, 0.9, false}, {8, 0.9, true}, {5, 0.99, false}, {5, 0.99, true}} {
		t.Run(fmt.Sprintf("depth %d min_conf %v keep %v", tc.depth, tc.conf, tc.keep), func(t *testing.T) {
			var got [2]*cutPolicy
			for i, perStep := range []bool{false, true} {
				got[i] = &cutPolicy{depth: tc.depth, conf: tc.conf, keep: tc.keep}
				r := run(perStep, got[i], true)
				if !slices.Equal(r.Tokens, plain.Tokens) {
					t.Fatalf("per-step %v: got %v, want plain decoding's %v", perStep, r.Tokens, plain.Tokens)
				}
			}
			chain, step := got[0].seen, got[1].seen
			if len(chain) != len(step) {
				t.Fatalf("the chain ran %d rounds, the per-step path %d", len(chain), len(step))
			}
			for i := range chain {
				c, s := chain[i], step[i]
				if c.Drafted != s.Drafted || c.Accepted != s.Accepted || !sameBits(c.DraftConf, s.DraftConf) {
					t.Fatalf("round %d: chain drafted %d accepted %d conf %v; per-step %d, %d, %v", i,
						c.Drafted, c.Accepted, c.DraftConf, s.Drafted, s.Accepted, s.DraftConf)
				}
				if c.Drafted < c.Depth {
					cuts++
				}
			}
		})
	}
	if cuts == 0 {
		t.Fatal("no round was cut by min_conf (setup)")
	}
	// Where ops run at once (the CPU, Caps.Queued false) the engine drafts step by step.
	atOnce = false
	if r := run(false, FixedDepth(4), true); !slices.Equal(r.Tokens, plain.Tokens) {
		t.Fatalf("without chains: got %v, want %v", r.Tokens, plain.Tokens)
	}
	// Rounds with a min_conf cut-off draft step by step (see chainCuts): run checks
	// that no chain ran.
	atOnce, cutChains = true, false
	if r := run(false, &cutPolicy{depth: 8, conf: 0.9}, true); !slices.Equal(r.Tokens, plain.Tokens) {
		t.Fatalf("a cut-off round: got %v, want %v", r.Tokens, plain.Tokens)
	}
}

func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}
