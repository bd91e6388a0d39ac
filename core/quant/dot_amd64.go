package quant

import (
	"encoding/binary"
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:generate sh -c "cd internal/asmgen && go run . -out ../../dot_amd64.s -stubs ../../dot_amd64_stubs.go -pkg quant"

// hasAVX2 selects the generated kernels: AVX2 for the integer work, F16C for the block
// scales and F16 rows, POPCNT for the codebook formats' sign parity. Without them the pure-Go definitions run (same results).
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasF16C && cpu.X86.HasFMA && cpu.X86.HasPOPCNT

// simdDot is the SIMD kernel of t on this CPU, or nil: setDot installs it in place of
// the pure-Go definition, whichever file's init runs first.
func simdDot(t Type) func(int, []byte, []byte) float32 {
	if !hasAVX2 {
		return nil
	}
	return simdKernels[t][0]
}

// simdKernels names the SIMD kernels and their pure-Go definitions, for the tests.
var simdKernels = map[Type][2]func(int, []byte, []byte) float32{
	Q8_0:    {dotQ8_0SIMD, dotQ8_0},
	Q4_0:    {dotQ4_0SIMD, dotQ4_0},
	Q5_0:    {dotQ5_0SIMD, dotQ5_0},
	F16:     {dotF16SIMD, dotF16},
	BF16:    {dotBF16SIMD, dotBF16},
	Q4_K:    {dotQ4_KSIMD, dotQ4_K},
	Q6_K:    {dotQ6_KSIMD, dotQ6_K},
	Q2_K:    {dotQ2_KSIMD, dotQ2_K},
	Q3_K:    {dotQ3_KSIMD, dotQ3_K},
	Q5_K:    {dotQ5_KSIMD, dotQ5_K},
	Q4_1:    {dotQ4_1SIMD, dotQ4_1},
	Q5_1:    {dotQ5_1SIMD, dotQ5_1},
	IQ4_NL:  {dotIQ4_NLSIMD, dotIQ4_NL},
	MXFP4:   {dotMXFP4SIMD, dotMXFP4},
	IQ3_S:   {dotIQ3_SSIMD, dotIQ3_S},
	IQ3_XXS: {dotIQ3_XXSSIMD, dotIQ3_XXS},
	IQ2_XXS: {dotIQ2_XXSSIMD, dotIQ2_XXS},
	IQ2_XS:  {dotIQ2_XSSIMD, dotIQ2_XS},
	IQ2_S:   {dotIQ2_SSIMD, dotIQ2_S},
	IQ1_S:   {dotIQ1_SSIMD, dotIQ1_S},
	IQ1_M:   {dotIQ1_MSIMD, dotIQ1_M},
	IQ4_XS:  {dotIQ4_XSSIMD, dotIQ4_XS},
}

// blocks32 checks w and x hold nb = n/32 blocks (w of wBytes each, x of Q8_0) and
// returns nb. The kernels are called directly (not through a func value) so that their
// //go:noescape accumulator stays on the stack: no allocation per dot.
func blocks32(n int, w, x []byte, wBytes int) int {
	nb := n / qk
	if nb > 0 {
		_ = w[nb*wBytes-1]
		_ = x[nb*q8_0Bytes-1]
	}
	return nb
}

func dotQ8_0SIMD(n int, w, x []byte) float32 {
	nb := blocks32(n, w, x, q8_0Bytes)
	if nb == 0 {
		return 0
	}
	var acc lanes8
	dotQ8_0AVX2(&w[0], &x[0], nb, (*[8]float32)(&acc))
	return acc.sum()
}

func dotQ4_0SIMD(n int, w, x []byte) float32 {
	nb := blocks32(n, w, x, q4_0Bytes)
	if nb == 0 {
		return 0
	}
	var acc lanes8
	dotQ4_0AVX2(&w[0], &x[0], nb, (*[8]float32)(&acc))
	return acc.sum()
}

func dotQ5_0SIMD(n int, w, x []byte) float32 {
	nb := blocks32(n, w, x, q5_0Bytes)
	if nb == 0 {
		return 0
	}
	var acc lanes8
	dotQ5_0AVX2(&w[0], &x[0], nb, (*[8]float32)(&acc))
	return acc.sum()
}

func dotQ4_KSIMD(n int, w, x []byte) float32 {
	nb := n / QK_K
	if nb == 0 {
		return 0
	}
	_ = w[nb*q4_KBytes-1]
	_ = x[nb*q8_KBytes-1]
	var acc lanes8
	var accM [4]float32
	dotQ4_KAVX2(&w[0], &x[0], nb, (*[8]float32)(&acc), &accM)
	return acc.sum() + ((accM[0] + accM[2]) + (accM[1] + accM[3]))
}

func dotQ2_KSIMD(n int, w, x []byte) float32 {
	nb := n / QK_K
	if nb == 0 {
		return 0
	}
	_ = w[nb*q2_KBytes-1]
	_ = x[nb*q8_KBytes-1]
	var acc lanes8
	dotQ2_KAVX2(&w[0], &x[0], nb, (*[8]float32)(&acc))
	return acc.sum()
}

// dotQ3_KSIMD unpacks the 6-bit scales here, q3KChunk super-blocks at a time, for the
// SIMD loop.
func dotQ3_KSIMD(n int, w, x []byte) float32 {
	const q3KChunk = 16
	nb := n / QK_K
	if nb == 0 {
		return 0
	}
	_ = w[nb*q3_KBytes-1]
	_ = x[nb*q8_KBytes-1]
	var acc lanes8
	var sc [q3KChunk][16]int16
	for b0 := 0; b0 < nb; b0 += q3KChunk {
		m := min(q3KChunk, nb-b0)
		for b := 0; b < m; b++ {
			s := q3Scales(w[(b0+b)*q3_KBytes+96:])
			for g, v := range s {
				sc[b][g] = int16(v) - 32
			}
		}
		dotQ3_KAVX2(&w[b0*q3_KBytes], &x[b0*q8_KBytes], m, &sc[0][0], (*[8]float32)(&acc))
	}
	return acc.sum()
}

func dotQ5_KSIMD(n int, w, x []byte) float32 {
	nb := n / QK_K
	if nb == 0 {
		return 0
	}
	_ = w[nb*q5_KBytes-1]
	_ = x[nb*q8_KBytes-1]
	var acc lanes8
	var summs float32
	dotQ5_KAVX2(&w[0], &x[0], nb, (*[8]float32)(&acc), &summs)
	return acc.sum() + summs
}

func dotQ6_KSIMD(n int, w, x []byte) float32 {
	nb := n / QK_K
	if nb == 0 {
		return 0
	}
	_ = w[nb*q6_KBytes-1]
	_ = x[nb*q8_KBytes-1]
	var acc lanes8
	dotQ6_KAVX2(&w[0], &x[0], nb, (*[8]float32)(&acc))
	return acc.sum()
}

// dotQ4_1SIMD and dotQ5_1SIMD run the lanes in SIMD and ggml's scalar Σ m·s here, in
// block order.
func dotQ4_1SIMD(n int, w, x []byte) float32 {
	nb := n / qk
	if nb == 0 {
		return 0
	}
	_ = w[nb*q4_1Bytes-1]
	_ = x[nb*q8_1Bytes-1]
	var acc lanes8
	dotQ4_1AVX2(&w[0], &x[0], nb, (*[8]float32)(&acc))
	return acc.sum() + minSums(nb, w, x, q4_1Bytes)
}

func dotQ5_1SIMD(n int, w, x []byte) float32 {
	nb := n / qk
	if nb == 0 {
		return 0
	}
	_ = w[nb*q5_1Bytes-1]
	_ = x[nb*q8_1Bytes-1]
	var acc lanes8
	dotQ5_1AVX2(&w[0], &x[0], nb, (*[8]float32)(&acc))
	return acc.sum() + minSums(nb, w, x, q5_1Bytes)
}

// minSums is Σ f16(w.m)·f16(x.s) over nb blocks (Q4_1/Q5_1 against Q8_1), in order.
func minSums(nb int, w, x []byte, wBytes int) float32 {
	var summs float32
	for b := 0; b < nb; b++ {
		summs = fma32(f16At(w[b*wBytes+2:]), f16At(x[b*q8_1Bytes+2:]), summs)
	}
	return summs
}

// dotIQ4_NLSIMD runs the block pairs in SIMD and an odd last block as dotIQ4_NL does.
func dotIQ4_NLSIMD(n int, w, x []byte) float32 {
	nb := blocks32(n, w, x, iq4NLBytes)
	var acc [2]lanes8
	if nb >= 2 {
		dotIQ4_NLAVX2(&w[0], &x[0], nb/2, (*[16]float32)(unsafe.Pointer(&acc)))
	}
	var sum lanes8
	for k := range sum {
		sum[k] = acc[0][k] + acc[1][k]
	}
	s := sum.sum()
	if nb%2 == 1 {
		b := nb - 1
		wb, xb := w[b*iq4NLBytes:(b+1)*iq4NLBytes], x[b*q8_0Bytes:(b+1)*q8_0Bytes]
		var si int32
		for j := 0; j < qk; j++ {
			si += iq4Value(wb[2:], j) * int32(int8(xb[2+j]))
		}
		s = fma32(f16At(xb)*f16At(wb), float32(si), s)
	}
	return s
}

// dotMXFP4SIMD runs the block pairs in SIMD and an odd last block as dotMXFP4 does.
func dotMXFP4SIMD(n int, w, x []byte) float32 {
	nb := blocks32(n, w, x, mxfp4Bytes)
	var acc [2]lanes8
	if nb >= 2 {
		dotMXFP4AVX2(&w[0], &x[0], nb/2, (*[16]float32)(unsafe.Pointer(&acc)))
	}
	var sum lanes8
	for k := range sum {
		sum[k] = acc[0][k] + acc[1][k]
	}
	s := sum.sum()
	if nb%2 == 1 {
		b := nb - 1
		wb, xb := w[b*mxfp4Bytes:(b+1)*mxfp4Bytes], x[b*q8_0Bytes:(b+1)*q8_0Bytes]
		var si int32
		for j := 0; j < qk; j++ {
			si += fp4Value(wb[1:], j) * int32(int8(xb[2+j]))
		}
		s = fma32(f16At(xb)*e8m0Half(wb[0]), float32(si), s)
	}
	return s
}

func dotIQ3_SSIMD(n int, w, x []byte) float32 {
	nb := n / QK_K
	if nb == 0 {
		return 0
	}
	_ = w[nb*iq3SBytes-1]
	_ = x[nb*q8_KBytes-1]
	var acc lanes8
	dotIQ3_SAVX2(&w[0], &x[0], nb, &iq3SGrid[0], (*[8]float32)(&acc))
	return acc.sum()
}

// cbBlocks checks w and x hold nb = n/256 super-blocks (w of bBytes each) and returns
// nb. The kernels are called directly (not through a func value) so that their
// //go:noescape accumulator stays on the stack.
func cbBlocks(n int, w, x []byte, bBytes int) int {
	nb := n / QK_K
	if nb > 0 {
		_ = w[nb*bBytes-1]
		_ = x[nb*q8_KBytes-1]
	}
	return nb
}

// The codebook dots scale the sum as the pure-Go iqKind.dot does (fscale/2).

func dotIQ3_XXSSIMD(n int, w, x []byte) float32 {
	var acc lanes8
	if nb := cbBlocks(n, w, x, iq3XXSBytes); nb > 0 {
		dotIQ3_XXSAVX2(&w[0], &x[0], nb, (*byte)(unsafe.Pointer(&iq3XXSGrid[0])), (*[8]float32)(&acc))
	}
	return iq3XXSKind.fscale / 2 * acc.sum()
}

func dotIQ2_XXSSIMD(n int, w, x []byte) float32 {
	var acc lanes8
	if nb := cbBlocks(n, w, x, iq2XXSBytes); nb > 0 {
		dotIQ2_XXSAVX2(&w[0], &x[0], nb, (*byte)(unsafe.Pointer(&iq2XXSGrid[0])), (*[8]float32)(&acc))
	}
	return iq2XXSKind.fscale / 2 * acc.sum()
}

func dotIQ2_XSSIMD(n int, w, x []byte) float32 {
	var acc lanes8
	if nb := cbBlocks(n, w, x, iq2XSBytes); nb > 0 {
		dotIQ2_XSAVX2(&w[0], &x[0], nb, (*byte)(unsafe.Pointer(&iq2XSGrid[0])), (*[8]float32)(&acc))
	}
	return iq2XSKind.fscale / 2 * acc.sum()
}

func dotIQ2_SSIMD(n int, w, x []byte) float32 {
	var acc lanes8
	if nb := cbBlocks(n, w, x, iq2SBytes); nb > 0 {
		dotIQ2_SAVX2(&w[0], &x[0], nb, (*byte)(unsafe.Pointer(&iq2SGrid[0])), (*[8]float32)(&acc))
	}
	return iq2SKind.fscale / 2 * acc.sum()
}

func dotIQ1_SSIMD(n int, w, x []byte) float32 {
	var acc lanes8
	var acc1 float32
	if nb := cbBlocks(n, w, x, iq1SBytes); nb > 0 {
		dotIQ1_SAVX2(&w[0], &x[0], nb, (*byte)(unsafe.Pointer(&iq1SGrid[0])), (*[8]float32)(&acc), &acc1)
	}
	return acc.sum() + iq1Delta*acc1
}

func dotIQ1_MSIMD(n int, w, x []byte) float32 {
	var acc1, acc2 lanes8
	if nb := cbBlocks(n, w, x, iq1MBytes); nb > 0 {
		dotIQ1_MAVX2(&w[0], &x[0], nb, (*byte)(unsafe.Pointer(&iq1SGrid[0])), (*[8]float32)(&acc1), (*[8]float32)(&acc2))
	}
	return acc1.sum() + iq1Delta*acc2.sum()
}

func dotIQ4_XSSIMD(n int, w, x []byte) float32 {
	nb := n / QK_K
	if nb == 0 {
		return 0
	}
	_ = w[nb*iq4XSBytes-1]
	_ = x[nb*q8_KBytes-1]
	var acc lanes8
	dotIQ4_XSAVX2(&w[0], &x[0], nb, (*[8]float32)(&acc))
	return acc.sum()
}

func dotBF16SIMD(n int, w, x []byte) float32 {
	var acc lanes32
	w, x = w[:2*n], x[:2*n]
	m := n &^ 31
	if m > 0 {
		dotBF16AVX2(&w[0], &x[0], m, (*[32]float32)(&acc))
	}
	for i := m; i < n; i++ {
		a := BF16ToF32(binary.LittleEndian.Uint16(w[2*i:]))
		b := BF16ToF32(binary.LittleEndian.Uint16(x[2*i:]))
		acc[i%32] += float32(a * b)
	}
	return acc.sum()
}

func dotF16SIMD(n int, w, x []byte) float32 {
	var acc lanes32
	w, x = w[:2*n], x[:2*n]
	m := n &^ 31
	if m > 0 {
		dotF16AVX2(&w[0], &x[0], m, (*[32]float32)(&acc))
	}
	for i := m; i < n; i++ {
		acc[i%32] += float32(f16At(w[2*i:]) * f16At(x[2*i:]))
	}
	return acc.sum()
}

func init() {
	if !hasAVX2 {
		return
	}
	table[Q8_0].FromFloat = fromFloatQ8_0SIMD
	table[Q8_K].FromFloat = fromFloatQ8_KSIMD
}

func fromFloatQ8_0SIMD(dst []byte, src []float32) {
	nb := len(src) / qk
	if nb == 0 {
		return
	}
	_ = dst[nb*q8_0Bytes-1]
	fromFloatQ8_0AVX2(&dst[0], &src[0], nb)
}

// fromFloatQ8_KSIMD is quantizeQ8_K with the levels from SIMD code and the group sums
// added here.
func fromFloatQ8_KSIMD(dst []byte, src []float32) {
	nb := len(src) / QK_K
	if nb == 0 {
		return
	}
	_ = dst[nb*q8_KBytes-1]
	fromFloatQ8_KAVX2(&dst[0], &src[0], nb)
	for b := 0; b < nb; b++ {
		q8KBsums(dst[b*q8_KBytes : (b+1)*q8_KBytes])
	}
}

// tileKernels holds the SIMD tile kernels (DotTile) by weight type: the AVX-512 ones
// (tile_amd64.go) where the CPU has them, else these AVX2 row loops, which run each
// activation row over all weight rows in one call (VecDot's bits, without a Go call and
// a spilled accumulator per dot: the trained target's 4096×512 output head is 16 blocks
// a row).
var tileKernels = map[Type]func(*Tile){}

func init() {
	if !hasAVX2 || hasTileZ {
		return
	}
	tileKernels[Q8_0] = func(tl *Tile) {
		tileRowsAVX2(tl, rowsQ8_0AVX2, rows4wQ8_0AVX2, rows4Q8_0AVX2, nil, rows4pQ8_0AVX2)
	}
	// Four weight rows × two activation rows a pass was tried (commit 11dcf4f, removed
	// after): 2-23% slower than rows4x2 with AVX-512 off (docs/PERFORMANCE.md).
	tileKernels[Q4_0] = func(tl *Tile) { tileUnpackedAVX2(tl, &unpackedQ4_0) }
	tileKernels[Q5_0] = func(tl *Tile) { tileUnpackedAVX2(tl, &unpackedQ5_0) }
	tileKernels[Q4_K] = func(tl *Tile) { tileRowsKAVX2(tl, rows4Q4_KAVX2, dotQ4_KSIMD) }
	tileKernels[Q6_K] = func(tl *Tile) { tileRowsKAVX2(tl, rows4Q6_KAVX2, dotQ6_KSIMD) }
}

// tileRowsKAVX2 runs a K-quant tile (checked) four activation rows at a time through
// rows4, which unpacks each weight super-block once for the four (VecDot unpacks it
// once per dot: 24 % of a Qwen2.5-0.5B Q4_K_M prefill went to the Q4_K and Q6_K
// VecDots), and the remaining rows through dot, with VecDot's bits either way.
func tileRowsKAVX2(tl *Tile, rows4 rows4Func, dot func(int, []byte, []byte) float32) {
	nb := tl.N / QK_K
	t := 0
	if nb > 0 {
		for ; t+4 <= tl.NX; t += 4 {
			rows4(&tl.W[0], tl.WStride, tl.Rows, &tl.X[t*tl.XStride], tl.XStride, nb, &tl.Out[t*tl.OutStride], tl.OutStride)
		}
	}
	for ; t < tl.NX; t++ {
		x, out := tl.X[t*tl.XStride:], tl.Out[t*tl.OutStride:]
		for r := 0; r < tl.Rows; r++ {
			out[r] = dot(tl.N, tl.W[r*tl.WStride:], x)
		}
	}
}

// rowsFunc is the signature of the generated one-activation-row kernels (rows4w: four
// weight rows a pass, rows a multiple of four), rows4Func that of the
// four-activation-row kernels; rows4x2Func that of the two-weight-row ones, which read
// the activation scales prepared by prepScales4AVX2.
type (
	rowsFunc    func(w *byte, wStride, rows int, x *byte, nb int, out *float32)
	rows4Func   func(w *byte, wStride, rows int, x *byte, xStride, nb int, out *float32, outStride int)
	rows4x2Func func(w *byte, wStride, rows int, x *byte, xStride, nb int, xd *float32, out *float32, outStride int)
)

// scalesPool holds prepScales4AVX2's buffers.
var scalesPool = sync.Pool{New: func() any { return new([]float32) }}

// tileRowsAVX2 runs the generated row kernels over tl (checked): four activation rows at
// a time (each weight block unpacked once for the four; with rows4x2, Q4_0/Q5_0, two
// weight rows at a time sharing each activation load; rows4p, Q8_0, one weight row with
// the prepared scales), then one at a time (rows4w: four weight rows at a time, four
// independent FMA chains; the rest through rows).
func tileRowsAVX2(tl *Tile, rows, rows4w rowsFunc, rows4 rows4Func, rows4x2, rows4p rows4x2Func) {
	nb := tl.N / qk
	if nb == 0 {
		for t := 0; t < tl.NX; t++ {
			clear(tl.Out[t*tl.OutStride : t*tl.OutStride+tl.Rows])
		}
		return
	}
	var xd []float32
	if (rows4x2 != nil && tl.Rows >= 2 || rows4p != nil) && tl.NX >= 4 {
		bp := scalesPool.Get().(*[]float32)
		defer scalesPool.Put(bp)
		if cap(*bp) < 32*nb {
			*bp = make([]float32, 32*nb)
		}
		xd = (*bp)[:32*nb]
	}
	t := 0
	for ; t+4 <= tl.NX; t += 4 {
		x, out := &tl.X[t*tl.XStride], tl.Out[t*tl.OutStride:]
		r := 0
		if xd != nil {
			prepScales4AVX2(&tl.X[t*tl.XStride], tl.XStride, nb, &xd[0])
		}
		if xd != nil && rows4x2 != nil && tl.Rows >= 2 {
			r = tl.Rows &^ 1
			rows4x2(&tl.W[0], tl.WStride, r, x, tl.XStride, nb, &xd[0], &out[0], tl.OutStride)
		}
		switch {
		case r == tl.Rows:
		case xd != nil && rows4p != nil:
			rows4p(&tl.W[r*tl.WStride], tl.WStride, tl.Rows-r, x, tl.XStride, nb, &xd[0], &out[r], tl.OutStride)
		default:
			rows4(&tl.W[r*tl.WStride], tl.WStride, tl.Rows-r, x, tl.XStride, nb, &out[r], tl.OutStride)
		}
	}
	for ; t < tl.NX; t++ {
		x, out := &tl.X[t*tl.XStride], tl.Out[t*tl.OutStride:]
		r := tl.Rows &^ 3
		if r > 0 {
			rows4w(&tl.W[0], tl.WStride, r, x, nb, &out[0])
		}
		if r < tl.Rows {
			rows(&tl.W[r*tl.WStride], tl.WStride, tl.Rows-r, x, nb, &out[r])
		}
	}
}

// unpackedKernels are the generated kernels of tileUnpackedAVX2 for one biased 32-block
// type (Q4_0, Q5_0), and the row loops of tileRowsAVX2 for the rest of a tile.
type unpackedKernels struct {
	unpack  func(w *byte, wStride, rows, nb int, wu *byte)
	prep    func(x *byte, xStride, groups, nb int, c32 *byte, xd *float32)
	rows    rowsFunc
	rows4w  rowsFunc
	rows4   rows4Func
	rows4x2 rows4x2Func
	// repacked: the rows are repacked (Q4_0), and the parts of a tile that
	// tileUnpackedAVX2 leaves (an odd last weight row, the activation rows after the
	// last group) go to tileRepackedSmallAVX2 instead of tileRowsAVX2 with the kernels
	// above. (A flag, not a func value: the sub-tiles' addresses stay on the stack.)
	repacked bool
}

// smallTile runs the rest of a tile as k says.
func (k *unpackedKernels) smallTile(tl *Tile) {
	if k.repacked {
		tileRepackedSmallAVX2(tl)
		return
	}
	tileRowsAVX2(tl, k.rows, k.rows4w, k.rows4, k.rows4x2, nil)
}

var (
	unpackedQ4_0 = unpackedKernels{unpackRowsQ4_0AVX2, prepBias4Q4_0AVX2, rowsQ4_0AVX2, rows4wQ4_0AVX2, rows4Q4_0AVX2, rows4x2Q4_0AVX2, false}
	unpackedQ5_0 = unpackedKernels{unpackRowsQ5_0AVX2, prepBias4Q5_0AVX2, rowsQ5_0AVX2, rows4wQ5_0AVX2, rows4Q5_0AVX2, rows4x2Q5_0AVX2, false}
)

// Shape of tileUnpackedAVX2: it takes tiles of at least unpackedMinGroups groups of four
// activation rows (the unpacking of a weight block costs about what rows4x2 spends
// unpacking it for one group), and unpacks at most unpackedBytes of weight rows at a
// time, so that the scratch stays in L2 (1 MB on Zen 4) while every group passes over it.
const (
	unpackedMinGroups = 2
	unpackedBytes     = 256 << 10
	unpackedBlock     = 64 // internal/asmgen's uBlock
)

// tileUnpackedAVX2 runs a Q4_0/Q5_0 tile (checked) through rows4x2uAVX2: the activation
// rows' bias lanes and scales prepared once, the weight rows unpacked once per pass, each
// group of four activation rows over each pass; an odd last weight row and the
// activation rows after the last group go to k.smallTile. VecDot's bits throughout.
func tileUnpackedAVX2(tl *Tile, k *unpackedKernels) {
	nb := tl.N / qk
	groups := tl.NX / 4
	wr := tl.Rows &^ 1
	if nb == 0 || groups < unpackedMinGroups || wr == 0 {
		k.smallTile(tl)
		return
	}
	s := tileScratchPool.Get().(*tileScratch)
	defer tileScratchPool.Put(s)
	s.prep = grow(s.prep, groups*nb*128)
	s.dw = grow(s.dw, groups*nb*4)
	k.prep(&tl.X[0], tl.XStride, groups, nb, &s.prep[0], &s.dw[0])
	pass := max(2, min(wr, unpackedBytes/(nb*unpackedBlock))&^1)
	s.wu = grow(s.wu, pass*nb*unpackedBlock)
	for r0 := 0; r0 < wr; r0 += pass {
		n := min(pass, wr-r0)
		k.unpack(&tl.W[r0*tl.WStride], tl.WStride, n, nb, &s.wu[0])
		for g := 0; g < groups; g++ {
			rows4x2uAVX2(&s.wu[0], n, nb, &tl.X[4*g*tl.XStride], tl.XStride, &s.prep[g*nb*128], &s.dw[g*nb*4],
				&tl.Out[4*g*tl.OutStride+r0], tl.OutStride)
		}
	}
	if wr < tl.Rows {
		odd := *tl
		odd.W, odd.Rows, odd.NX = tl.W[wr*tl.WStride:], 1, 4*groups
		odd.Out = tl.Out[wr:]
		k.smallTile(&odd)
	}
	if 4*groups < tl.NX {
		rest := *tl
		rest.X, rest.NX = tl.X[4*groups*tl.XStride:], tl.NX-4*groups
		rest.Out = tl.Out[4*groups*tl.OutStride:]
		k.smallTile(&rest)
	}
}
