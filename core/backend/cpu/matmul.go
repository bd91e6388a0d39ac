package cpu

import (
	"sync"
	"unsafe"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/quant"
)

type kernelKind int

const (
	kindNone  kernelKind = iota // no matmul for this type
	kindF32                     // float32 weights × float32 activations
	kindF16                     // binary16 weights × activations rounded to binary16
	kindBF16                    // bfloat16 weights × activations rounded to bfloat16
	kindQuant                   // block weights × activations quantized to VecDotType
)

// matKernel is how MatMul multiplies by one weight: chosen once, in NewWeight.
type matKernel struct {
	kind        kernelKind
	lanes16     bool       // kindF32/kindF16/kindBF16: tinyBLAS summation order (else ggml_vec_dot's)
	avx2        bool       // kindF32/kindF16/kindBF16: the orders of ggml's AVX2 build (OrderAVX2)
	vdt         quant.Type // kindQuant: the activation type
	actRowBytes int        // kindQuant: bytes of one quantized activation row
	quantize    func(dst []byte, src []float32)
	dot         func(n int, w, x []byte) float32
	tile        bool // kindQuant: use quant.DotTile (same bits as dot, weights reused across rows)
}

// matKernelFor picks the kernel for w in order o, or kindNone when the type has no dot
// product.
func matKernelFor(w *Weight, o Order) matKernel {
	// llama.cpp runs tinyBLAS for batches when k%KN == 0 and m%4 == 0 and
	// ggml_vec_dot_* otherwise; using one order for every nt keeps row identity. KN is
	// the vector's float count: 16 for F32/F16 (AVX-512), 32 for BF16 (AVX512-BF16),
	// 8 for all three in an AVX2 build.
	kn, kn16 := 16, 32
	if o == OrderAVX2 {
		kn, kn16 = 8, 8
	}
	avx2 := o == OrderAVX2
	switch w.typ {
	case quant.F32:
		return matKernel{kind: kindF32, lanes16: w.cols%kn == 0 && w.rows%4 == 0, avx2: avx2}
	case quant.F16:
		return matKernel{kind: kindF16, lanes16: w.cols%kn == 0 && w.rows%4 == 0, avx2: avx2}
	case quant.BF16:
		return matKernel{kind: kindBF16, lanes16: w.cols%kn16 == 0 && w.rows%4 == 0, avx2: avx2}
	}
	vdt, dot := vecDotOf(w.tr)
	if dot == nil {
		return matKernel{}
	}
	q := actQuantizer(vdt)
	if q == nil {
		return matKernel{}
	}
	arb, err := vdt.RowBytes(w.cols)
	if err != nil {
		return matKernel{}
	}
	return matKernel{kind: kindQuant, vdt: vdt, actRowBytes: arb, quantize: q, dot: dot, tile: true}
}

// actQuantizer is how ggml-cpu converts an activation row to vdt (its from_float:
// for Q8_0/Q8_1 the x86 SIMD quantizer, which differs from the reference one).
func actQuantizer(vdt quant.Type) func(dst []byte, src []float32) {
	tr, ok := vdt.Lookup()
	if !ok {
		return nil
	}
	return tr.FromFloat
}

// MatMul: dst[nt][w.Rows] = x[nt][w.Cols] · wᵀ (see backend.Backend). Each activation
// row is converted once; the weight rows are split into chunks handed to the workers,
// and within a chunk every activation row passes over the chunk's rows while they are
// in cache. Every output value is one complete dot product, so rows are identical for
// any nt.
func (b *Backend) MatMul(dst backend.Buffer, wt backend.Weight, xb backend.Buffer, nt int) {
	checkNT(nt, "MatMul")
	w := weight(wt, "MatMul")
	if dst == xb {
		panic("BUG: cpu: MatMul: dst aliases x")
	}
	x := f32(xb, nt*w.cols, "MatMul x")
	d := f32(dst, nt*w.rows, "MatMul dst")
	chunk := rowChunk(w.rows, b.threads)
	work := nt * w.rows * w.cols
	switch w.mm.kind {
	case kindF32:
		b.pool.chunksWork(work, w.rows, chunk, func(_, lo, hi int) {
			for t := range nt {
				xr := x[t*w.cols : (t+1)*w.cols]
				out := d[t*w.rows : (t+1)*w.rows]
				for r := lo; r < hi; r++ {
					wr := w.f32[r*w.cols : (r+1)*w.cols]
					switch {
					case w.mm.avx2 && w.mm.lanes16:
						out[r] = dotLanes8F32(wr, xr)
					case w.mm.avx2:
						out[r] = dotVec8F32(wr, xr)
					case w.mm.lanes16:
						out[r] = dotLanes16F32(wr, xr)
					default:
						out[r] = dotVecF32(wr, xr)
					}
				}
			}
		})
	case kindF16:
		act := b.actScratch(nt * w.cols * 2)
		a16 := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(act))), nt*w.cols)
		b.parallelRows(nt, func(t int) {
			xr := x[t*w.cols : (t+1)*w.cols]
			ar := a16[t*w.cols : (t+1)*w.cols]
			for i, v := range xr {
				ar[i] = quant.F32ToF16(v)
			}
		})
		b.pool.chunksWork(work, w.rows, chunk, func(_, lo, hi int) {
			for t := range nt {
				xr := a16[t*w.cols : (t+1)*w.cols]
				out := d[t*w.rows : (t+1)*w.rows]
				r := lo
				if w.mm.avx2 {
					for ; r < hi; r++ {
						wr := w.f16[r*w.cols : (r+1)*w.cols]
						if w.mm.lanes16 {
							out[r] = dotLanes8F16(wr, xr)
						} else {
							out[r] = dotVec8F16(wr, xr)
						}
					}
				}
				if w.mm.lanes16 {
					for ; r+4 <= hi; r += 4 {
						dotLanes16F16x4(out[r:r+4], w.f16[r*w.cols:(r+4)*w.cols], xr)
					}
				}
				for ; r < hi; r++ {
					wr := w.f16[r*w.cols : (r+1)*w.cols]
					if w.mm.lanes16 {
						out[r] = dotLanes16F16(wr, xr)
					} else {
						out[r] = dotVecF16(wr, xr)
					}
				}
			}
		})
	case kindBF16:
		act := b.actScratch(nt * w.cols * 2)
		a16 := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(act))), nt*w.cols)
		b.parallelRows(nt, func(t int) {
			xr := x[t*w.cols : (t+1)*w.cols]
			ar := a16[t*w.cols : (t+1)*w.cols]
			for i, v := range xr {
				ar[i] = quant.F32ToBF16(v) // ggml_cpu_fp32_to_bf16
			}
		})
		dot := dotVecBF16
		switch {
		case w.mm.avx2 && w.mm.lanes16:
			dot = dotLanes8BF16
		case w.mm.avx2:
			dot = dotVec8BF16
		case w.mm.lanes16:
			dot = dotLanes32BF16
		}
		b.pool.chunksWork(work, w.rows, chunk, func(_, lo, hi int) {
			for t := range nt {
				xr := a16[t*w.cols : (t+1)*w.cols]
				out := d[t*w.rows : (t+1)*w.rows]
				for r := lo; r < hi; r++ {
					out[r] = dot(w.bf16[r*w.cols:(r+1)*w.cols], xr)
				}
			}
		})
	case kindQuant:
		arb := w.mm.actRowBytes
		act := b.actScratch(nt * arb)
		var prep *quant.TilePrep
		if w.mm.tile && b.prep.Reset(w.typ, w.cols, nt) {
			// The tile kernels' layout of the activations, made once here (by pairs of
			// rows, each right after its rows are quantized) for all the chunks.
			prep = &b.prep
			b.parallelRows((nt+1)/2, func(p int) {
				lo, hi := 2*p, min(2*p+2, nt)
				for t := lo; t < hi; t++ {
					w.mm.quantize(act[t*arb:(t+1)*arb], x[t*w.cols:(t+1)*w.cols])
				}
				if err := prep.PrepareRows(act[lo*arb:hi*arb], arb, lo, hi); err != nil {
					b.failf("MatMul: weight %q: %v", w.name, err)
				}
			})
		} else {
			b.parallelRows(nt, func(t int) {
				w.mm.quantize(act[t*arb:(t+1)*arb], x[t*w.cols:(t+1)*w.cols])
			})
		}
		dot, rb, cols := w.mm.dot, w.rowBytes, w.cols
		if w.mm.tile && w.tileScales == nil && w.rows > 1 && quant.TileScalesUsed(w.typ, cols, nt) {
			// A Backend is used by one goroutine at a time: no other MatMul reads it now.
			w.tileScales = quant.TileScales(w.typ, w.data, rb, w.rows, cols)
		}
		if w.mm.tile {
			// core/quant's tile kernels reuse each weight block across all nt rows:
			// hand them large chunks.
			b.pool.chunksWork(work, w.rows, tileChunk(w.rows, b.threads), func(_, lo, hi int) {
				tl := tilePool.Get().(*quant.Tile)
				*tl = quant.Tile{N: cols, W: w.data[lo*rb : hi*rb], WStride: rb, Rows: hi - lo,
					X: act, XStride: arb, NX: nt, Out: d[lo:], OutStride: w.rows, Prep: prep, Repacked: w.repacked}
				if w.tileScales != nil && lo%4 == 0 {
					// TileScales' groups of four rows: chunk lo starts group lo/4.
					tl.WScales = w.tileScales[lo/4*w.cols/32*4:]
				}
				err := quant.DotTile(w.typ, tl)
				*tl = quant.Tile{}
				tilePool.Put(tl)
				if err != nil {
					b.failf("MatMul: weight %q: %v", w.name, err)
				}
			})
			return
		}
		b.pool.chunksWork(work, w.rows, chunk, func(_, lo, hi int) {
			wd := w.data[lo*rb : hi*rb]
			for t := range nt {
				xr := act[t*arb : (t+1)*arb]
				out := d[t*w.rows+lo : t*w.rows+hi]
				for i := range out {
					out[i] = dot(cols, wd[i*rb:(i+1)*rb], xr)
				}
			}
		})
	default:
		b.failf("MatMul: weight %q: no dot product for %s weights", w.name, w.typ)
	}
}

// tilePool holds the quant.Tile descriptors of MatMul's chunks: DotTile's argument
// escapes (it dispatches through a table), and one allocation per chunk added up to
// ≈ 1500 per decoded token.
var tilePool = sync.Pool{New: func() any { return new(quant.Tile) }}

// rowChunk is how many weight rows one work item covers: small enough to give every
// worker several items (load balance on a shared machine), at most 64 rows so that the
// item's weights stay in L2 while all activation rows pass over them.
func rowChunk(rows, threads int) int {
	c := rows / (threads * 8)
	return min(max(c, 4), 64)
}

// tileChunk is the weight rows of one DotTile call: at least 64 so the per-call
// activation preparation is amortised, at most 256 (a Q8_0 chunk of 256×896 is 240 KB,
// well inside L2), and small enough to give each worker about four chunks.
func tileChunk(rows, threads int) int {
	c := rows / (threads * 4)
	c = min(max(c, 64), 256)
	return (c + 7) &^ 7
}

// parallelRows runs fn(t) for t < nt, on the workers when there is enough work.
func (b *Backend) parallelRows(nt int, fn func(t int)) {
	if nt < 4 {
		for t := range nt {
			fn(t)
		}
		return
	}
	b.pool.chunks(nt, 1, func(_, lo, hi int) {
		for t := lo; t < hi; t++ {
			fn(t)
		}
	})
}

// actScratch returns n bytes of the reused activation scratch (8-byte aligned).
func (b *Backend) actScratch(n int) []byte {
	if cap(b.actBuf) < n {
		words := make([]uint64, (n+7)/8)
		b.actBuf = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), len(words)*8)
	}
	return b.actBuf[:n]
}
