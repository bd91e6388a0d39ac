package cpu

import (
	"fmt"
	"math"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/quant"
)

// Embed: dst[i] = row ids[i] of table, dequantized (ggml_get_rows). An id out of range
// is recorded as an error and its row is zeroed.
func (b *Backend) Embed(dst backend.Buffer, table backend.Weight, ids backend.Buffer, nt int) {
	checkNT(nt, "Embed")
	w := weight(table, "Embed")
	d := f32(dst, nt*w.cols, "Embed dst")
	id := i32(ids, nt, "Embed ids")
	if w.mm.kind == kindNone && w.tr.Dequant == nil {
		b.failf("Embed: table %q: cannot dequantize %s", w.name, w.typ)
		return
	}
	var rowBuf []byte
	for t := range nt {
		out := d[t*w.cols : (t+1)*w.cols]
		r := int(id[t])
		if r < 0 || r >= w.rows {
			b.failf("Embed: table %q: token id %d out of range [0, %d)", w.name, id[t], w.rows)
			clear(out)
			continue
		}
		switch {
		case w.f32 != nil:
			copy(out, w.f32[r*w.cols:(r+1)*w.cols])
		case w.f16 != nil:
			for i, h := range w.f16[r*w.cols : (r+1)*w.cols] {
				out[i] = quant.F16ToF32(h)
			}
		default:
			if err := quant.Dequantize(w.typ, out, w.row(r, &rowBuf)); err != nil {
				b.failf("Embed: table %q: %v", w.name, err)
				clear(out)
			}
		}
	}
}

// rmsScale is ggml_compute_forward_rms_norm_f32's factor: squares summed in float64,
// mean rounded to float32, 1/sqrtf(mean+eps).
func rmsScale(x []float32, eps float32) float32 {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	mean := float32(sum / float64(len(x)))
	return 1 / float32(math.Sqrt(float64(mean+eps)))
}

// rmsNormRow writes x·scale·w (ggml_rms_norm then ggml_mul, each rounded) to dst.
func rmsNormRow(dst, x, w []float32, eps float32) {
	s := rmsScale(x, eps)
	w = w[:len(x)]
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = float32(v*s) * w[i]
	}
}

// RMSNorm: dst[i] = x[i] / sqrt(mean(x[i]²) + eps) * w over nt rows of w.Cols values.
func (b *Backend) RMSNorm(dst, x backend.Buffer, wt backend.Weight, nt int, eps float32) {
	checkNT(nt, "RMSNorm")
	w := weight(wt, "RMSNorm")
	n := w.cols
	xs := f32(x, nt*n, "RMSNorm x")
	ds := f32(dst, nt*n, "RMSNorm dst")
	wv, err := b.vectorOf(w)
	if err != nil {
		b.fail(err)
		return
	}
	b.parallelRows(nt, func(t int) {
		rmsNormRow(ds[t*n:(t+1)*n], xs[t*n:(t+1)*n], wv, eps)
	})
}

// HeadNorm: RMSNorm of each head (w.Cols values) of x[nt][heads·w.Cols], in place.
func (b *Backend) HeadNorm(x backend.Buffer, wt backend.Weight, nt, heads int, eps float32) {
	checkNT(nt, "HeadNorm")
	w := weight(wt, "HeadNorm")
	hd := w.cols
	xs := f32(x, nt*heads*hd, "HeadNorm x")
	wv, err := b.vectorOf(w)
	if err != nil {
		b.fail(err)
		return
	}
	b.parallelRows(nt, func(t int) {
		for h := range heads {
			v := xs[(t*heads+h)*hd : (t*heads+h+1)*hd]
			rmsNormRow(v, v, wv, eps)
		}
	})
}

// vectorOf returns a 1×n weight's values as float32.
func (b *Backend) vectorOf(w *Weight) ([]float32, error) {
	switch {
	case w.f32 != nil:
		return w.f32[:w.cols], nil
	case w.vec != nil:
		return w.vec, nil
	}
	return nil, fmt.Errorf("cpu: weight %q: a %d×%d %s weight is not a vector", w.name, w.rows, w.cols, w.typ)
}

// AddBias: x[i] += bias over nt rows of b.Cols values.
func (b *Backend) AddBias(x backend.Buffer, bias backend.Weight, nt int) {
	checkNT(nt, "AddBias")
	w := weight(bias, "AddBias")
	n := w.cols
	xs := f32(x, nt*n, "AddBias x")
	bv, err := b.vectorOf(w)
	if err != nil {
		b.fail(err)
		return
	}
	for t := range nt {
		row := xs[t*n : (t+1)*n]
		for i, v := range bv {
			row[i] += v
		}
	}
}

// SwiGLU: dst[i] = silu(gate[i]) · up[i] over nt rows of n values (ggml_vec_swiglu_f32:
// the AVX-512 silu on groups of 16, the scalar one on the rest of each row; with
// OrderAVX2 the AVX2 silu on groups of 8).
func (b *Backend) SwiGLU(dst, gate, up backend.Buffer, nt, n int) {
	checkNT(nt, "SwiGLU")
	g := f32(gate, nt*n, "SwiGLU gate")
	u := f32(up, nt*n, "SwiGLU up")
	d := f32(dst, nt*n, "SwiGLU dst")
	row := swigluRow
	if b.order == OrderAVX2 {
		row = swigluRow8
	}
	b.parallelRows(nt, func(t int) {
		row(d[t*n:(t+1)*n], g[t*n:(t+1)*n], u[t*n:(t+1)*n])
	})
}

func swigluRow(dst, x, g []float32) {
	n := len(x)
	g, dst = g[:n], dst[:n]
	v := n &^ 15
	if useAVX512 && v > 0 {
		swigluAVX512(&dst[0], &x[0], &g[0], v)
	} else if useAVX2 && v > 0 {
		swigluAVX2(&dst[0], &x[0], &g[0], v)
	} else {
		for i := 0; i < v; i++ {
			dst[i] = vSilu(x[i]) * g[i]
		}
	}
	for i := v; i < n; i++ {
		dst[i] = x[i] / (1 + expf(-x[i])) * g[i]
	}
}

// vSilu is ggml_v_silu (AVX-512): x / (1 + ggml_v_expf(0 - x)).
func vSilu(x float32) float32 {
	return x / (1 + vExpf(0-x))
}

// vExpf is ggml_v_expf for AVX-512 (ARM optimized-routines' expf: ≤ 1.95 ulp), one
// lane at a time.
func vExpf(x float32) float32 {
	const r = float32(0x1.8p23)
	z := fma32(x, 0x1.715476p+0, r)
	n := z - r
	b := fma32(-n, 0x1.7f7d1cp-20, fma32(-n, 0x1.62e4p-1, x))
	u := b * b
	j := fma32(
		fma32(fma32(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, fma32(0x1.555e66p-3, b, 0x1.fffdb6p-2)),
		u,
		fma32(0x1.ffffecp-1, b, 1))
	if n != n {
		return n
	}
	if float32(math.Abs(float64(n))) > 192 {
		if n <= 0 {
			return 0
		}
		return float32(math.Inf(1))
	}
	return float32(math.Ldexp(float64(j), int(n))) // _mm512_scalef_ps(j, n)
}

// Add: dst[j] += x[j] for j < n.
func (b *Backend) Add(dst, x backend.Buffer, n int) {
	d := f32(dst, n, "Add dst")
	xs := f32(x, n, "Add x")
	for i, v := range xs {
		d[i] += v
	}
}

// CopyRows: dst[dstRow·cols : (dstRow+n)·cols] = src[srcRow·cols : (srcRow+n)·cols].
func (b *Backend) CopyRows(dst backend.Buffer, dstRow int, src backend.Buffer, srcRow, n, cols int) {
	if dstRow < 0 || srcRow < 0 || n < 0 || cols < 0 {
		panic(fmt.Sprintf("BUG: cpu: CopyRows(dst row %d, src row %d, n %d, cols %d): negative argument", dstRow, srcRow, n, cols))
	}
	if dst == src {
		panic("BUG: cpu: CopyRows: dst is src")
	}
	s := f32(src, (srcRow+n)*cols, "CopyRows src")
	d := f32(dst, (dstRow+n)*cols, "CopyRows dst")
	copy(d[dstRow*cols:(dstRow+n)*cols], s[srcRow*cols:])
}

// TopK writes the k largest values of each of nt rows of logits[nt][n] and their ids,
// in the candidate order (backend.TopKRow: descending, ties by lower id, NaN below every
// number). It returns the first pending error, or an error for k outside [1, n].
func (b *Backend) TopK(logits backend.Buffer, nt, n, k int, ids []int32, vals []float32) error {
	if b.closed {
		return errClosed
	}
	checkNT(nt, "TopK")
	l := f32(logits, nt*n, "TopK logits")
	if err := b.takeErr(); err != nil {
		return err
	}
	if k < 1 || k > n {
		return fmt.Errorf("cpu: TopK: k = %d outside [1, %d]", k, n)
	}
	if len(ids) < nt*k || len(vals) < nt*k {
		panic(fmt.Sprintf("BUG: cpu: TopK: ids/vals hold %d/%d values, need %d", len(ids), len(vals), nt*k))
	}
	b.parallelRows(nt, func(t int) {
		backend.TopKRow(l[t*n:(t+1)*n], ids[t*k:(t+1)*k], vals[t*k:(t+1)*k])
	})
	return nil
}
