package backendtest

import (
	"math"
	"slices"
	"testing"

	"github.com/minfer/minfer/core/backend"
)

// testRowStats checks a backend.RowStatser (skipped for a backend without one) against
// its own TopK (held to the candidate order by testTopK) and backend.MaxLSE (max and a
// float64 log-sum-exp), on rows with ties, NaN, ±Inf, all −Inf and a vocabulary-sized
// row, for k = 0 (no candidates) up to 100; that row r of an nt-row call has the bits of
// a 1-row call; and that a bad k or picked column is an error.
func testRowStats(t *testing.T, newBackend func() backend.Backend, opts Options) {
	e := newEnv(t, newBackend, opts.seed()+19)
	rs, ok := e.b.(backend.RowStatser)
	if !ok {
		t.Skip("the backend computes no row statistics")
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	mk := func(n int, f func(row []float32)) []float32 {
		row := e.normals(n, 3)
		if f != nil {
			f(row)
		}
		return row
	}
	ties := func(row []float32) { // a tied best value across chunks, and tied runners-up
		for range 40 {
			row[e.rng.IntN(len(row))] = 12.5
			row[e.rng.IntN(len(row))] = 11
		}
	}
	fill := func(v float32, keep func(i int) bool) func(row []float32) {
		return func(row []float32) {
			for i := range row {
				if !keep(i) {
					row[i] = v
				}
			}
		}
	}
	none := func(int) bool { return false }
	for _, tc := range []struct {
		name string
		n    int
		rows [][]float32
	}{
		{"vocab 151936", 151936, [][]float32{mk(151936, ties), mk(151936, nil), mk(151936, func(r []float32) { r[151935] = 30 })}},
		{"one part", 1000, [][]float32{mk(1000, ties), mk(1000, func(r []float32) { r[17], r[400] = nan, nan }), mk(1000, func(r []float32) { r[3] = inf })}},
		{"uneven parts", 8195, [][]float32{
			mk(8195, ties),
			mk(8195, fill(float32(math.Inf(-1)), none)),
			mk(8195, fill(float32(math.Inf(-1)), func(i int) bool { return i == 8194 })), // one number at the end
			mk(8195, fill(nan, func(i int) bool { return i%1000 == 7 })),                 // fewer numbers than k
		}},
		{"all equal", 5000, [][]float32{mk(5000, fill(-1.25, none))}},
	} {
		nt, n := len(tc.rows), tc.n
		flat := slices.Concat(tc.rows...)
		lg := e.f32(flat)
		pick := make([]int32, nt)
		for r := range pick {
			pick[r] = int32(e.rng.IntN(n))
		}
		pick[0] = -1
		for _, k := range []int{0, 1, 5, 40, 64, 100} {
			t.Run(name("%s/k=%d", tc.name, k), func(t *testing.T) {
				ids, vals := make([]int32, nt*k), make([]float32, nt*k)
				maxv, lse, picked := make([]float32, nt), make([]float32, nt), make([]float32, nt)
				if err := rs.RowStats(lg, nt, n, k, pick, ids, vals, maxv, lse, picked); err != nil {
					t.Fatal(err)
				}
				if k > 0 {
					wi, wv := make([]int32, nt*k), make([]float32, nt*k)
					if err := e.b.TopK(lg, nt, n, k, wi, wv); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(ids, wi) || !slices.Equal(bitsOf(vals), bitsOf(wv)) {
						t.Errorf("candidates: got ids %v… vals %v…, want (TopK) %v… %v…",
							ids[:min(8, len(ids))], vals[:min(8, len(vals))], wi[:min(8, len(wi))], wv[:min(8, len(wv))])
					}
				}
				for r, row := range tc.rows {
					wm, wl := backend.MaxLSE(row)
					if math.Float32bits(maxv[r]) != math.Float32bits(wm) {
						t.Errorf("row %d: got max %v, want %v", r, maxv[r], wm)
					}
					gl := float64(lse[r])
					switch {
					case math.IsNaN(wl) || math.IsInf(wl, 0):
						if !(math.IsNaN(wl) && math.IsNaN(gl)) && gl != wl {
							t.Errorf("row %d: got lse %v, want %v", r, gl, wl)
						}
					case math.Abs(gl-wl) > lseTol(wl):
						t.Errorf("row %d: got lse %v, want %v (|Δ| %.3g > %.3g)", r, gl, wl, math.Abs(gl-wl), lseTol(wl))
					}
					wp := float32(0)
					if pick[r] >= 0 {
						wp = row[pick[r]]
					}
					if math.Float32bits(picked[r]) != math.Float32bits(wp) {
						t.Errorf("row %d: got picked %v, want %v (column %d)", r, picked[r], wp, pick[r])
					}
					// Row identity: the row alone gives the same bits.
					i1, v1 := make([]int32, k), make([]float32, k)
					m1, l1, p1 := make([]float32, 1), make([]float32, 1), make([]float32, 1)
					one := e.f32(row)
					err := rs.RowStats(one, 1, n, k, pick[r:r+1], i1, v1, m1, l1, p1)
					e.b.Free(one)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(i1, ids[r*k:(r+1)*k]) || !slices.Equal(bitsOf(v1), bitsOf(vals[r*k:(r+1)*k])) ||
						bitsOf(m1)[0] != math.Float32bits(maxv[r]) || bitsOf(l1)[0] != math.Float32bits(lse[r]) || bitsOf(p1)[0] != math.Float32bits(picked[r]) {
						t.Errorf("row %d: a 1-row call differs from row %d of the %d-row call (lse %v vs %v)", r, r, nt, l1[0], lse[r])
					}
				}
			})
		}
		e.b.Free(lg)
	}
	t.Run("errors", func(t *testing.T) {
		lg := e.f32(make([]float32, 2*10))
		defer e.b.Free(lg)
		ids, vals := make([]int32, 40), make([]float32, 40)
		m, l, p := make([]float32, 2), make([]float32, 2), make([]float32, 2)
		if err := rs.RowStats(lg, 2, 10, 11, []int32{0, 0}, ids, vals, m, l, p); err == nil {
			t.Errorf("k 11 of 10 columns: got no error")
		}
		if err := rs.RowStats(lg, 2, 10, 1, []int32{0, 10}, ids, vals, m, l, p); err == nil {
			t.Errorf("picked column 10 of 10: got no error")
		}
		if err := rs.RowStats(lg, 2, 10, 1, []int32{-1, 9}, ids, vals, m, l, p); err != nil {
			t.Errorf("valid call after errors: %v", err)
		}
	})
}

// lseTol bounds |lse − the float64 reference|: a backend sums n terms ≤ 1 in float32
// in a fixed tree (a relative error of a few 1e-6 at most), then rounds max + log(sum)
// at the result's magnitude.
func lseTol(want float64) float64 { return 1e-5 * max(1, math.Abs(want)) }

func bitsOf(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}
