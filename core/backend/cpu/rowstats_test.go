package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestRowStatsThreads: a row's max and log-sum-exp have the same bits whatever the
// thread count (its chunks combine in a fixed order); backendtest checks the values.
func TestRowStatsThreads(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const nt, n = 3, 151936
	rows := make([]float32, nt*n)
	for i := range rows {
		rows[i] = float32(rng.NormFloat64() * 3)
	}
	pick := []int32{-1, 5, 7}
	var want []uint32
	for _, threads := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprintf("threads=%d", threads), func(t *testing.T) {
			b := New(Options{Threads: threads})
			defer b.Close()
			l, err := b.NewF32(nt * n)
			if err != nil {
				t.Fatal(err)
			}
			b.WriteF32(l, 0, rows)
			maxv, lse, picked := make([]float32, nt), make([]float32, nt), make([]float32, nt)
			if err := b.RowStats(l, nt, n, 0, pick, nil, nil, maxv, lse, picked); err != nil {
				t.Fatal(err)
			}
			var got []uint32
			for r := range nt {
				got = append(got, math.Float32bits(maxv[r]), math.Float32bits(lse[r]))
			}
			if want == nil {
				want = got
			}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("row %d: %d threads give max, lse bits %x, %x; one thread %x, %x", i/2, threads,
						got[i/2*2], got[i/2*2+1], want[i/2*2], want[i/2*2+1])
					break
				}
			}
		})
	}
}

// BenchmarkRowStats: one Qwen-sized row (a decode step) and five (a depth-4 verify)
// with k = 1, the greedy sampler's candidates.
func BenchmarkRowStats(b *testing.B) {
	rng := rand.New(rand.NewPCG(23, 24))
	const n = 151936
	be := New(Options{})
	defer be.Close()
	for _, nt := range []int{1, 5} {
		rows := make([]float32, nt*n)
		for i := range rows {
			rows[i] = float32(rng.NormFloat64() * 3)
		}
		l, _ := be.NewF32(nt * n)
		be.WriteF32(l, 0, rows)
		ids, vals := make([]int32, nt), make([]float32, nt)
		maxv, lse, picked, pick := make([]float32, nt), make([]float32, nt), make([]float32, nt), make([]int32, nt)
		b.Run(fmt.Sprintf("nt=%d", nt), func(b *testing.B) {
			for b.Loop() {
				if err := be.RowStats(l, nt, n, 1, pick, ids, vals, maxv, lse, picked); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
