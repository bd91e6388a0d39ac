package model_test

import (
	"errors"
	"math"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/golden"
)

// TestDraftChainCPU: a draft chain of d steps gives the tokens, logits and
// log-sum-exps of d single steps with a RowStats (k = 1) read between them, bitwise,
// and leaves the cache as they do (the next forward's logits are the same bits), for
// every architecture, catch-ups of one and several tokens, and both KV cache types.
func TestDraftChainCPU(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	for _, file := range []string{"synthetic/synth-llama-q4_0", "synthetic/synth-qwen2-q4_k_m", "synthetic/synth-qwen3-q8_0"} {
		m := golden.LoadModel(t, b, "models/"+file+".gguf", "draft")
		for _, kt := range []backend.KVType{backend.KVF16, backend.KVQ8_0} {
			t.Run(file+"/"+kt.String(), func(t *testing.T) {
				for _, d := range []int{1, 2, 3, 5, 8, 11} {
					for _, catchUp := range []int{1, 4} {
						checkChain(t, m, kt, d, catchUp)
					}
				}
			})
		}
	}
}

// checkChain compares DraftChain with the per-step path after a 5-token prefix.
func checkChain(t *testing.T, m *model.Model, kt backend.KVType, d, catchUp int) {
	t.Helper()
	v := m.Params.Vocab
	prefix := []int32{1, int32(17 % v), int32(300 % v), int32(41 % v), int32(5 % v)}
	ids := make([]int32, catchUp)
	for i := range ids {
		ids[i] = int32((i*7919 + 13) % v)
	}
	newKV := func() *kv.Cache {
		c, err := m.NewKV(64, kt)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Forward(prefix, c, false); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// want: d forwards, each step's pick read back and fed by the host
	ref := newKV()
	defer ref.Close()
	var want model.Chain
	var st model.RowStats
	in := ids
	for range d {
		l, err := m.Forward(in, ref, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.RowStats(l, 1, nil, &st); err != nil {
			t.Fatal(err)
		}
		want.IDs, want.Vals, want.LSE = append(want.IDs, st.IDs[0]), append(want.Vals, st.Vals[0]), append(want.LSE, st.LSE[0])
		in = []int32{st.IDs[0]}
	}
	c := newKV()
	defer c.Close()
	var got model.Chain
	if err := m.DraftChain(ids, c, d, &got); err != nil {
		t.Fatalf("d %d, catch-up %d: %v", d, catchUp, err)
	}
	for i := range d {
		if got.IDs[i] != want.IDs[i] || math.Float32bits(got.Vals[i]) != math.Float32bits(want.Vals[i]) ||
			math.Float32bits(got.LSE[i]) != math.Float32bits(want.LSE[i]) {
			t.Fatalf("d %d, catch-up %d, step %d: got (%d, %v, %v), want (%d, %v, %v)", d, catchUp, i,
				got.IDs[i], got.Vals[i], got.LSE[i], want.IDs[i], want.Vals[i], want.LSE[i])
		}
	}
	if c.Len() != ref.Len() {
		t.Fatalf("d %d: cache holds %d entries, the per-step path's %d", d, c.Len(), ref.Len())
	}
	// the caches hold the same entries: the next forward gives the same bits
	next := []int32{want.IDs[d-1]}
	rowOf := func(c *kv.Cache) []float32 {
		l, err := m.Forward(next, c, false)
		if err != nil {
			t.Fatal(err)
		}
		row := make([]float32, v)
		if err := m.ReadLogits(l, row); err != nil {
			t.Fatal(err)
		}
		return row
	}
	gotRow, wantRow := rowOf(c), rowOf(ref)
	for j := range gotRow {
		if math.Float32bits(gotRow[j]) != math.Float32bits(wantRow[j]) {
			t.Fatalf("d %d, catch-up %d: after the chain, logit %d = %v, want %v", d, catchUp, j, gotRow[j], wantRow[j])
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
