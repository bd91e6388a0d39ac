//go:build cuda

package cuda_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/quant"
)

// TestRoPEFusedSameBits: the q/k/v mat-vec with RoPE and the KV store in its epilogue
// (mmvq_KERNELr_NT, what the q, k, v MatMuls, their AddBias and RoPEStoreKV become)
// gives q, k, v and the attention that reads the cache the bits of the separate kernels
// (MINFER_NO_FUSE_ROPE=1), at nt = 1 (the fused kernel's) and 2-8 (not fused, checked
// all the same), for every type, both RoPE
// modes, with and without frequency factors; the attention is also checked against the
// CPU backend, the fused kernel must have run (ledger mode), and a position outside
// the cache is an error on the fused path too.
func TestRoPEFusedSameBits(t *testing.T) {
	t.Setenv("MINFER_NO_FUSE_ROPE", "1")
	sep := open(t)
	defer sep.Close()
	t.Setenv("MINFER_NO_FUSE_ROPE", "")
	t.Setenv("MINFER_LEDGER", "1")
	fused := open(t)
	defer fused.Close()
	c := cpu.New(cpu.Options{})
	defer c.Close()
	rng := rand.New(rand.NewPCG(31, 32))
	const cols, ctx = 256, 16
	type shape struct {
		heads, kvheads, hd int
		mode               backend.RoPEMode
		ff                 bool
	}
	for _, typ := range matmulTypes {
		for _, sh := range []shape{{4, 2, 64, backend.RoPENeoX, false}, {2, 1, 128, backend.RoPENormal, true}} {
			a := backend.Attn{Heads: sh.heads, KVHeads: sh.kvheads, HeadDim: sh.hd, Scale: float32(1 / math.Sqrt(float64(sh.hd)))}
			r := backend.RoPE{Mode: sh.mode, Dims: sh.hd, Base: 10000, FreqScale: 1}
			if sh.ff {
				r.FreqFactors = make([]float32, sh.hd/2)
				for i := range r.FreqFactors {
					r.FreqFactors[i] = 1 + float32(i%5)
				}
			}
			qd, kd := sh.heads*sh.hd, sh.kvheads*sh.hd
			sigma := 1 / math.Sqrt(float64(cols))
			data := [3][]byte{quantizedSigma(t, typ, qd, cols, rng, sigma), quantizedSigma(t, typ, kd, cols, rng, sigma), quantizedSigma(t, typ, kd, cols, rng, sigma)}
			bias := [3][]float32{normals(rng, qd, 0.1), normals(rng, kd, 0.1), normals(rng, kd, 0.1)}
			xv := normals(rng, 8*cols, 1)
			var got [3][]float32
			for bi, b := range []backend.Backend{sep, fused, c} {
				var ws, bs [3]backend.Weight
				for i, n := range []int{qd, kd, kd} {
					var err error
					if ws[i], err = b.NewWeight("w", typ, n, cols, data[i]); err != nil {
						t.Fatal(err)
					}
					if bs[i], err = b.NewWeight("b", quant.F32, 1, n, f32Bytes(bias[i])); err != nil {
						t.Fatal(err)
					}
				}
				kv, err := b.NewKV(backend.KVSpec{Layers: 2, KVHeads: sh.kvheads, HeadDim: sh.hd, Ctx: ctx, Type: backend.KVF16})
				if err != nil {
					t.Fatal(err)
				}
				x := mustF32(t, b, xv)
				for nt := 1; nt <= 8; nt++ {
					p0 := (nt - 1) % 3 // positions p0 … p0+nt-1; those below p0 hold earlier calls' rows
					ids := make([]int32, nt)
					for j := range ids {
						ids[j] = int32(p0 + j)
					}
					pos, err := b.NewI32(nt)
					if err != nil {
						t.Fatal(err)
					}
					b.WriteI32(pos, 0, ids)
					q, k, v, att := poisoned(t, b, nt*qd), poisoned(t, b, nt*kd), poisoned(t, b, nt*kd), poisoned(t, b, nt*qd)
					b.MatMul(q, ws[0], x, nt)
					b.MatMul(k, ws[1], x, nt)
					b.MatMul(v, ws[2], x, nt)
					b.AddBias(q, bs[0], nt)
					b.AddBias(k, bs[1], nt)
					b.AddBias(v, bs[2], nt)
					b.RoPEStoreKV(q, k, v, kv, 1, pos, nt, r, a)
					b.Attention(att, q, kv, 1, pos, nt, a)
					got[bi] = append(got[bi], read(t, b, q, nt*qd)...)
					got[bi] = append(got[bi], read(t, b, k, nt*kd)...)
					got[bi] = append(got[bi], read(t, b, v, nt*kd)...)
					got[bi] = append(got[bi], read(t, b, att, nt*qd)...)
					for _, y := range []backend.Buffer{q, k, v, att, pos} {
						b.Free(y)
					}
				}
				for i := range ws {
					b.Free(ws[i])
					b.Free(bs[i])
				}
				b.Free(kv)
				b.Free(x)
			}
			for i := range got[0] {
				if math.Float32bits(got[0][i]) != math.Float32bits(got[1][i]) {
					t.Errorf("%v %+v: output %d: fused %v, separate %v", typ, sh, i, got[1][i], got[0][i])
					break
				}
			}
			if e := relErr(got[1], got[2]); e > 5e-2 {
				t.Errorf("%v %+v: fused vs CPU: relative error %.3g > 5e-2", typ, sh, e)
			}
		}
	}
	ran := false
	for _, s := range fused.Ledger() {
		// The ledger groups a mat-vec kernel's instantiations: mmvq_q4_kr_1 → mmvq_q4_kr.
		if strings.HasPrefix(s.Name, "mmvq_") && strings.HasSuffix(s.Name, "r") {
			ran = true
		}
	}
	if !ran {
		t.Errorf("the fused q/k/v kernel never ran: %v", fused.Ledger())
	}
	// A position outside the cache: recorded by the fused kernel as by rope_store.
	b := fused
	a := backend.Attn{Heads: 2, KVHeads: 1, HeadDim: 64, Scale: 0.125}
	var ws [3]backend.Weight
	for i, n := range []int{128, 64, 64} {
		var err error
		if ws[i], err = b.NewWeight("w", quant.Q8_0, n, cols, quantized(t, quant.Q8_0, n, cols, rng)); err != nil {
			t.Fatal(err)
		}
	}
	kv, err := b.NewKV(backend.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 64, Ctx: 4, Type: backend.KVF16})
	if err != nil {
		t.Fatal(err)
	}
	x := mustF32(t, b, normals(rng, cols, 1))
	pos, _ := b.NewI32(1)
	b.WriteI32(pos, 0, []int32{4})
	q, k, v := poisoned(t, b, 128), poisoned(t, b, 64), poisoned(t, b, 64)
	b.MatMul(q, ws[0], x, 1)
	b.MatMul(k, ws[1], x, 1)
	b.MatMul(v, ws[2], x, 1)
	b.RoPEStoreKV(q, k, v, kv, 0, pos, 1, backend.RoPE{Mode: backend.RoPENeoX, Dims: 64, Base: 10000, FreqScale: 1}, a)
	if err := b.ReadF32(q, 0, make([]float32, 128)); err == nil || !strings.Contains(err.Error(), "position") {
		t.Errorf("fused RoPE at position 4 of a 4-position cache: got error %v", err)
	}
}
