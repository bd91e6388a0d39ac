//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/minfer/minfer/core/backend/cpu"
)

// rowStatsWant is the host reference of one row: max (NaN ignored) and log Σ exp in
// float64, with RowStats' special cases.
func rowStatsWant(row []float32) (float32, float64) {
	m, nan := float32(math.Inf(-1)), false
	for _, x := range row {
		if x > m {
			m = x
		}
		nan = nan || x != x
	}
	switch {
	case nan:
		return m, math.NaN()
	case math.IsInf(float64(m), 0):
		return m, float64(m)
	}
	var s float64
	for _, x := range row {
		s += math.Exp(float64(x) - float64(m))
	}
	return m, float64(m) + math.Log(s)
}

// lseTol is the bound on |lse − float64 reference|: the device sums n terms ≤ 1 in
// float32 (about 16 serial additions per thread, then two 32-way trees, then the
// parts), a relative error of the sum of a few 1e-6 at most, plus the rounding of
// max + log(sum) at the result's magnitude.
func lseTol(want float64) float64 { return 1e-5 * max(1, math.Abs(want)) }

// TestRowStatsVsHost compares RowStats with the CPU backend's TopK (the contract's
// reference for candidates, ties and NaN) and a float64 log-sum-exp, on rows with ties,
// NaN, ±Inf and a vocabulary-sized row, for k on the device (≤ 64) and beyond (the host
// fallback); and checks that row r of an nt-row call has the bits of a 1-row call.
func TestRowStatsVsHost(t *testing.T) {
	g := open(t)
	defer g.Close()
	c := cpu.New(cpu.Options{})
	defer c.Close()
	rng := rand.New(rand.NewPCG(11, 12))
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	type tcase struct {
		name string
		n    int
		rows [][]float32
	}
	mk := func(n int, f func(row []float32)) []float32 {
		row := normals(rng, n, 3)
		if f != nil {
			f(row)
		}
		return row
	}
	ties := func(row []float32) { // a tied best value across chunks, and tied runners-up
		for i := 0; i < 40; i++ {
			row[rng.IntN(len(row))] = 12.5
			row[rng.IntN(len(row))] = 11
		}
	}
	nans := func(row []float32) {
		for i := 0; i < 30; i++ {
			row[rng.IntN(len(row))] = nan
		}
	}
	cases := []tcase{
		{"vocab 151936", 151936, [][]float32{mk(151936, ties), mk(151936, nil), mk(151936, func(r []float32) { r[151935] = 30 })}},
		{"one part", 1000, [][]float32{mk(1000, ties), mk(1000, nans), mk(1000, func(r []float32) { r[3] = inf })}},
		{"uneven parts", 8195, [][]float32{mk(8195, ties), mk(8195, func(r []float32) {
			for i := range r {
				r[i] = float32(math.Inf(-1))
			}
		}), mk(8195, func(r []float32) { // fewer numbers than k: NaNs fill the candidates, by id
			for i := range r {
				if i%1000 != 7 {
					r[i] = nan
				}
			}
		})}},
		{"all equal", 5000, [][]float32{mk(5000, func(r []float32) {
			for i := range r {
				r[i] = -1.25
			}
		})}},
	}
	for _, tc := range cases {
		nt, n := len(tc.rows), tc.n
		flat := slices.Concat(tc.rows...)
		pick := make([]int32, nt)
		for r := range pick {
			pick[r] = int32(rng.IntN(n))
		}
		pick[0] = -1
		for _, k := range []int{0, 1, 5, 40, 64, 100} {
			t.Run(fmt.Sprintf("%s/k=%d", tc.name, k), func(t *testing.T) {
				ids, vals := make([]int32, nt*k), make([]float32, nt*k)
				maxv, lse, picked := make([]float32, nt), make([]float32, nt), make([]float32, nt)
				lg := mustF32(t, g, flat)
				defer g.Free(lg)
				if err := g.RowStats(lg, nt, n, k, pick, ids, vals, maxv, lse, picked); err != nil {
					t.Fatal(err)
				}
				if k > 0 {
					wi, wv := make([]int32, nt*k), make([]float32, nt*k)
					if err := c.TopK(mustF32(t, c, flat), nt, n, k, wi, wv); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(ids, wi) || !slices.Equal(bitsOf(vals), bitsOf(wv)) {
						t.Errorf("candidates: got ids %v… vals %v…, want %v… %v…",
							ids[:min(8, len(ids))], vals[:min(8, len(vals))], wi[:min(8, len(wi))], wv[:min(8, len(wv))])
					}
				}
				for r, row := range tc.rows {
					wm, wl := rowStatsWant(row)
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
					one := mustF32(t, g, row)
					err := g.RowStats(one, 1, n, k, pick[r:r+1], i1, v1, m1, l1, p1)
					g.Free(one)
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
	}
}

// TestRowStatsErrors: bad k or picked column is an error, not a crash.
func TestRowStatsErrors(t *testing.T) {
	g := open(t)
	defer g.Close()
	lg := mustF32(t, g, make([]float32, 2*10))
	out := func() ([]int32, []float32, []float32, []float32, []float32) {
		return make([]int32, 40), make([]float32, 40), make([]float32, 2), make([]float32, 2), make([]float32, 2)
	}
	ids, vals, m, l, p := out()
	if err := g.RowStats(lg, 2, 10, 11, []int32{0, 0}, ids, vals, m, l, p); err == nil {
		t.Errorf("k 11 of 10 columns: got no error")
	}
	if err := g.RowStats(lg, 2, 10, 1, []int32{0, 10}, ids, vals, m, l, p); err == nil {
		t.Errorf("picked column 10 of 10: got no error")
	}
	if err := g.RowStats(lg, 2, 10, 1, []int32{-1, 9}, ids, vals, m, l, p); err != nil {
		t.Errorf("valid call after errors: %v", err)
	}
}

func bitsOf(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

// BenchmarkRowStats times one RowStats call (launches, synchronisation and the one
// copy back) on Qwen-sized rows, against reading the rows back with ReadF32 — the
// host path's cost before its own max/LSE/top-k pass.
func BenchmarkRowStats(b *testing.B) {
	g := open(b)
	defer g.Close()
	rng := rand.New(rand.NewPCG(13, 14))
	const n = 151936
	for _, nt := range []int{1, 5} {
		lg := mustF32(b, g, normals(rng, nt*n, 3))
		pick := make([]int32, nt)
		for _, k := range []int{1, 40, 64} {
			b.Run(fmt.Sprintf("nt=%d/k=%d", nt, k), func(b *testing.B) {
				ids, vals := make([]int32, nt*k), make([]float32, nt*k)
				maxv, lse, picked := make([]float32, nt), make([]float32, nt), make([]float32, nt)
				for b.Loop() {
					if err := g.RowStats(lg, nt, n, k, pick, ids, vals, maxv, lse, picked); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(fmt.Sprintf("nt=%d/ReadF32", nt), func(b *testing.B) {
			host := make([]float32, nt*n)
			for b.Loop() {
				if err := g.ReadF32(lg, 0, host); err != nil {
					b.Fatal(err)
				}
			}
		})
		g.Free(lg)
	}
}
