//go:build cuda

package cuda_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/minfer/minfer/core/backend"
)

// TestCandidateOrder holds the kernels' ranks_before and rank_key (cuda/kernels: topk
// and rowstats select on the device for k ≤ the tier's TopKMaxK) to the one host rule,
// backend.TopKRow, on rows made of the values where an order can differ: NaN (also in
// column 0, and filling most of a row), ±Inf, ±0 and ties, in rows of one chunk and of a
// vocabulary spread over many; for k beyond TopKMaxK the host fallback answers.
func TestCandidateOrder(t *testing.T) {
	g := open(t)
	defer g.Close()
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negZ := float32(math.Copysign(0, -1))
	specials := []float32{nan, inf, -inf, 0, negZ, 2.5, 2.5}
	rng := rand.New(rand.NewPCG(21, 22))
	rows := func(n int) [][]float32 {
		mixed := make([]float32, n) // a special value every few columns, NaN in column 0
		for i := range mixed {
			mixed[i] = float32(rng.IntN(16)) / 8
			if rng.IntN(4) == 0 {
				mixed[i] = specials[rng.IntN(len(specials))]
			}
		}
		mixed[0] = nan
		mostlyNaN := make([]float32, n) // fewer numbers than k: NaNs fill the candidates
		for i := range mostlyNaN {
			mostlyNaN[i] = nan
			if i%(n/7+1) == 3 {
				mostlyNaN[i] = -inf
			}
		}
		zeros := make([]float32, n) // ±0 tie: by id, whatever the sign
		for i := range zeros {
			zeros[i] = -1
			if i%5 == 0 {
				zeros[i] = [2]float32{0, negZ}[rng.IntN(2)]
			}
		}
		return [][]float32{{nan, 1, 2}, mixed, mostlyNaN, zeros} // the first is padded with 0
	}
	for _, n := range []int{3, 1000, 151936} {
		rs := rows(n)
		rs[0] = append(rs[0], make([]float32, n-len(rs[0]))...)
		nt := len(rs)
		flat := slices.Concat(rs...)
		lg := mustF32(t, g, flat)
		for _, k := range []int{1, 2, 3, 5, 40, 64, 100} {
			if k > n {
				continue
			}
			ids, vals := make([]int32, nt*k), make([]float32, nt*k)
			if err := g.TopK(lg, nt, n, k, ids, vals); err != nil {
				t.Fatal(err)
			}
			sids, svals := make([]int32, nt*k), make([]float32, nt*k)
			maxv, lse, picked := make([]float32, nt), make([]float32, nt), make([]float32, nt)
			if err := g.RowStats(lg, nt, n, k, make([]int32, nt), sids, svals, maxv, lse, picked); err != nil {
				t.Fatal(err)
			}
			for r, row := range rs {
				wi, wv := make([]int32, k), make([]float32, k)
				backend.TopKRow(row, wi, wv)
				for _, got := range []struct {
					op   string
					ids  []int32
					vals []float32
				}{{"TopK", ids[r*k : (r+1)*k], vals[r*k : (r+1)*k]}, {"RowStats", sids[r*k : (r+1)*k], svals[r*k : (r+1)*k]}} {
					if !slices.Equal(got.ids, wi) || !slices.Equal(bitsOf(got.vals), bitsOf(wv)) {
						t.Errorf("n=%d k=%d row %d: %s gives ids %v… vals %v…, want (backend.TopKRow) %v… %v…", n, k, r, got.op,
							got.ids[:min(8, k)], got.vals[:min(8, k)], wi[:min(8, k)], wv[:min(8, k)])
					}
				}
			}
		}
		g.Free(lg)
	}
}

func bitsOf(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}
