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
