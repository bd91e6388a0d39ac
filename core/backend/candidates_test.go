package backend

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/minfer/minfer/sdk"
)

var (
	nan    = float32(math.NaN())
	inf    = float32(math.Inf(1))
	negInf = float32(math.Inf(-1))
	negZ   = float32(math.Copysign(0, -1))
)

// TestCandidateOrder: the order on hand-made rows (NaN below every number, −Inf
// included; ties and ±0 by id; NaNs by id), through TopKRow's two paths, SortCandidates
// and Argmax.
func TestCandidateOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		row  []float32
		want []int32 // the whole order
	}{
		{"NaN first in the row", []float32{nan, 1, 2}, []int32{2, 1, 0}},
		{"NaN below -Inf", []float32{negInf, nan, -3}, []int32{2, 0, 1}},
		{"NaNs by id", []float32{nan, 0, nan, nan}, []int32{1, 0, 2, 3}},
		{"only NaN", []float32{nan, nan}, []int32{0, 1}},
		{"ties by id", []float32{1, 2, 2, 1, 2}, []int32{1, 2, 4, 0, 3}},
		{"+0 equals -0", []float32{negZ, 0, negZ, -1}, []int32{0, 1, 2, 3}},
		{"+Inf", []float32{3, inf, nan, inf}, []int32{1, 3, 0, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.row)
			idx := make([]int32, n)
			SortCandidates(tc.row, idx)
			if !slices.Equal(idx, tc.want) {
				t.Errorf("SortCandidates: got %v, want %v", idx, tc.want)
			}
			for k := 1; k <= n; k++ {
				ids, vals := make([]int32, k), make([]float32, k)
				TopKRow(tc.row, ids, vals)
				if !slices.Equal(ids, tc.want[:k]) {
					t.Errorf("TopKRow k=%d: got %v, want %v", k, ids, tc.want[:k])
				}
				for j, id := range ids {
					if math.Float32bits(vals[j]) != math.Float32bits(tc.row[id]) {
						t.Errorf("TopKRow k=%d: value %d is %v, want row[%d] = %v", k, j, vals[j], id, tc.row[id])
					}
				}
			}
			if got := Argmax(tc.row); got != int(tc.want[0]) {
				t.Errorf("Argmax: got %d, want %d", got, tc.want[0])
			}
			for x := range n {
				for y := range n {
					bx, by := sdk.RanksBefore(tc.row[x], int32(x), tc.row[y], int32(y)), sdk.RanksBefore(tc.row[y], int32(y), tc.row[x], int32(x))
					if x == y && bx || x != y && bx == by {
						t.Errorf("RanksBefore of columns %d and %d: %v and %v, want exactly one true", x, y, bx, by)
					}
				}
			}
		})
	}
}

// TestTopKRowPaths: the insertion path (k ≤ 64) and the sorting path agree with
// SortCandidates on random rows full of ties, NaN and infinities.
func TestTopKRowPaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	specials := []float32{nan, inf, negInf, 0, negZ}
	for it := range 50 {
		n := 1 + rng.IntN(300)
		row := make([]float32, n)
		for i := range row {
			if rng.IntN(6) == 0 {
				row[i] = specials[rng.IntN(len(specials))]
			} else {
				row[i] = float32(rng.IntN(20)) / 4
			}
		}
		want := make([]int32, n)
		SortCandidates(row, want)
		for _, k := range []int{1, min(2, n), min(64, n), min(65, n), n} {
			ids, vals := make([]int32, k), make([]float32, k)
			TopKRow(row, ids, vals)
			if !slices.Equal(ids, want[:k]) {
				t.Fatalf("row %d (n %d) k=%d: got %v, want %v", it, n, k, ids, want[:k])
			}
		}
		if got := Argmax(row); got != int(want[0]) {
			t.Fatalf("row %d: Argmax %d, want %d", it, got, want[0])
		}
	}
}

func TestMaxLSE(t *testing.T) {
	for _, tc := range []struct {
		name    string
		row     []float32
		max     float32
		lse     float64
		special bool
	}{
		{"numbers", []float32{0, -1, 0, -2}, 0, math.Log(2 + math.Exp(-1) + math.Exp(-2)), false},
		{"one number", []float32{-7}, -7, -7, false},
		{"NaN", []float32{1, nan, 2}, 2, math.NaN(), true},
		{"only NaN", []float32{nan}, negInf, math.NaN(), true},
		{"+Inf", []float32{1, inf}, inf, math.Inf(1), true},
		{"+Inf and NaN", []float32{inf, nan}, inf, math.NaN(), true},
		{"all -Inf", []float32{negInf, negInf}, negInf, math.Inf(-1), true},
		{"-Inf and a number", []float32{negInf, 5}, 5, 5, false},
		{"large values", []float32{1000, 1000}, 1000, 1000 + math.Log(2), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, lse := MaxLSE(tc.row)
			if math.Float32bits(m) != math.Float32bits(tc.max) {
				t.Errorf("max: got %v, want %v", m, tc.max)
			}
			if !(math.IsNaN(lse) && math.IsNaN(tc.lse)) && math.Abs(lse-tc.lse) > 1e-12*max(1, math.Abs(tc.lse)) && lse != tc.lse {
				t.Errorf("lse: got %v, want %v", lse, tc.lse)
			}
			rm, rn := RowMax(tc.row)
			if _, ok := SpecialLSE(rm, rn); ok != tc.special {
				t.Errorf("SpecialLSE: ok %v, want %v", ok, tc.special)
			}
		})
	}
}
