package modeltest

import (
	"math"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
)

// DraftChain checks model.DraftChain on m after a 5-token prefix: a chain of d steps
// after a catch-up of catchUp tokens gives the tokens, logits and log-sum-exps of d
// single steps whose picks the host reads (RowStats, k = 1) and feeds, bitwise — twice
// in a row on the same cache, so that on a backend with graphs the second chain
// replays the graphs the first captured — and leaves the cache as those steps do (the
// next forward's logits are the same bits).
func DraftChain(t *testing.T, m *model.Model, kt backend.KVType, d, catchUp int) {
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
