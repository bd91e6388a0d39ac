//go:build cuda

package cuda_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/quant"
)

var benchSeq int

// BenchmarkMatMul times the mat-vec kernels on a 7B-sized FFN weight (14336 × 4096),
// four copies rotated so the 50-60 MB L2 cannot hold them, 32 matmuls per captured
// graph. It reports weight GB/s (bytes of the weight read per second); the kernels are
// meant to stream at the copy bandwidth (4.3 TB/s measured on the H200). It also
// reports TFLOP/s (2·rows·cols·nt per matmul), the measure for the GEMM path (nt ≥ 32).
func BenchmarkMatMul(b *testing.B) {
	g := open(b)
	defer g.Close()
	rng := rand.New(rand.NewPCG(9, 9))
	const rows, cols, copies, per = 14336, 4096, 4, 32
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.F16} {
		rb, _ := typ.RowBytes(cols)
		data := make([]byte, rb*rows)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		if typ == quant.F16 { // keep values finite: clear the top exponent bit
			for i := 1; i < len(data); i += 2 {
				data[i] &= 0xBF
			}
		}
		var ws []backend.Weight
		for range copies {
			w, err := g.NewWeight("w", typ, rows, cols, data)
			if err != nil {
				b.Fatal(err)
			}
			ws = append(ws, w)
		}
		for _, nt := range []int{1, 2, 4, 8, 16, 32, 64, 512} {
			b.Run(fmt.Sprintf("%v/nt%d", typ, nt), func(b *testing.B) {
				x := mustF32(b, g, normals(rng, nt*cols, 1))
				y, _ := g.NewF32(nt * rows)
				// A fresh key per invocation: x and y are new buffers each time, and a
				// graph replays the buffers it was captured with.
				benchSeq++
				key := fmt.Sprintf("%v/%d/%d", typ, nt, benchSeq)
				rec := func() {
					for i := range per {
						g.MatMul(y, ws[i%copies], x, nt)
					}
				}
				if err := g.Run(key, rec); err != nil {
					b.Fatal(err)
				}
				if err := g.Sync(); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				start := time.Now()
				for range b.N {
					g.Run(key, rec)
				}
				if err := g.Sync(); err != nil {
					b.Fatal(err)
				}
				el := time.Since(start)
				perMM := el.Seconds() / float64(b.N*per)
				b.ReportMetric(perMM*1e6, "us/matmul")
				b.ReportMetric(float64(rb*rows)/perMM/1e9, "GB/s")
				b.ReportMetric(2*float64(rows)*cols*float64(nt)/perMM/1e12, "TFLOP/s")
				g.Free(x)
				g.Free(y)
			})
		}
		for _, w := range ws {
			g.Free(w)
		}
	}
}

// BenchmarkMatVec times the mat-vec kernels at every nt they serve (1-8) on a 7B FFN
// weight (14336 × 4096) and on a 0.5B one (896 × 4864, FFN down: few rows, so few
// warps), with enough copies rotated that L2 cannot hold them. Run it with
// MINFER_PAIR_ROWS=none and =all to compare one and two weight rows per warp
// (cuda.RowPairs).
func BenchmarkMatVec(b *testing.B) {
	g := open(b)
	defer g.Close()
	rng := rand.New(rand.NewPCG(9, 10))
	const per = 32
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q5_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.F16} {
		for _, sh := range [][2]int{{14336, 4096}, {896, 4864}} {
			rows, cols := sh[0], sh[1]
			rb, _ := typ.RowBytes(cols)
			data := make([]byte, rb*rows)
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			if typ == quant.F16 { // keep values finite: clear the top exponent bit
				for i := 1; i < len(data); i += 2 {
					data[i] &= 0xBF
				}
			}
			copies := min(max(4, (256<<20)/len(data)), 64)
			var ws []backend.Weight
			for range copies {
				w, err := g.NewWeight("w", typ, rows, cols, data)
				if err != nil {
					b.Fatal(err)
				}
				ws = append(ws, w)
			}
			for nt := 1; nt <= 8; nt++ {
				b.Run(fmt.Sprintf("%v/%dx%d/nt%d", typ, rows, cols, nt), func(b *testing.B) {
					x := mustF32(b, g, normals(rng, nt*cols, 1))
					y, _ := g.NewF32(nt * rows)
					benchSeq++
					key := fmt.Sprintf("mv/%v/%d/%d/%d", typ, rows, nt, benchSeq)
					rec := func() {
						for i := range per {
							g.MatMul(y, ws[i%copies], x, nt)
						}
					}
					if err := g.Run(key, rec); err != nil {
						b.Fatal(err)
					}
					if err := g.Sync(); err != nil {
						b.Fatal(err)
					}
					b.ResetTimer()
					start := time.Now()
					for range b.N {
						g.Run(key, rec)
					}
					if err := g.Sync(); err != nil {
						b.Fatal(err)
					}
					perMM := time.Since(start).Seconds() / float64(b.N*per)
					b.ReportMetric(perMM*1e6, "us/matmul")
					b.ReportMetric(float64(rb*rows)/perMM/1e9, "GB/s")
					g.Free(x)
					g.Free(y)
				})
			}
			for _, w := range ws {
				g.Free(w)
			}
		}
	}
}
