package cpu_test

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/backendtest"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/quant"
)

// Qwen2.5-0.5B's matmul shapes (rows × cols): q/o projection, gate/up, down, and the
// tied output head.
var benchShapes = []struct {
	name       string
	rows, cols int
}{
	{"896x896", 896, 896},
	{"4864x896", 4864, 896},
	{"896x4864", 896, 4864},
	{"151936x896", 151936, 896},
}

// BenchmarkMatMul reports weight bytes per second (MB/s, each weight byte counted once
// per call), activation rows per second, and cpu-ms/op: the process CPU time per call,
// which a shared machine's load disturbs less than wall time. The weights are random
// but of the real byte size.
func BenchmarkMatMul(b *testing.B) {
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_0, quant.Q5_0, quant.Q4_K, quant.Q6_K, quant.F16} {
		for _, s := range benchShapes {
			cols := s.cols
			if typ.BlockSize() == quant.QK_K && cols%quant.QK_K != 0 {
				continue
			}
			rng := rand.New(rand.NewPCG(1, uint64(s.rows)))
			w, err := backendtest.RandomWeight(rng, typ, min(s.rows, 4096), cols, 0.5)
			if err != nil {
				b.Fatal(err)
			}
			// Tile the random rows up to the full height (quantizing 150k rows is slow).
			data := make([]byte, 0, len(w.Data)*(s.rows/w.Rows+1))
			for len(data) < len(w.Data)/w.Rows*s.rows {
				data = append(data, w.Data...)
			}
			data = data[:len(w.Data)/w.Rows*s.rows]
			for _, nt := range []int{1, 64} {
				b.Run(fmt.Sprintf("%s/%s/nt=%d", typ, s.name, nt), func(b *testing.B) {
					be := cpu.New(cpu.Options{})
					defer be.Close()
					wt, err := be.NewWeight("w", typ, s.rows, cols, data)
					if err != nil {
						b.Fatal(err)
					}
					x, _ := be.NewF32(nt * cols)
					xs := make([]float32, nt*cols)
					for i := range xs {
						xs[i] = float32(rng.NormFloat64())
					}
					be.WriteF32(x, 0, xs)
					dst, _ := be.NewF32(nt * s.rows)
					var _ backend.Backend = be
					b.SetBytes(int64(len(data)))
					b.ResetTimer()
					cpu0 := cpuTime()
					for range b.N {
						be.MatMul(dst, wt, x, nt)
					}
					b.ReportMetric(float64(nt)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
					b.ReportMetric((cpuTime()-cpu0).Seconds()*1e3/float64(b.N), "cpu-ms/op")
				})
			}
		}
	}
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkMatMulFewRows runs the trained target's matmul shapes (Q8_0, 18.9M
// parameters: hidden 512, FFN 768, vocabulary 4096) at the row counts of batched
// decoding (one row per sequence): a step of S sequences should cost little more than
// a one-row step, since each weight is read once either way.
func BenchmarkMatMulFewRows(b *testing.B) {
	shapes := []struct{ rows, cols int }{{512, 512}, {768, 512}, {512, 768}, {4096, 512}}
	for _, s := range shapes {
		rng := rand.New(rand.NewPCG(2, uint64(s.rows)))
		w, err := backendtest.RandomWeight(rng, quant.Q8_0, s.rows, s.cols, 0.5)
		if err != nil {
			b.Fatal(err)
		}
		for _, nt := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("%dx%d/nt=%d", s.rows, s.cols, nt), func(b *testing.B) {
				be := cpu.New(cpu.Options{})
				defer be.Close()
				wt, err := be.NewWeight("w", quant.Q8_0, s.rows, s.cols, w.Data)
				if err != nil {
					b.Fatal(err)
				}
				x, _ := be.NewF32(nt * s.cols)
				xs := make([]float32, nt*s.cols)
				for i := range xs {
					xs[i] = float32(rng.NormFloat64())
				}
				be.WriteF32(x, 0, xs)
				dst, _ := be.NewF32(nt * s.rows)
				b.ResetTimer()
				cpu0 := cpuTime()
				for range b.N {
					be.MatMul(dst, wt, x, nt)
				}
				b.ReportMetric((cpuTime()-cpu0).Seconds()*1e6/float64(b.N), "cpu-µs/op")
			})
		}
	}
}
