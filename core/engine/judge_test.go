package engine

import (
	"math"
	"testing"

	"github.com/minfer/minfer/core/backend"
)

// TestJudgeCandidateOrder: the engine's host-side candidates, argmax and log-sum-exp
// follow the backend contract (sdk.RanksBefore, backend.SpecialLSE) on the rows
// where a copy of the rule drifted: NaN ranks below every number ([NaN, 1, 2] gives
// ids [2, 1], where the engine's own top-k once gave [0, 2]), and rows of ±Inf or with
// a part of only −Inf have the contract's normaliser, not NaN.
func TestJudgeCandidateOrder(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	t.Run("top logits", func(t *testing.T) {
		got := topLogits([]float32{nan, 1, 2}, 2)
		if len(got) != 2 || got[0].ID != 2 || got[1].ID != 1 {
			t.Fatalf("got %+v, want ids [2 1]", got)
		}
	})
	t.Run("argmax", func(t *testing.T) {
		for _, row := range [][]float32{{nan, 1, 2}, {nan, -5}, {3, 3, nan}} {
			if id, _ := argmaxProb(row); int(id) != backend.Argmax(row) {
				t.Errorf("%v: got %d, want %d", row, id, backend.Argmax(row))
			}
		}
	})
	large := func(f func(row []float32)) []float32 { // split over parts (≥ 2 × 2^14 values)
		row := make([]float32, 1<<16)
		for i := range row {
			row[i] = float32(i%97) / 10
		}
		f(row)
		return row
	}
	for _, tc := range []struct {
		name string
		row  []float32
	}{
		{"NaN", []float32{1, nan, 2}},
		{"+Inf", []float32{1, inf, 2}},
		{"all -Inf", []float32{-inf, -inf}},
		{"large +Inf", large(func(r []float32) { r[40000] = inf })},
		{"large NaN", large(func(r []float32) { r[7] = nan })},
		{"large all -Inf", large(func(r []float32) {
			for i := range r {
				r[i] = -inf
			}
		})},
		{"large, a part of only -Inf", large(func(r []float32) {
			for i := range 1 << 15 {
				r[i] = -inf
			}
		})},
	} {
		t.Run("lse "+tc.name, func(t *testing.T) {
			m, lse := maxLSE(tc.row)
			wm, wl := backend.MaxLSE(tc.row)
			if math.Float32bits(m) != math.Float32bits(wm) {
				t.Errorf("max: got %v, want %v", m, wm)
			}
			g := float64(lse)
			if !(math.IsNaN(g) && math.IsNaN(wl)) && g != wl && !(math.Abs(g-wl) <= 1e-5*math.Abs(wl)) {
				t.Errorf("lse: got %v, want %v", g, wl)
			}
		})
	}
}
