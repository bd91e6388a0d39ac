package backendtest

import (
	"math"
	"slices"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/quant"
)

// colsFor is a row length valid for t (K-quants need multiples of 256).
func colsFor(t quant.Type, base int) int {
	bs := t.BlockSize()
	return (base + bs - 1) / bs * bs
}

func testEmbed(t *testing.T, newBackend func() backend.Backend, opts Options) {
	for _, typ := range opts.types() {
		t.Run(typ.String(), func(t *testing.T) {
			e := newEnv(t, newBackend, opts.seed()+uint64(typ))
			cols := colsFor(typ, 96)
			w, bw := e.weight("embd", typ, 11, cols, 1)
			ids := []int32{3, 0, 10, 3, 7}
			dst := e.zeros(len(ids) * cols)
			e.b.Embed(dst, bw, e.i32(ids), len(ids))
			got := e.read(dst, len(ids)*cols)
			held := func(v float32) float32 { return v }
			if r, ok := bw.(backend.Rounded); ok && r.HeldAs() == quant.F16 && typ != quant.F16 {
				held = func(v float32) float32 { return quant.F16ToF32(quant.F32ToF16(v)) } // the backend's copy
			}
			for i, id := range ids {
				for j := range cols {
					if g, want := got[i*cols+j], held(w.Values[int(id)*cols+j]); g != want && !(g != g && want != want) {
						t.Fatalf("row %d (id %d) col %d: got %g, want %g", i, id, j, g, want)
					}
				}
			}
		})
	}
}

func testMatMul(t *testing.T, newBackend func() backend.Backend, opts Options) {
	shapes := []struct{ rows, cols, nt int }{
		{4, 256, 1}, {36, 512, 3}, {68, 256, 7}, {5, 256, 2}, // 5 rows: not a multiple of 4
	}
	for _, typ := range opts.types() {
		tol := MatMulTolerance(typ)
		for _, s := range shapes {
			cols := colsFor(typ, s.cols)
			t.Run(name("%s/%dx%d/nt=%d", typ, s.rows, cols, s.nt), func(t *testing.T) {
				e := newEnv(t, newBackend, opts.seed()^uint64(typ)<<8^uint64(s.rows*cols+s.nt))
				w, bw := e.weight("w", typ, s.rows, cols, 0.5)
				x := e.normals(s.nt*cols, 1)
				dst := e.zeros(s.nt * s.rows)
				e.b.MatMul(dst, bw, e.f32(x), s.nt)
				got := e.read(dst, s.nt*s.rows)
				want := make([]float64, s.nt*s.rows)
				scale := make([]float64, s.nt*s.rows)
				for i := range s.nt {
					xr := x[i*cols : (i+1)*cols]
					for r := range s.rows {
						wr := w.Values[r*cols : (r+1)*cols]
						var dot, ww, xx float64
						for j := range cols {
							dot += float64(wr[j]) * float64(xr[j])
							ww += float64(wr[j]) * float64(wr[j])
							xx += float64(xr[j]) * float64(xr[j])
						}
						want[i*s.rows+r] = dot
						scale[i*s.rows+r] = math.Sqrt(ww * xx)
					}
				}
				check(t, "dst", got, want, tol, func(i int) float64 { return scale[i] })
			})
		}
	}
}

func refRMSNorm(x, w []float32, eps float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) * s * float64(w[i])
	}
	return out
}

func testRMSNorm(t *testing.T, newBackend func() backend.Backend, opts Options) {
	for _, n := range []int{64, 172, 896} {
		t.Run(name("n=%d", n), func(t *testing.T) {
			e := newEnv(t, newBackend, opts.seed()+uint64(n))
			const nt, eps = 3, 1e-6
			x := e.normals(nt*n, 2)
			wv := e.normals(n, 1)
			w := e.vector("norm", wv)
			xb := e.f32(x)
			dst := e.zeros(nt * n)
			e.b.RMSNorm(dst, xb, w, nt, eps)
			got := e.read(dst, nt*n)
			var want []float64
			for i := range nt {
				want = append(want, refRMSNorm(x[i*n:(i+1)*n], wv, eps)...)
			}
			check(t, "dst", got, want, NormTolerance, absScale(want))
			e.b.RMSNorm(xb, xb, w, nt, eps) // in place
			if inPlace := e.read(xb, nt*n); !slices.Equal(inPlace, got) {
				t.Errorf("in place: result differs from dst != x")
			}
		})
	}
}

func testHeadNorm(t *testing.T, newBackend func() backend.Backend, opts Options) {
	e := newEnv(t, newBackend, opts.seed()+7)
	const nt, heads, hd, eps = 3, 4, 64, 1e-6
	x := e.normals(nt*heads*hd, 1.5)
	wv := e.normals(hd, 1)
	xb := e.f32(x)
	e.b.HeadNorm(xb, e.vector("qnorm", wv), nt, heads, eps)
	got := e.read(xb, nt*heads*hd)
	var want []float64
	for i := range nt * heads {
		want = append(want, refRMSNorm(x[i*hd:(i+1)*hd], wv, eps)...)
	}
	check(t, "x", got, want, NormTolerance, absScale(want))
}

func testElementwise(t *testing.T, newBackend func() backend.Backend, opts Options) {
	e := newEnv(t, newBackend, opts.seed()+11)
	const nt, n = 5, 100
	t.Run("AddBias", func(t *testing.T) {
		x := e.normals(nt*n, 1)
		bias := e.normals(n, 1)
		xb := e.f32(x)
		e.b.AddBias(xb, e.vector("bias", bias), nt)
		got := e.read(xb, nt*n)
		for i := range got {
			if want := x[i] + bias[i%n]; got[i] != want {
				t.Fatalf("x[%d]: got %g, want %g", i, got[i], want)
			}
		}
	})
	t.Run("Add", func(t *testing.T) {
		a, c := e.normals(nt*n, 1), e.normals(nt*n, 1)
		ab := e.f32(a)
		e.b.Add(ab, e.f32(c), nt*n-3) // the last 3 values stay
		got := e.read(ab, nt*n)
		for i := range got {
			want := a[i]
			if i < nt*n-3 {
				want += c[i]
			}
			if got[i] != want {
				t.Fatalf("dst[%d]: got %g, want %g", i, got[i], want)
			}
		}
	})
	t.Run("SwiGLU", func(t *testing.T) {
		for _, width := range []int{n, 48, 7} {
			g, u := e.normals(nt*width, 3), e.normals(nt*width, 1)
			g[0], g[1] = 95, -120 // exp over/underflow paths
			gb := e.f32(g)
			dst := e.zeros(nt * width)
			e.b.SwiGLU(dst, gb, e.f32(u), nt, width)
			got := e.read(dst, nt*width)
			want := make([]float64, nt*width)
			for i := range want {
				x := float64(g[i])
				want[i] = x / (1 + math.Exp(-x)) * float64(u[i])
			}
			check(t, name("dst(n=%d)", width), got, want, SwiGLUTolerance, absScale(want))
			e.b.SwiGLU(gb, gb, e.f32(u), nt, width) // dst may be gate
			if inPlace := e.read(gb, nt*width); !slices.Equal(inPlace, got) {
				t.Errorf("n=%d: in place result differs", width)
			}
		}
	})
	t.Run("CopyRows", func(t *testing.T) {
		x := e.normals(nt*n, 1)
		dst := e.zeros(2 * n)
		e.b.CopyRows(dst, 0, e.f32(x), 3, 2, n)
		if got := e.read(dst, 2*n); !slices.Equal(got, x[3*n:5*n]) {
			t.Errorf("CopyRows(row 3, 2 rows): got a different slice")
		}
		// Into rows 1..2 of a 4-row destination: rows 0 and 3 stay as they were.
		pre := e.normals(4*n, 2)
		dst4 := e.f32(pre)
		e.b.CopyRows(dst4, 1, e.f32(x), 2, 2, n)
		want := slices.Concat(pre[:n], x[2*n:4*n], pre[3*n:])
		if got := e.read(dst4, 4*n); !slices.Equal(got, want) {
			t.Errorf("CopyRows(into row 1, from row 2, 2 rows): got a different matrix")
		}
	})
}

func testTopK(t *testing.T, newBackend func() backend.Backend, opts Options) {
	e := newEnv(t, newBackend, opts.seed()+13)
	const nt, n = 4, 1000
	logits := make([]float32, nt*n)
	for i := range logits {
		logits[i] = float32(e.rng.IntN(40)) / 4 // many ties
	}
	nan := float32(math.NaN())
	logits[5] = nan
	// row 1: NaN in column 0 (a copy of the order once ranked it first), ±Inf and ±0
	// ties; row 2: NaN but for a few numbers, so NaNs fill the k best, by id
	for i, v := range []float32{nan, float32(math.Inf(1)), 0, float32(math.Copysign(0, -1)), float32(math.Inf(-1)), nan, float32(math.Inf(1)), 0} {
		logits[n+i*97] = v
	}
	for i := 2 * n; i < 3*n; i++ {
		if i%37 != 0 {
			logits[i] = nan
		}
	}
	lb := e.f32(logits)
	for _, k := range []int{1, 3, 40, 100, n} {
		t.Run(name("k=%d", k), func(t *testing.T) {
			ids := make([]int32, nt*k)
			vals := make([]float32, nt*k)
			if err := e.b.TopK(lb, nt, n, k, ids, vals); err != nil {
				t.Fatalf("TopK: %v", err)
			}
			for r := range nt {
				row := logits[r*n : (r+1)*n]
				order := make([]int32, n)
				backend.SortCandidates(row, order)
				for j := range k {
					if got, want := ids[r*k+j], order[j]; got != want {
						t.Fatalf("row %d rank %d: got id %d (%g), want id %d (%g)", r, j, got, vals[r*k+j], want, row[want])
					}
				}
			}
		})
	}
}

func testErrors(t *testing.T, newBackend func() backend.Backend) {
	e := newEnv(t, newBackend, 17)
	t.Run("NewWeight", func(t *testing.T) {
		if _, err := e.b.NewWeight("w", quant.Q8_0, 2, 32, make([]byte, 33)); err == nil {
			t.Errorf("NewWeight with 33 bytes for 2×32 q8_0: got nil error")
		}
		if _, err := e.b.NewWeight("w", quant.Q8_0, 2, 30, make([]byte, 68)); err == nil {
			t.Errorf("NewWeight with 30 cols of q8_0: got nil error")
		}
		if _, err := e.b.NewWeight("w", quant.Type(200), 1, 1, make([]byte, 4)); err == nil {
			t.Errorf("NewWeight of type 200: got nil error")
		}
	})
	t.Run("NewKV", func(t *testing.T) {
		bad := []backend.KVSpec{
			{Layers: 1, KVHeads: 1, HeadDim: 48, Ctx: 8, Type: backend.KVQ8_0},
			{Layers: 0, KVHeads: 1, HeadDim: 64, Ctx: 8},
			{Layers: 1, KVHeads: 1, HeadDim: 64, Ctx: 0},
			{Layers: 1, KVHeads: 1, HeadDim: 64, Ctx: 8, Type: backend.KVType(9)},
		}
		for _, s := range bad {
			if _, err := e.b.NewKV(s); err == nil {
				t.Errorf("NewKV(%+v): got nil error", s)
			}
		}
	})
	t.Run("Embed id out of range", func(t *testing.T) {
		_, w := e.weight("embd", quant.F32, 4, 8, 1)
		dst := e.zeros(8)
		e.b.Embed(dst, w, e.i32([]int32{4}), 1)
		if err := e.b.Sync(); err == nil {
			t.Errorf("Sync after Embed of id 4 in a 4-row table: got nil error")
		}
		if err := e.b.Sync(); err != nil {
			t.Errorf("second Sync: got %v, want the error reported once", err)
		}
		e.b.Embed(dst, w, e.i32([]int32{-1}), 1)
		if err := e.b.ReadF32(dst, 0, make([]float32, 8)); err == nil {
			t.Errorf("ReadF32 after Embed of id -1: got nil error")
		}
	})
	t.Run("position outside the cache", func(t *testing.T) {
		kv, err := e.b.NewKV(backend.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 32, Ctx: 4})
		if err != nil {
			t.Fatal(err)
		}
		a := backend.Attn{Heads: 1, KVHeads: 1, HeadDim: 32, Scale: 0.2}
		r := backend.RoPE{Mode: backend.RoPENormal, Dims: 32, Base: 10000, FreqScale: 1}
		q, k, v := e.zeros(32), e.zeros(32), e.zeros(32)
		e.b.RoPEStoreKV(q, k, v, kv, 0, e.i32([]int32{4}), 1, r, a)
		if err := e.b.Sync(); err == nil {
			t.Errorf("RoPEStoreKV at position 4 of a 4-position cache: got nil error")
		}
	})
	t.Run("TopK k > n", func(t *testing.T) {
		l := e.f32([]float32{1, 2, 3})
		if err := e.b.TopK(l, 1, 3, 4, make([]int32, 4), make([]float32, 4)); err == nil {
			t.Errorf("TopK with k=4 of 3 values: got nil error")
		}
	})
}
