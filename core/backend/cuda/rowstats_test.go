//go:build cuda

package cuda_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// RowStats itself is checked by backendtest (TestConformance/RowStats): against the
// backend's TopK and a float64 max and log-sum-exp, on rows with ties, NaN, ±Inf and a
// vocabulary-sized row, k 0-100 (beyond the tier's TopKMaxK the host fallback), row
// identity and the errors.

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
