package backendtest

import (
	"math"
	"testing"

	"github.com/minfer/minfer/core/backend"
)

// AttnShape is one attention configuration of the suite.
type AttnShape struct {
	Heads, KVHeads, HeadDim int
	Mode                    backend.RoPEMode
	KV                      backend.KVType
}

// attnShapes cover GQA ratios 1/2/4, head dims 32/64/128, both RoPE modes and both KV
// types.
func attnShapes() []AttnShape {
	var out []AttnShape
	for _, kvt := range []backend.KVType{backend.KVF16, backend.KVQ8_0} {
		out = append(out,
			AttnShape{4, 4, 32, backend.RoPENormal, kvt},
			AttnShape{4, 2, 64, backend.RoPENeoX, kvt},
			AttnShape{8, 2, 128, backend.RoPENeoX, kvt},
			AttnShape{2, 1, 64, backend.RoPENormal, kvt},
		)
	}
	return out
}

// refRoPE rotates v (one head) in float64 for position p.
func refRoPE(v []float64, p int, r backend.RoPE) {
	for i := 0; i < r.Dims/2; i++ {
		theta := float64(p) * math.Pow(float64(r.Base), -2*float64(i)/float64(r.Dims)) * float64(r.FreqScale)
		if r.FreqFactors != nil {
			theta /= float64(r.FreqFactors[i])
		}
		c, s := math.Cos(theta), math.Sin(theta)
		a, b := 2*i, 2*i+1
		if r.Mode == backend.RoPENeoX {
			a, b = i, i+r.Dims/2
		}
		x0, x1 := v[a], v[b]
		v[a] = x0*c - x1*s
		v[b] = x0*s + x1*c
	}
}

func to64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

func maxAbs(x []float32) float64 {
	var m float64
	for _, v := range x {
		m = max(m, math.Abs(float64(v)))
	}
	return m
}

// testAttention stores a prefix of `pre` positions with one call, then nt more rows,
// and checks the rotated q and the attention of those rows against float64.
func testAttention(t *testing.T, newBackend func() backend.Backend, opts Options) {
	for i, s := range attnShapes() {
		t.Run(name("%s/h%d-kv%d-d%d/mode%d", s.KV, s.Heads, s.KVHeads, s.HeadDim, s.Mode), func(t *testing.T) {
			e := newEnv(t, newBackend, opts.seed()+uint64(100+i))
			const pre, nt, ctx = 9, 5, 32
			hd := s.HeadDim
			a := backend.Attn{Heads: s.Heads, KVHeads: s.KVHeads, HeadDim: hd, Scale: float32(1 / math.Sqrt(float64(hd)))}
			r := backend.RoPE{Mode: s.Mode, Dims: hd, Base: 10000, FreqScale: 1}
			if i%2 == 1 { // scaled variants
				r.Base, r.FreqScale = 1e6, 0.5
				r.FreqFactors = make([]float32, hd/2)
				for j := range r.FreqFactors {
					r.FreqFactors[j] = 1 + float32(j%3)
				}
			}
			kv, err := e.b.NewKV(backend.KVSpec{Layers: 2, KVHeads: s.KVHeads, HeadDim: hd, Ctx: ctx, Type: s.KV})
			if err != nil {
				t.Fatalf("NewKV: %v", err)
			}
			const layer = 1
			total := pre + nt
			qAll := e.normals(total*s.Heads*hd, 1)
			kAll := e.normals(total*s.KVHeads*hd, 1)
			vAll := e.normals(total*s.KVHeads*hd, 1)
			pos := make([]int32, total)
			for j := range pos {
				pos[j] = int32(j)
			}
			// Two calls: positions [0, pre) then [pre, total).
			qn, kn := s.Heads*hd, s.KVHeads*hd
			var qOut []float32
			for _, span := range [][2]int{{0, pre}, {pre, total}} {
				lo, hi := span[0], span[1]
				qb := e.f32(qAll[lo*qn : hi*qn])
				posb := e.i32(pos[lo:hi])
				e.b.RoPEStoreKV(qb, e.f32(kAll[lo*kn:hi*kn]), e.f32(vAll[lo*kn:hi*kn]), kv, layer, posb, hi-lo, r, a)
				if lo == pre {
					dst := e.zeros(nt * qn)
					e.b.Attention(dst, qb, kv, layer, posb, nt, a)
					qOut = e.read(qb, nt*qn)
					got := e.read(dst, nt*qn)
					checkAttention(t, got, qAll, kAll, vAll, pos, pre, nt, s, r, a)
				}
			}
			e.sync()
			// The rotated q of the second call.
			for row := range nt {
				for h := range s.Heads {
					off := (row*s.Heads + h) * hd
					want := to64(qAll[(pre+row)*qn+h*hd : (pre+row)*qn+(h+1)*hd])
					refRoPE(want, pre+row, r)
					sc := maxAbs(qAll[(pre+row)*qn+h*hd : (pre+row)*qn+(h+1)*hd])
					check(t, name("q row %d head %d", row, h), qOut[off:off+hd], want, RoPETolerance, func(int) float64 { return sc })
				}
			}
		})
	}
}

func checkAttention(t *testing.T, got, qAll, kAll, vAll []float32, pos []int32, pre, nt int, s AttnShape, r backend.RoPE, a backend.Attn) {
	t.Helper()
	hd := s.HeadDim
	qn, kn := s.Heads*hd, s.KVHeads*hd
	tol := AttnF16Tolerance
	if s.KV == backend.KVQ8_0 {
		tol = AttnQ8Tolerance
	}
	// Rotated keys in float64.
	keys := make([][]float64, len(pos)*s.KVHeads)
	for p := range pos {
		for h := range s.KVHeads {
			k := to64(kAll[p*kn+h*hd : p*kn+(h+1)*hd])
			refRoPE(k, p, r)
			keys[p*s.KVHeads+h] = k
		}
	}
	group := s.Heads / s.KVHeads
	for row := range nt {
		p := pre + row
		for h := range s.Heads {
			q := to64(qAll[p*qn+h*hd : p*qn+(h+1)*hd])
			refRoPE(q, p, r)
			kh := h / group
			scores := make([]float64, p+1)
			mx := math.Inf(-1)
			for j := 0; j <= p; j++ {
				var dot float64
				for d, kvv := range keys[j*s.KVHeads+kh] {
					dot += q[d] * kvv
				}
				scores[j] = dot * float64(a.Scale)
				mx = max(mx, scores[j])
			}
			var sum float64
			for j := range scores {
				scores[j] = math.Exp(scores[j] - mx)
				sum += scores[j]
			}
			want := make([]float64, hd)
			vmax := 0.0
			for j := 0; j <= p; j++ {
				v := vAll[j*kn+kh*hd : j*kn+(kh+1)*hd]
				vmax = max(vmax, maxAbs(v))
				for d := range hd {
					want[d] += scores[j] / sum * float64(v[d])
				}
			}
			off := (row*s.Heads + h) * hd
			check(t, name("attn row %d head %d", row, h), got[off:off+hd], want, tol, func(int) float64 { return vmax })
		}
	}
}
