package cuda

import (
	"fmt"
	"os"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/cuda"
)

// Switches that turn a specialised path off, to bisect a wrong result to one kernel.
// Each is read once at start; `minfer bench --help` lists them (Switches).
var (
	noMultiRow = os.Getenv("MINFER_NO_MMVQ_MULTIROW") == "1" // matmul: one launch per row
	noGraphs   = os.Getenv("MINFER_NO_GRAPHS") == "1"        // Run: enqueue ops, never capture
)

// Switches lists the MINFER_NO_* environment switches and what each turns off.
func Switches() map[string]string {
	return map[string]string{
		"MINFER_NO_MMVQ_MULTIROW": "matmul: launch the mat-vec kernel once per row instead of once for up to 8 rows",
		"MINFER_NO_GRAPHS":        "CUDA graphs: enqueue every op on every forward instead of replaying a captured graph",
	}
}

func wt(x backend.Weight, what string) *Weight {
	w, ok := x.(*Weight)
	if !ok || w == nil {
		panic(fmt.Sprintf("BUG: cuda: %s: weight %T is not a CUDA weight", what, x))
	}
	if w.q == 0 {
		panic(fmt.Sprintf("BUG: cuda: %s: weight %q used after Free", what, w.name))
	}
	return w
}

func checkNT(nt int, what string) {
	if nt < 1 {
		panic(fmt.Sprintf("BUG: cuda: %s: nt = %d", what, nt))
	}
}

// vec returns a one-row weight's float32 values (pack stores every one-row weight so).
func (b *Backend) vec(x backend.Weight, what string) *Weight {
	w := wt(x, what)
	if w.rows != 1 || w.layout != "f32" {
		panic(fmt.Sprintf("BUG: cuda: %s: weight %q is %d × %d, want one row", what, w.name, w.rows, w.cols))
	}
	return w
}

func flat(n int) (cuda.Dim3, cuda.Dim3) {
	return cuda.Dim3{X: ceilDiv(n, 256)}, cuda.Dim3{X: 256}
}

// rowThreads is the block size for a per-row reduction over n values: a function of n
// only, so rows never depend on nt.
func rowThreads(n int) int { return min(1024, max(32, ceilDiv(n, 32)*32)) }

// Embed gathers dequantized table rows; an id outside the table is recorded.
func (b *Backend) Embed(dst backend.Buffer, table backend.Weight, ids backend.Buffer, nt int) {
	checkNT(nt, "Embed")
	w := wt(table, "Embed")
	d, id := f32(dst, nt*w.cols, "Embed dst"), i32(ids, nt, "Embed ids")
	defer b.enter()()
	b.launch("embed_"+w.layout, cuda.Dim3{X: ceilDiv(w.cols, 256), Y: nt}, cuda.Dim3{X: 256}, 0,
		cuda.P(w.q), cuda.P(w.d), cuda.P(w.e), cuda.P(id.p), cuda.P(d.p), cuda.I(w.rows), cuda.I(w.cols), cuda.P(b.errWord))
}

// RMSNorm: dst = x / sqrt(mean(x²) + eps) * w per row of w.Cols values.
func (b *Backend) RMSNorm(dst, x backend.Buffer, w backend.Weight, nt int, eps float32) {
	checkNT(nt, "RMSNorm")
	v := b.vec(w, "RMSNorm")
	xs, ds := f32(x, nt*v.cols, "RMSNorm x"), f32(dst, nt*v.cols, "RMSNorm dst")
	defer b.enter()()
	b.launch("rmsnorm", cuda.Dim3{X: nt}, cuda.Dim3{X: rowThreads(v.cols)}, 0,
		cuda.P(xs.p), cuda.P(v.q), cuda.P(ds.p), cuda.I(v.cols), cuda.F(eps))
}

// HeadNorm: RMSNorm of each head (w.Cols values) of x[nt][heads*w.Cols], in place.
func (b *Backend) HeadNorm(x backend.Buffer, w backend.Weight, nt, heads int, eps float32) {
	checkNT(nt, "HeadNorm")
	v := b.vec(w, "HeadNorm")
	xs := f32(x, nt*heads*v.cols, "HeadNorm x")
	defer b.enter()()
	b.launch("rmsnorm", cuda.Dim3{X: nt * heads}, cuda.Dim3{X: rowThreads(v.cols)}, 0,
		cuda.P(xs.p), cuda.P(v.q), cuda.P(xs.p), cuda.I(v.cols), cuda.F(eps))
}

// AddBias: x[i] += bias for each of nt rows.
func (b *Backend) AddBias(x backend.Buffer, bias backend.Weight, nt int) {
	checkNT(nt, "AddBias")
	v := b.vec(bias, "AddBias")
	xs := f32(x, nt*v.cols, "AddBias x")
	defer b.enter()()
	g, bl := flat(nt * v.cols)
	b.launch("add_bias", g, bl, 0, cuda.P(xs.p), cuda.P(v.q), cuda.I(nt*v.cols), cuda.I(v.cols))
}

// SwiGLU: dst = silu(gate) * up over nt*n values.
func (b *Backend) SwiGLU(dst, gate, up backend.Buffer, nt, n int) {
	checkNT(nt, "SwiGLU")
	d, g, u := f32(dst, nt*n, "SwiGLU dst"), f32(gate, nt*n, "SwiGLU gate"), f32(up, nt*n, "SwiGLU up")
	defer b.enter()()
	gr, bl := flat(nt * n)
	b.launch("swiglu", gr, bl, 0, cuda.P(d.p), cuda.P(g.p), cuda.P(u.p), cuda.I(nt*n))
}

// Add: dst[j] += x[j] for j < n.
func (b *Backend) Add(dst, x backend.Buffer, n int) {
	d, xs := f32(dst, n, "Add dst"), f32(x, n, "Add x")
	if n == 0 {
		return
	}
	defer b.enter()()
	g, bl := flat(n)
	b.launch("add", g, bl, 0, cuda.P(d.p), cuda.P(xs.p), cuda.I(n))
}

// CopyRows: dst[0:n*cols] = src[row*cols:(row+n)*cols].
func (b *Backend) CopyRows(dst, src backend.Buffer, row, n, cols int) {
	if row < 0 || n < 0 || cols < 0 {
		panic(fmt.Sprintf("BUG: cuda: CopyRows(row %d, n %d, cols %d)", row, n, cols))
	}
	s, d := f32(src, (row+n)*cols, "CopyRows src"), f32(dst, n*cols, "CopyRows dst")
	defer b.enter()()
	b.fail(b.stream.CopyDtoD(d.p, s.at(row*cols), 4*n*cols))
}

// MatMul: dst[nt][w.Rows] = x[nt][w.Cols] · wᵀ with the mat-vec kernels (see package doc).
func (b *Backend) MatMul(dst backend.Buffer, w backend.Weight, x backend.Buffer, nt int) {
	checkNT(nt, "MatMul")
	W := wt(w, "MatMul")
	xs, ds := f32(x, nt*W.cols, "MatMul x"), f32(dst, nt*W.rows, "MatMul dst")
	if xs == ds {
		panic("BUG: cuda: MatMul: dst aliases x")
	}
	defer b.enter()()
	kernel := W.layout
	var xq, xd cuda.DevicePtr
	switch W.layout {
	case "f16":
		kernel = map[bool]string{true: "f16v", false: "f16s"}[W.cols%8 == 0]
	case "f32":
		kernel = map[bool]string{true: "f32v", false: "f32s"}[W.cols%4 == 0]
	default:
		// Quantize all nt rows once: int8 values, then one float scale per 32.
		nblocks := nt * W.cols / 32
		qBytes := int64(ceilDiv(nt*W.cols, 256) * 256)
		sc := b.scratchFor("q8", qBytes+int64(4*nblocks))
		if sc == 0 {
			return
		}
		xq, xd = sc, sc+cuda.DevicePtr(qBytes)
		b.launch("quantize_q8", cuda.Dim3{X: ceilDiv(nblocks, 8)}, cuda.Dim3{X: 256}, 0,
			cuda.P(xs.p), cuda.P(xq), cuda.P(xd), cuda.I(nblocks))
	}
	warps := b.tier.MMVQWarps
	step := b.tier.MMVQMaxRows
	if noMultiRow {
		step = 1
	}
	for r0 := 0; r0 < nt; r0 += step {
		n := min(step, nt-r0)
		var q, d cuda.DevicePtr
		if xq != 0 {
			q, d = xq+cuda.DevicePtr(r0*W.cols), xd+cuda.DevicePtr(4*r0*W.cols/32)
		}
		b.launch(fmt.Sprintf("mmvq_%s_%d", kernel, n), cuda.Dim3{X: ceilDiv(W.rows, warps)}, cuda.Dim3{X: 32 * warps}, 0,
			cuda.P(W.q), cuda.P(W.d), cuda.P(W.e), cuda.P(q), cuda.P(d), cuda.P(xs.at(r0*W.cols)),
			cuda.P(ds.at(r0*W.rows)), cuda.I(W.rows), cuda.I(W.cols))
	}
}
