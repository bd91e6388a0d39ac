//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	cudabe "github.com/minfer/minfer/core/backend/cuda"
	"github.com/minfer/minfer/core/quant"
)

// TestMatMulBLASVsCPU: the GEMM path (nt from the tier's GEMMMinRows, 65 on sm_80+)
// through cuBLAS and through minfer's own kernel (MINFER_NO_CUBLAS=1), each against the
// CPU backend on random inputs within 0.2% (the activations rounded as the CPU rounds
// them, act_round_*), with a bias folded into the matmul and two weights pending at
// once (q and k of one x), and the cuBLAS result the same bits when the call is
// repeated (the prefill is deterministic run to run). Skips where libcublas does not
// load.
func TestMatMulBLASVsCPU(t *testing.T) {
	bl := open(t)
	defer bl.Close()
	on, ver := bl.BLAS()
	if !on {
		t.Skip("cuBLAS does not load here (set MINFER_CUBLAS)")
	}
	t.Logf("cuBLAS %s", ver)
	t.Setenv("MINFER_NO_CUBLAS", "1")
	own := open(t)
	defer own.Close()
	if on, _ := own.BLAS(); on {
		t.Fatal("MINFER_NO_CUBLAS=1: the backend still uses cuBLAS")
	}
	c := cpu.New(cpu.Options{})
	defer c.Close()
	rng := rand.New(rand.NewPCG(21, 22))
	for _, typ := range []quant.Type{quant.F16, quant.Q8_0, quant.Q4_K, quant.Q6_K, quant.Q4_0} {
		for _, sh := range [][2]int{{300, 2048}, {96, 768}, {1000, 256}} {
			rows, cols := sh[0], sh[1]
			data := [2][]byte{quantized(t, typ, rows, cols, rng), quantized(t, typ, rows+5, cols, rng)}
			bias := normals(rng, rows, 1)
			for _, nt := range []int{64, 130, 300} {
				xv := normals(rng, nt*cols, 1)
				// want from the CPU, got from each GPU form (twice from cuBLAS).
				type out struct{ d0, d1 []float32 }
				run := func(g backend.Backend) out {
					w0, err := g.NewWeight("w0", typ, rows, cols, data[0])
					if err != nil {
						t.Fatal(err)
					}
					w1, err := g.NewWeight("w1", typ, rows+5, cols, data[1])
					if err != nil {
						t.Fatal(err)
					}
					bw, err := g.NewWeight("b", quant.F32, 1, rows, f32Bytes(bias))
					if err != nil {
						t.Fatal(err)
					}
					x := mustF32(t, g, xv)
					d0, d1 := poisoned(t, g, nt*rows), poisoned(t, g, nt*(rows+5))
					g.MatMul(d0, w0, x, nt)
					g.MatMul(d1, w1, x, nt)
					g.AddBias(d0, bw, nt)
					o := out{read(t, g, d0, nt*rows), read(t, g, d1, nt*(rows+5))}
					g.Free(d0)
					g.Free(d1)
					g.Free(x)
					g.Free(w0)
					g.Free(w1)
					g.Free(bw)
					return o
				}
				want := run(c)
				name := fmt.Sprintf("%v/%dx%d/nt%d", typ, rows, cols, nt)
				for _, form := range []struct {
					name string
					g    *cudabe.Backend
				}{{"cublas", bl}, {"own", own}} {
					got := run(form.g)
					// Where the GEMM runs (nt above the identity bound: at nt 64 sm_80+
					// takes the int8 kernel) it rounds x to the CPU's 8-bit levels
					// (act_round_*), so only the f16 roundings of w and x·d (≈ 2^-12
					// each) separate it from the CPU: ≈ 3e-4, where x straight to f16
					// differs by the CPU's Q8_0/Q8_K noise (5e-3 Q8_0, 7e-3 Q8_K here).
					bound := matmulBound(typ, nt)
					if nt > form.g.Caps().IdentityRows {
						bound = min(bound, 2e-3)
					}
					if e := relErr(got.d0, want.d0); e > bound {
						t.Errorf("%s %s: biased output: relative error %.3g > %.3g", form.name, name, e, bound)
					}
					if e := relErr(got.d1, want.d1); e > bound {
						t.Errorf("%s %s: relative error %.3g > %.3g", form.name, name, e, bound)
					}
					if form.name != "cublas" {
						continue
					}
					again := run(form.g)
					for i := range got.d0 {
						if math.Float32bits(got.d0[i]) != math.Float32bits(again.d0[i]) {
							t.Errorf("%s: output %d differs between two identical calls: %v then %v", name, i, got.d0[i], again.d0[i])
							break
						}
					}
				}
			}
		}
	}
}
