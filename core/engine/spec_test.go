package engine

import (
	"fmt"
	"github.com/minfer/minfer/internal/golden"
	"slices"
	"strconv"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/enginetest"
	"github.com/minfer/minfer/internal/testpath"
)

// specRun generates n greedy tokens from prompt with target (and draft at depth d).
func specRun(t *testing.T, target, draft *model.Model, kt backend.KVType, pen bool, d int, prompt []int32, n int) *Result {
	t.Helper()
	s, err := NewSession(Config{Target: target, Draft: draft, Vocab: fakeVocab{}, Ctx: 256, KVType: kt, DraftKVType: kt, Batch: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	req := Request{Prompt: prompt, NPredict: n, Sampler: enginetest.Greedy{}}
	if draft != nil {
		req.Policy = FixedDepth(d)
	}
	if pen {
		req.Penalty = &repPenalty{window: 6, p: 0.25} // p < 1 favours seen tokens: the exact window decides
	}
	res, err := s.Generate(bg, req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestSpeculativeGreedyIdentity: with the greedy sampler, speculative output equals
// plain sequential output token for token on the synthetic models of every
// architecture: draft = target (every draft accepted, d+1 tokens per round), the
// target in another quantization, and an unrelated model; depths 1…16, with and
// without a penalty window, with F16 and Q8_0 caches.
func TestSpeculativeGreedyIdentity(t *testing.T) {
	const n = 20
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	load := func(name, ns string) *model.Model {
		return golden.LoadModel(t, b, "models/"+name+".gguf", ns)
	}
	prompt := []int32{1, 450, 1996, 1354, 1701, 432, 12, 1002}
	for _, arch := range []struct {
		name, unrelated string
	}{
		{"llama", "synthetic/synth-qwen2-q4_0"},
		{"qwen2", "synthetic/synth-qwen3-q4_0"},
		{"qwen3", "synthetic/synth-llama-q4_0"},
	} {
		target := load("synthetic/synth-"+arch.name+"-q8_0", "target")
		self := load("synthetic/synth-"+arch.name+"-q8_0", "draft")
		quant := load("synthetic/synth-"+arch.name+"-q4_0", "draft-q4")
		other := load(arch.unrelated, "draft-other")
		p := prompt
		type variant struct {
			kt  backend.KVType
			pen bool
		}
		variants := []variant{{backend.KVF16, false}, {backend.KVQ8_0, true}, {backend.KVF16, true}, {backend.KVQ8_0, false}}
		plain := map[variant][]int32{}
		for _, v := range variants {
			plain[v] = specRun(t, target, nil, v.kt, v.pen, 0, p, n).Tokens
		}
		if slices.Equal(plain[variants[0]], plain[variants[2]]) {
			t.Fatalf("%s: the penalty changed nothing; the test would not see a wrong history", arch.name)
		}
		for d := 1; d <= 16; d++ {
			v := variants[d%len(variants)]
			name := fmt.Sprintf("%s/depth %d/%s/penalty=%t", arch.name, d, v.kt, v.pen)
			// draft = target: identical, and without a penalty (which the greedy draft
			// does not apply) fully accepted
			r := specRun(t, target, self, v.kt, v.pen, d, p, n)
			if !slices.Equal(r.Tokens, plain[v]) {
				t.Fatalf("%s, draft = target: got %v, want %v", name, r.Tokens, plain[v])
			}
			if !v.pen && (r.Spec.Accepted != r.Spec.Drafted || r.Spec.ByDepth[strconv.Itoa(d)].Rounds != n/(d+1)) {
				t.Fatalf("%s, draft = target: accepted %d of %d, by depth %v; want all, %d full rounds", name, r.Spec.Accepted, r.Spec.Drafted, r.Spec.ByDepth, n/(d+1))
			}
			// the target quantized differently, and an unrelated model
			for _, dr := range []*model.Model{quant, other} {
				if dr == other && d != 1 && d != 3 && d != 7 {
					continue // depths 1, 3, 7 for the unrelated draft (it rejects nearly all: slow)
				}
				r := specRun(t, target, dr, v.kt, v.pen, d, p, n)
				if !slices.Equal(r.Tokens, plain[v]) {
					t.Fatalf("%s, draft %s: got %v, want %v", name, dr.Name, r.Tokens, plain[v])
				}
			}
		}
	}
}

// TestTrainedPairGreedyIdentity: on the real trained pair (qwen2 target-q8_0 and
// draft-q8_0) speculative greedy output equals plain greedy output on eval prompts of
// both kinds, at several depths; the draft, trained to agree with the target, gets a
// real share of its tokens accepted. (minfer specbench runs all 80 eval prompts; see
// docs/perf-engine.md.)
func TestTrainedPairGreedyIdentity(t *testing.T) {
	const n = 24
	target, draft, beds := trainedBed(t, "draft-q8_0.gguf")
	for _, bed := range beds {
		plain := specRun(t, target, nil, backend.KVF16, false, 0, bed.prompt, n)
		for _, d := range []int{1, 3, 6} {
			r := specRun(t, target, draft, backend.KVF16, false, d, bed.prompt, n)
			if !slices.Equal(r.Tokens, plain.Tokens) {
				t.Fatalf("%s depth %d: got %v, want %v", bed.name, d, r.Tokens, plain.Tokens)
			}
			if d == 1 {
				t.Logf("%s: depth-1 acceptance %.2f", bed.name, r.Spec.Acceptance)
				if r.Spec.Accepted == 0 {
					t.Fatalf("%s: the trained draft had no token accepted", bed.name)
				}
			}
		}
	}
}

// trainedPrompt is one 48-token eval prompt of the trained pair, named file@offset.
type trainedPrompt struct {
	name   string
	prompt []int32
}

// trainedBed loads the trained target (Q8_0) and draftFile from the trained pair's
// folder on a 2-thread CPU backend, with three eval prompts of train-report.json:
// prose@705, code@708 and code@1416 (α 0.72, 0.28 and 0.78 in the report: the F16
// pair over 64 generated tokens).
func trainedBed(t testing.TB, draftFile string) (target, draft *model.Model, beds []trainedPrompt) {
	t.Helper()
	var report struct {
		EvalTokenIDs map[string][]int32 `json:"eval_token_ids"`
	}
	golden.ReadJSON(t, testpath.Path(t, "models", "trained", "train-report.json"), &report)
	b := cpu.New(cpu.Options{Threads: 2})
	t.Cleanup(func() { b.Close() })
	target = golden.LoadModel(t, b, "models/trained/target-q8_0.gguf", "target")
	draft = golden.LoadModel(t, b, "models/trained/"+draftFile, "draft")
	for _, pc := range []struct {
		file string
		off  int
	}{{"prose", 705}, {"code", 708}, {"code", 1416}} {
		ids := report.EvalTokenIDs[pc.file]
		if len(ids) < pc.off+48 {
			t.Fatalf("train-report.json: %s has %d eval tokens", pc.file, len(ids))
		}
		beds = append(beds, trainedPrompt{fmt.Sprintf("%s@%d", pc.file, pc.off), ids[pc.off : pc.off+48]})
	}
	return target, draft, beds
}

// TestQuantizedTargetAsDraft: the trained target drafting for itself in another
// quantization (target-q4_k_m for target-q8_0: the same weights) is a high-acceptance
// bed with real weights: greedy identity holds at every depth tried, and most drafted
// tokens are accepted (specbench over the 80 recorded prompts: 0.965 at depth 1, 0.857 at
// depth 8).
func TestQuantizedTargetAsDraft(t *testing.T) {
	const n = 32
	target, draft, beds := trainedBed(t, "target-q4_k_m.gguf")
	drafted, accepted := 0, 0
	for _, bed := range beds {
		plain := specRun(t, target, nil, backend.KVF16, false, 0, bed.prompt, n)
		for _, d := range []int{1, 4} {
			r := specRun(t, target, draft, backend.KVF16, false, d, bed.prompt, n)
			if !slices.Equal(r.Tokens, plain.Tokens) {
				t.Fatalf("%s depth %d: got %v, want %v", bed.name, d, r.Tokens, plain.Tokens)
			}
			if d == 1 {
				drafted += r.Spec.Drafted
				accepted += r.Spec.Accepted
			}
		}
	}
	if a := float64(accepted) / float64(drafted); a < 0.85 {
		t.Fatalf("depth-1 acceptance %.3f (%d of %d), want ≥ 0.85 for the same weights in another quantization", a, accepted, drafted)
	} else {
		t.Logf("depth-1 acceptance %.3f (%d of %d)", a, accepted, drafted)
	}
}
