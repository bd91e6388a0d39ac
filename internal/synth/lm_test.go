package synth

import (
	"strings"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
)

func loadSynth(t *testing.T, b backend.Backend, args []string, typ string) *model.Model {
	t.Helper()
	f, err := gguf.Open(writeSynthFile(t, append(args, "--type", typ)...))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(b, f, model.Options{Name: typ})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); f.Close() })
	return m
}

// argmaxNext runs tok through m at the end of c and returns the greedy next token.
func argmaxNext(t *testing.T, m *model.Model, c *kv.Cache, tok int32, buf []float32) int32 {
	t.Helper()
	l, err := m.Forward([]int32{tok}, c, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ReadLogits(l, buf); err != nil {
		t.Fatal(err)
	}
	best := 0
	for i, v := range buf {
		if v > buf[best] {
			best = i
		}
	}
	return int32(best)
}

// lmRun decodes greedily with target from each start for n tokens. It returns the
// fraction of steps whose token is the bigram successor of the one before (under lm),
// the number of distinct tokens, and for each draft the fraction of steps where the
// draft, fed the same tokens, predicts the target's token: a depth-1 round's acceptance.
func lmRun(t *testing.T, lm *backbone, target *model.Model, drafts []*model.Model, starts []int32, n int) (follow float64, distinct int, agree []float64) {
	t.Helper()
	buf := make([]float32, target.Params.Vocab)
	agree = make([]float64, len(drafts))
	seen := map[int32]bool{}
	steps := 0
	for _, start := range starts {
		newKV := func(m *model.Model) *kv.Cache {
			c, err := m.NewKV(n+1, backend.KVF16)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		tc := newKV(target)
		dcs := make([]*kv.Cache, len(drafts))
		for i, d := range drafts {
			dcs[i] = newKV(d)
		}
		tok := start
		for range n {
			next := argmaxNext(t, target, tc, tok, buf)
			for i, d := range drafts {
				if argmaxNext(t, d, dcs[i], tok, buf) == next {
					agree[i]++
				}
			}
			if lm != nil && lm.successor(int(tok)) == int(next) {
				follow++
			}
			seen[next] = true
			steps++
			tok = next
		}
	}
	for i := range agree {
		agree[i] /= float64(steps)
	}
	return follow / float64(steps), len(seen), agree
}

// TestSynthLMConfident: with --init lm (the default) a synthetic F16 model decides most
// tokens by its bigram backbone with a margin that survives quantization, so a Q8_0 and
// a Q4_0 copy of it are real drafts (high acceptance) while its output still varies
// with context; with --init gaussian the same Q4_0 copy agrees far less often, which is
// why lm exists.
func TestSynthLMConfident(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	starts := []int32{300, 1000, 1500}
	const n = 40
	for _, fam := range []string{"qwen2", "llama"} { // tied and untied output
		t.Run(fam, func(t *testing.T) {
			args := append(famArgs(fam), "--seed", "2")
			fl := map[string]string{"type": "f16", "seed": "2"}
			for k, v := range synthFamilies[fam] {
				fl[k] = v
			}
			lm := mustPlan(t, "", fl).lm
			if lm == nil {
				t.Fatal("default plan has no lm structure")
			}
			target := loadSynth(t, b, args, "f16")
			drafts := []*model.Model{loadSynth(t, b, args, "q8_0"), loadSynth(t, b, args, "q4_0")}
			follow, distinct, agree := lmRun(t, lm, target, drafts, starts, n)
			t.Logf("lm: follows its bigram on %.3f of steps, %d distinct tokens; Q8_0 agrees %.3f, Q4_0 %.3f",
				follow, distinct, agree[0], agree[1])
			if follow < 0.85 || follow > 0.995 {
				t.Errorf("bigram followed on %.3f of steps, want 0.85-0.995 (confident, but context still decides some)", follow)
			}
			if distinct < len(starts)*n/2 {
				t.Errorf("%d distinct tokens in %d steps: output is degenerate", distinct, len(starts)*n)
			}
			if agree[0] < 0.97 || agree[1] < 0.9 {
				t.Errorf("agreement with the F16 target: Q8_0 %.3f (want ≥ 0.97), Q4_0 %.3f (want ≥ 0.9)", agree[0], agree[1])
			}

			gargs := append(args, "--init", "gaussian")
			_, _, gagree := lmRun(t, nil, loadSynth(t, b, gargs, "f16"), []*model.Model{loadSynth(t, b, gargs, "q4_0")}, starts, n)
			t.Logf("gaussian: Q4_0 agrees %.3f", gagree[0])
			if gagree[0] >= 0.8 {
				t.Errorf("gaussian Q4_0 agreement %.3f: expected well under lm's", gagree[0])
			}
		})
	}
}

// TestSynthLMCodes checks the code layout: every ordinary token has a distinct code,
// control/unused tokens have none, and shapes too small for codes are an error that
// names --init gaussian.
func TestSynthLMCodes(t *testing.T) {
	o := Options{Arch: "qwen2", NEmbd: 256, NLayer: 2, NFF: 704, NVocab: 1000, Seed: 1}
	types := make([]int64, o.NVocab)
	for i := range types {
		types[i] = tokNormal
	}
	types[0], types[999], types[500] = tokControl, tokUnused, tokUserDefined
	lm, err := newBackbone(o, types)
	if err != nil {
		t.Fatal(err)
	}
	if lm.parts != 2 || lm.k != 32 || lm.coded != 997 {
		t.Fatalf("parts %d, k %d, coded %d; want 2, 32 (32² ≥ 997), 997", lm.parts, lm.k, lm.coded)
	}
	seen := map[int32]bool{}
	for tok, c := range lm.code {
		switch {
		case types[tok] != tokNormal:
			if c != -1 {
				t.Errorf("token %d (type %d) has code %d", tok, types[tok], c)
			}
		case c < 0 || seen[c]:
			t.Errorf("token %d: code %d missing or repeated", tok, c)
		}
		seen[c] = true
	}
	row := make([]float32, o.NEmbd)
	lm.tokenRow(7, row)
	if row[0] != float32(lm.beta) || row[lm.digitDim(0, int(lm.code[7])%lm.k)] != float32(lm.kappa) ||
		row[lm.digitDim(1, int(lm.code[7])/lm.k)] != float32(lm.kappa) {
		t.Errorf("token 7's row does not carry β at 0 and κ at its two digits")
	}
	// more parts when n_embd is small: 5 parts of 5 digits cover 3125 ≥ 3000 tokens in 26 dims
	small, err := newBackbone(Options{NEmbd: 32, NLayer: 1, NFF: 64, NVocab: 3000}, nil)
	if err != nil || small.parts*small.k+1 > 32 {
		t.Fatalf("n_embd 32: %+v, %v", small, err)
	}
	if _, err := newBackbone(Options{NEmbd: 8, NLayer: 1, NFF: 64, NVocab: 100000}, nil); err == nil || !strings.Contains(err.Error(), "--init gaussian") {
		t.Fatalf("n_embd 8, 100000 tokens: got %v, want an error naming --init gaussian", err)
	}
}
