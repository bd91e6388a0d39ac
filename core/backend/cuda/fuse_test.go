//go:build cuda

package cuda_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/quant"
)

// TestPrologueFusedSameBits: a transformer layer's ops at nt = 1 with the one-row
// fusions of fuse.go (MINFER_FUSE_MATVEC=1) (RMSNorm and SwiGLU recomputed in the prologue of the mat-vec
// that reads them, the residual add in the epilogue of the mat-vec before it) give
// every buffer the bits of the separate kernels (MINFER_NO_FUSE_NORM_MATVEC,
// _SWIGLU_MATVEC and _RESIDUAL), also at nt 2-3 (not fused) and for a reader after the
// fused one (the shadow the prologue's first launch writes); the result is checked
// against the CPU backend, and the prologue kernels must have run (ledger mode). Every
// type of the table, a Q4_K_M-like mix (q, k Q5_0, v Q6_K: no RoPE fusion), and an
// embedding of 1,280 (rmsnorm's 1,024 threads sum two values each).
func TestPrologueFusedSameBits(t *testing.T) {
	t.Setenv("MINFER_FUSE_MATVEC", "1")
	for _, k := range []string{"MINFER_NO_FUSE_NORM_MATVEC", "MINFER_NO_FUSE_SWIGLU_MATVEC", "MINFER_NO_FUSE_RESIDUAL"} {
		t.Setenv(k, "1")
	}
	sep := open(t)
	defer sep.Close()
	for _, k := range []string{"MINFER_NO_FUSE_NORM_MATVEC", "MINFER_NO_FUSE_SWIGLU_MATVEC", "MINFER_NO_FUSE_RESIDUAL"} {
		t.Setenv(k, "")
	}
	t.Setenv("MINFER_FUSE_MATVEC", "1")
	t.Setenv("MINFER_LEDGER", "1")
	fused := open(t)
	defer fused.Close()
	c := cpu.New(cpu.Options{})
	defer c.Close()
	type layerTypes struct{ qk, v, o, ffn, down quant.Type }
	var cases []layerTypes
	for _, typ := range matmulTypes {
		cases = append(cases, layerTypes{typ, typ, typ, typ, typ})
	}
	cases = append(cases, layerTypes{quant.Q5_0, quant.Q6_K, quant.Q5_0, quant.Q5_0, quant.Q4_K})
	rng := rand.New(rand.NewPCG(41, 42))
	const heads, kvheads, hd, ctx = 4, 2, 64, 16
	qd, kd := heads*hd, kvheads*hd
	a := backend.Attn{Heads: heads, KVHeads: kvheads, HeadDim: hd, Scale: 0.125}
	r := backend.RoPE{Mode: backend.RoPENeoX, Dims: hd, Base: 10000, FreqScale: 1}
	for _, lt := range cases {
		for _, dims := range [][2]int{{256, 512}, {1280, 768}} {
			embd, ff := dims[0], dims[1]
			if lt.qk != quant.Q8_0 && embd != 256 {
				continue // the wide shape once, on one type
			}
			name := fmt.Sprintf("%v/%v/%v/%v/%v/embd%d", lt.qk, lt.v, lt.o, lt.ffn, lt.down, embd)
			type mat struct {
				typ        quant.Type
				rows, cols int
			}
			mats := []mat{{lt.qk, qd, embd}, {lt.qk, kd, embd}, {lt.v, kd, embd}, {lt.o, embd, qd},
				{lt.ffn, ff, embd}, {lt.ffn, ff, embd}, {lt.down, embd, ff}}
			data := make([][]byte, len(mats))
			for i, m := range mats {
				data[i] = quantizedSigma(t, m.typ, m.rows, m.cols, rng, 1/math.Sqrt(float64(m.cols)))
			}
			norms := [2][]float32{normals(rng, embd, 0.3), normals(rng, embd, 0.3)}
			for i := range norms {
				for j := range norms[i] {
					norms[i][j] += 1
				}
			}
			bias := [3][]float32{normals(rng, qd, 0.1), normals(rng, kd, 0.1), normals(rng, kd, 0.1)}
			xv := normals(rng, 3*embd, 1)
			var got [3][]float32
			for bi, b := range []backend.Backend{sep, fused, c} {
				ws := make([]backend.Weight, len(mats))
				for i, m := range mats {
					var err error
					if ws[i], err = b.NewWeight("w", m.typ, m.rows, m.cols, data[i]); err != nil {
						t.Fatal(err)
					}
				}
				var ns [2]backend.Weight
				var bs [3]backend.Weight
				for i := range ns {
					ns[i], _ = b.NewWeight("n", quant.F32, 1, embd, f32Bytes(norms[i]))
				}
				for i, n := range []int{qd, kd, kd} {
					bs[i], _ = b.NewWeight("b", quant.F32, 1, n, f32Bytes(bias[i]))
				}
				kv, err := b.NewKV(backend.KVSpec{Layers: 1, KVHeads: kvheads, HeadDim: hd, Ctx: ctx, Type: backend.KVF16})
				if err != nil {
					t.Fatal(err)
				}
				for nt := 1; nt <= 3; nt++ {
					ids := make([]int32, nt)
					for j := range ids {
						ids[j] = int32(nt - 1 + j)
					}
					pos, _ := b.NewI32(nt)
					b.WriteI32(pos, 0, ids)
					x := mustF32(t, b, xv[:nt*embd])
					xb, att := poisoned(t, b, nt*embd), poisoned(t, b, nt*qd)
					q, k, v := poisoned(t, b, nt*qd), poisoned(t, b, nt*kd), poisoned(t, b, nt*kd)
					gate, up, act := poisoned(t, b, nt*ff), poisoned(t, b, nt*ff), poisoned(t, b, nt*ff)
					q2, k2 := poisoned(t, b, nt*qd), poisoned(t, b, nt*kd)
					b.RMSNorm(xb, x, ns[0], nt, 1e-6)
					b.MatMul(q, ws[0], xb, nt)
					b.MatMul(k, ws[1], xb, nt)
					b.MatMul(v, ws[2], xb, nt)
					b.AddBias(q, bs[0], nt)
					b.AddBias(k, bs[1], nt)
					b.AddBias(v, bs[2], nt)
					b.RoPEStoreKV(q, k, v, kv, 0, pos, nt, r, a)
					b.Attention(att, q, kv, 0, pos, nt, a)
					b.MatMul(xb, ws[3], att, nt)
					b.Add(x, xb, nt*embd)
					b.RMSNorm(xb, x, ns[1], nt, 1e-6)
					b.MatMul(gate, ws[4], xb, nt)
					b.MatMul(up, ws[5], xb, nt)
					b.SwiGLU(act, gate, up, nt, ff)
					b.MatMul(xb, ws[6], act, nt)
					b.Add(x, xb, nt*embd)
					b.RMSNorm(xb, x, ns[0], nt, 1e-6) // the next layer's norm and q
					b.MatMul(q2, ws[0], xb, nt)
					outs := []backend.Buffer{q, k, v, att, gate, up, act, x, q2, xb}
					sizes := []int{qd, kd, kd, qd, ff, ff, ff, embd, qd, embd}
					for i, o := range outs {
						got[bi] = append(got[bi], read(t, b, o, nt*sizes[i])...)
					}
					b.MatMul(k2, ws[1], xb, nt) // reads xb's shadow, written by q2's prologue
					got[bi] = append(got[bi], read(t, b, k2, nt*kd)...)
					for _, y := range append(outs, pos, k2) {
						b.Free(y)
					}
				}
				for _, w := range ws {
					b.Free(w)
				}
				for _, w := range append(ns[:], bs[:]...) {
					b.Free(w)
				}
				b.Free(kv)
			}
			for i := range got[0] {
				if math.Float32bits(got[0][i]) != math.Float32bits(got[1][i]) {
					t.Errorf("%s: output %d: fused %v, separate %v", name, i, got[1][i], got[0][i])
					break
				}
			}
			if e := relErr(got[1], got[2]); e > 5e-2 {
				t.Errorf("%s: fused vs CPU: relative error %.3g > 5e-2", name, e)
			}
		}
	}
	ran := map[string]bool{}
	for _, s := range fused.Ledger() {
		// The ledger groups a kernel's instantiations: mmvq_q8_0rp_1 → mmvq_q8_0rp.
		if strings.HasPrefix(s.Name, "mmvq_") && strings.HasSuffix(s.Name, "p") {
			ran[strings.TrimSuffix(strings.TrimSuffix(s.Name, "p"), "r")] = true
		}
	}
	for _, k := range []string{"mmvq_q8_0", "mmvq_q5_0", "mmvq_q6_k", "mmvq_q4_k"} {
		if !ran[k] {
			t.Errorf("no prologue kernel of %s ran: %v", k, fused.Ledger())
		}
	}
}
