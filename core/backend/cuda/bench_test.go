//go:build cuda

package cuda_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/minfer/minfer/core/backend"
	cudabe "github.com/minfer/minfer/core/backend/cuda"
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
	const rows, cols = 14336, 4096
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.F16} {
		ws := benchWeights(b, g, rng, typ, rows, cols, 4)
		for _, nt := range []int{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 512} {
			b.Run(fmt.Sprintf("%v/nt%d", typ, nt), func(b *testing.B) {
				perMM := timeMatMuls(b, g, rng, ws, nt)
				b.ReportMetric(2*float64(rows)*cols*float64(nt)/perMM/1e12, "TFLOP/s")
			})
		}
		freeAll(g, ws)
	}
}

// BenchmarkMatVec times the mat-vec kernels at every nt they serve (1-8) on a 7B FFN
// weight (14336 × 4096) and on a 0.5B one (896 × 4864, FFN down: few rows, so few
// warps), with enough copies rotated that L2 cannot hold them. Run it with
// MINFER_PAIR_ROWS=none and =all to compare one and two weight rows per warp
// (driver.RowPairs).
func BenchmarkMatVec(b *testing.B) {
	g := open(b)
	defer g.Close()
	rng := rand.New(rand.NewPCG(9, 10))
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q5_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.F16} {
		for _, sh := range [][2]int{{14336, 4096}, {896, 4864}} {
			rows, cols := sh[0], sh[1]
			rb, _ := typ.RowBytes(cols)
			ws := benchWeights(b, g, rng, typ, rows, cols, min(max(4, (256<<20)/(rb*rows)), 64))
			for nt := 1; nt <= 8; nt++ {
				b.Run(fmt.Sprintf("%v/%dx%d/nt%d", typ, rows, cols, nt), func(b *testing.B) {
					timeMatMuls(b, g, rng, ws, nt)
				})
			}
			freeAll(g, ws)
		}
	}
}

// benchWeights uploads copies of one random rows × cols weight of type typ (F16 values
// kept finite).
func benchWeights(b *testing.B, g *cudabe.Backend, rng *rand.Rand, typ quant.Type, rows, cols, copies int) []backend.Weight {
	b.Helper()
	rb, err := typ.RowBytes(cols)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, rb*rows)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	if typ == quant.F16 { // keep values finite: clear the top exponent bit
		for i := 1; i < len(data); i += 2 {
			data[i] &= 0xBF
		}
	}
	ws := make([]backend.Weight, copies)
	for i := range ws {
		if ws[i], err = g.NewWeight("w", typ, rows, cols, data); err != nil {
			b.Fatal(err)
		}
	}
	return ws
}

// timeMatMuls replays a graph of 32 matmuls over nt rows of input, rotating
// through ws so that L2 cannot hold the weight, reports µs per matmul and weight GB/s,
// and returns the seconds per matmul.
func timeMatMuls(b *testing.B, g *cudabe.Backend, rng *rand.Rand, ws []backend.Weight, nt int) float64 {
	const per = 32
	w := ws[0]
	x := mustF32(b, g, normals(rng, nt*w.Cols(), 1))
	y, _ := g.NewF32(nt * w.Rows())
	defer g.Free(x)
	defer g.Free(y)
	// A fresh key per invocation: x and y are new buffers each time, and a graph
	// replays the buffers it was captured with.
	benchSeq++
	key := fmt.Sprintf("bench/%v/%d/%d/%d", w.Type(), w.Rows(), nt, benchSeq)
	rec := func() {
		for i := range per {
			g.MatMul(y, ws[i%len(ws)], x, nt)
		}
	}
	perMM := timeReplays(b, g, key, rec) / per
	rb, _ := w.Type().RowBytes(w.Cols())
	b.ReportMetric(perMM*1e6, "us/matmul")
	b.ReportMetric(float64(rb*w.Rows())/perMM/1e9, "GB/s")
	return perMM
}

// timeReplays captures rec as the graph key (a warm-up replay with it), then replays
// it b.N times and returns the seconds per replay.
func timeReplays(b *testing.B, g *cudabe.Backend, key string, rec func()) float64 {
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
	return time.Since(start).Seconds() / float64(b.N)
}

func freeAll(g *cudabe.Backend, ws []backend.Weight) {
	for _, w := range ws {
		g.Free(w)
	}
}
