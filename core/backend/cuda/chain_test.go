//go:build cuda

package cuda_test

import (
	"math"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
)

// TestDraftChainGPU: on the GPU, a draft chain of d steps (each step's token picked
// and fed on the device, graphs replayed back to back) gives the tokens, logits and
// log-sum-exps of d steps whose picks the host reads and feeds (RowStats, k = 1),
// bitwise, and leaves the cache as they do, on the synthetic models of every
// architecture, with graphs and without (MINFER_NO_GRAPHS=1).
func TestDraftChainGPU(t *testing.T) {
	for _, mode := range []string{"", "1"} {
		t.Run("MINFER_NO_GRAPHS="+mode, func(t *testing.T) {
			t.Setenv("MINFER_NO_GRAPHS", mode)
			g := open(t)
			defer g.Close()
			for _, arch := range []string{"llama", "qwen2", "qwen3"} {
				for _, q := range []string{"q4_k_m", "q8_0"} {
					m := loadOn(t, g, testdata(t, "models", "synthetic", "synth-"+arch+"-"+q+".gguf"))
					for _, d := range []int{1, 2, 4, 7, 8} {
						for _, catchUp := range []int{1, 3} {
							gpuChain(t, m, d, catchUp)
						}
					}
					m.Close()
				}
			}
		})
	}
}

func gpuChain(t *testing.T, m *model.Model, d, catchUp int) {
	t.Helper()
	v := m.Params.Vocab
	prefix := []int32{1, int32(450 % v), int32(1996 % v), int32(1354 % v)}
	ids := make([]int32, catchUp)
	for i := range ids {
		ids[i] = int32((i*7919 + 13) % v)
	}
	newKV := func() *kv.Cache {
		c, err := m.NewKV(64, backend.KVF16)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Forward(prefix, c, false); err != nil {
			t.Fatal(err)
		}
		return c
	}
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
	// twice: the second chain replays the graphs the first captured
	for rep := range 2 {
		if rep == 1 {
			if err := c.Truncate(len(prefix)); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.DraftChain(ids, c, d, &got); err != nil {
			t.Fatalf("d %d, catch-up %d: %v", d, catchUp, err)
		}
		for i := range d {
			if got.IDs[i] != want.IDs[i] || math.Float32bits(got.Vals[i]) != math.Float32bits(want.Vals[i]) ||
				math.Float32bits(got.LSE[i]) != math.Float32bits(want.LSE[i]) {
				t.Fatalf("rep %d, d %d, catch-up %d, step %d: got (%d, %v, %v), want (%d, %v, %v)", rep, d, catchUp, i,
					got.IDs[i], got.Vals[i], got.LSE[i], want.IDs[i], want.Vals[i], want.LSE[i])
			}
		}
	}
	if c.Len() != ref.Len() {
		t.Fatalf("d %d: cache holds %d entries, the per-step path's %d", d, c.Len(), ref.Len())
	}
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
