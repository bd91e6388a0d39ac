package model_test

import (
	"errors"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/golden"
	"github.com/minfer/minfer/internal/modeltest"
)

// TestDraftChainCPU: a draft chain of d steps gives the tokens, logits and
// log-sum-exps of d single steps with a RowStats (k = 1) read between them, bitwise,
// and leaves the cache as they do (modeltest.DraftChain), for every architecture,
// catch-ups of one and several tokens, and both KV cache types.
func TestDraftChainCPU(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	for _, file := range []string{"synthetic/synth-llama-q4_0", "synthetic/synth-qwen2-q4_k_m", "synthetic/synth-qwen3-q8_0"} {
		m := golden.LoadModel(t, b, "models/"+file+".gguf", "draft")
		for _, kt := range []backend.KVType{backend.KVF16, backend.KVQ8_0} {
			t.Run(file+"/"+kt.String(), func(t *testing.T) {
				for _, d := range []int{1, 2, 3, 5, 8, 11} {
					for _, catchUp := range []int{1, 4} {
						modeltest.DraftChain(t, m, kt, d, catchUp)
					}
				}
			})
		}
	}
}

// TestDraftChainErrors: a chain that does not fit the cache, or of a bad token, is
// refused with the cache unchanged.
func TestDraftChainErrors(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	m := golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q4_0.gguf", "draft")
	c, err := m.NewKV(8, backend.KVF16)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := m.Forward([]int32{1, 2, 3}, c, false); err != nil {
		t.Fatal(err)
	}
	var ch model.Chain
	for _, tc := range []struct {
		name string
		ids  []int32
		d    int
		full bool
	}{
		{"too deep", []int32{4}, 6, true}, // 3 + 1 + 5 entries > 8
		{"bad token", []int32{int32(m.Params.Vocab)}, 2, false},
		{"no tokens", nil, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := m.DraftChain(tc.ids, c, tc.d, &ch)
			if err == nil {
				t.Fatal("got no error")
			}
			if tc.full && !errors.Is(err, kv.ErrFull) {
				t.Errorf("got %v, want a context-full error", err)
			}
			if c.Len() != 3 {
				t.Errorf("cache holds %d entries after the failed chain, want 3", c.Len())
			}
		})
	}
	if err := m.DraftChain([]int32{4}, c, 5, &ch); err != nil { // exactly fits
		t.Fatalf("a chain that fits: %v", err)
	}
	if c.Len() != 8 {
		t.Errorf("cache holds %d entries, want 8", c.Len())
	}
}
