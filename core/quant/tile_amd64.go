package quant

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasTileZ selects the AVX-512 tile kernels: VPDPBUSD on zmm (AVX512_VNNI) besides the
// AVX2/FMA/F16C of the block kernels.
var hasTileZ = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI

func init() {
	if !hasTileZ {
		return
	}
	tileKernels[Q8_0] = func(tl *Tile) { tileZ(tl, Q8_0) }
	tileKernels[Q4_0] = func(tl *Tile) { tileZ(tl, Q4_0) }
	tileKernels[Q5_0] = func(tl *Tile) { tileZ(tl, Q5_0) }
}

// tileArgs is read by the generated tile kernels at fixed offsets (internal/asmgen's
// ta* constants): every field is 8 bytes, in this order.
type tileArgs struct {
	w         *byte
	wStride   int
	rows      int
	nb        int      // blocks per row
	wu        *byte    // scratch: two rows' unpacked levels, 32 bytes per block
	dw        *float32 // scratch: two rows' block scales
	xp        *byte    // prepared activation pairs, pairBlock bytes per (pair, block)
	pairs     int
	out       *float32 // results: out[t·outStride + r] (32-block tiles), out[t·rows + r] (K-quants)
	outStride int
	nx        int // activation rows (the 32-block tiles store rows t < nx)
}

// tileMinRows is the fewest activation rows the tile kernels take. With one row there
// is one FMA chain per weight row, as in VecDot, plus the unpacking: BenchmarkDotTile
// (256×4864 Q8_0) 0.18-0.30 ms vs VecDot 0.093 ms; from two rows on the tile wins
// (0.11 vs 0.145 ms at 2, 0.31-0.42 vs 0.64-0.68 ms at 8).
const tileMinRows = 2

// pairBlock is the prepared size of one (activation pair, block): both rows' 32 levels,
// both rows' eight −bias·Σ4 lanes, both rows' scale ×8 (internal/asmgen/tile.go).
const pairBlock = 192

type tileScratch struct {
	prep, wu []byte
	dw, out  []float32
}

var tileScratchPool = sync.Pool{New: func() any { return new(tileScratch) }}

// tileZ runs a 32-block tile kernel: the activation rows are prepared once, in pairs
// (an odd last row is paired with a zero row whose results are dropped), then every
// weight row is unpacked once and dotted with all pairs.
// The kernels are called directly, not through func values, so that the arguments stay
// on the stack (no allocation per call).
func tileZ(tl *Tile, typ Type) {
	var dot func(int, []byte, []byte) float32
	switch typ {
	case Q8_0:
		dot = dotQ8_0SIMD
	case Q4_0:
		dot = dotQ4_0SIMD
	default:
		dot = dotQ5_0SIMD
	}
	nb := tl.N / qk
	if nb == 0 || tl.Rows < 2 && tl.NX < tileMinRows {
		dotTileGo(dot, tl)
		return
	}
	var biasBytes [32]byte
	for i := range biasBytes {
		biasBytes[i] = zBias(typ)
	}
	if tl.NX < tileMinRows {
		rowsZ(tl, typ, nb, &biasBytes, dot)
		return
	}
	pairs := (tl.NX + 1) / 2
	s := tileScratchPool.Get().(*tileScratch)
	defer tileScratchPool.Put(s)
	if typ == Q8_0 && tl.WScales != nil && pairs <= tileDirectMaxPairs {
		tileDirectZ(tl, s, nb, pairs, &biasBytes)
		return
	}
	s.wu = grow(s.wu, 16*nb*32) // up to sixteen weight rows at a time
	s.dw = grow(s.dw, 16*nb)
	var prep []byte
	if tl.Prep != nil {
		prep = tl.Prep.buf
	} else {
		s.prep = grow(s.prep, pairs*nb*pairBlock)
		prepRowsZ(s.prep, tl.X, tl.XStride, 0, tl.NX, tl.NX, nb, &biasBytes)
		prep = s.prep
	}
	a := tileArgs{
		w: &tl.W[0], wStride: tl.WStride, rows: tl.Rows, nb: nb,
		wu: &s.wu[0], dw: &s.dw[0], xp: &prep[0], pairs: pairs,
		out: &tl.Out[0], outStride: tl.OutStride, nx: tl.NX,
	}
	switch typ {
	case Q8_0:
		tileQ8_0Z((*uintptr)(unsafe.Pointer(&a)))
	case Q4_0:
		tileQ4_0Z((*uintptr)(unsafe.Pointer(&a)))
	default:
		tileQ5_0Z((*uintptr)(unsafe.Pointer(&a)))
	}
}

// tileDirectMaxPairs is the most activation pairs for which a Q8_0 tile with
// Tile.WScales runs tileQ8_0ZD (weights read in place, one VPXORD per block, row and
// pass over two pairs) rather than tileQ8_0Z (one unpacking pass, then the dots).
// BenchmarkDotTileScales (256×4864, fastest of 3, load 5-7): 2 rows 91 → 50 µs, 4 rows
// 136 → 75, 6 rows 167 → 130, 8 rows 196 → 148, 10 rows 218 → 222 (so 4 pairs at most);
// the one-row kernel takes ≈ 46 µs.
const tileDirectMaxPairs = 4

// tileDirectZ runs tileQ8_0ZD over tl, whose WScales are set.
func tileDirectZ(tl *Tile, s *tileScratch, nb, pairs int, bias *[32]byte) {
	var prep []byte
	if tl.Prep != nil {
		prep = tl.Prep.buf
	} else {
		s.prep = grow(s.prep, pairs*nb*pairBlock)
		prepRowsZ(s.prep, tl.X, tl.XStride, 0, tl.NX, tl.NX, nb, bias)
		prep = s.prep
	}
	a := tileArgs{
		w: &tl.W[0], wStride: tl.WStride, rows: tl.Rows, nb: nb,
		dw: &tl.WScales[0], xp: &prep[0], pairs: pairs,
		out: &tl.Out[0], outStride: tl.OutStride, nx: tl.NX,
	}
	tileQ8_0ZD((*uintptr)(unsafe.Pointer(&a)))
}

// zBias is the bias the 32-block tile kernels' unsigned levels carry per weight type:
// Q8_0 levels are w+128, Q4_0 and Q5_0 levels v+8 and v+16.
func zBias(typ Type) byte {
	switch typ {
	case Q8_0:
		return 128
	case Q4_0:
		return 8
	}
	return 16
}

// prepRowsZ prepares activation rows [lo, hi) of x (row lo at x[0]) of a product of nx
// rows into prep, in pairs (pair t/2, half t%2); an odd nx's last pair gets a zero
// partner (levels, lanes and scales), whose results the kernels drop.
func prepRowsZ(prep, x []byte, xStride, lo, hi, nx, nb int, bias *[32]byte) {
	base := lo / 2 * nb * pairBlock
	if hi == nx && nx%2 == 1 {
		last := (nx - 1) / 2 * nb * pairBlock
		for b := 0; b < nb; b++ {
			blk := prep[last+b*pairBlock:]
			clear(blk[32:64])
			clear(blk[96:128])
			clear(blk[160:192])
		}
	}
	prepPairsZ(&x[0], xStride, hi-lo, nb, &bias[0], &prep[base])
}

// tilePrepSize is the prepared size of nx rows of n values for t's tile kernel, or 0
// where DotTile would not run one (see tileZ, tileQ4K, tileQ6K).
func tilePrepSize(t Type, n, nx int) int {
	if !hasTileZ || n <= 0 {
		return 0
	}
	pairs := (nx + 1) / 2
	switch t {
	case Q8_0, Q4_0, Q5_0:
		if n%qk != 0 || nx < tileMinRows {
			return 0
		}
		return pairs * (n / qk) * pairBlock
	case Q4_K, Q6_K:
		if n%QK_K != 0 || nx < tileMinRows || t == Q6_K && nx < tileMinRowsQ6K {
			return 0
		}
		return pairs * (n / QK_K) * kPairBlock
	}
	return 0
}

// prepareRows is TilePrep.PrepareRows once the arguments are checked.
func prepareRows(p *TilePrep, x []byte, xStride, lo, hi int) {
	switch p.typ {
	case Q8_0, Q4_0, Q5_0:
		var bias [32]byte
		for i := range bias {
			bias[i] = zBias(p.typ)
		}
		prepRowsZ(p.buf, x, xStride, lo, hi, p.nx, p.n/qk, &bias)
	default:
		prepRowsK(p.buf, x, xStride, lo, hi, p.nx, p.n/QK_K)
	}
}

// prepRowsK is prepRowsZ for the K-quant kernels' Q8_K pair layout.
func prepRowsK(prep, x []byte, xStride, lo, hi, nx, nb int) {
	if hi == nx && nx%2 == 1 {
		clearOddHalfK(prep, (nx+1)/2, nb)
	}
	prepPairsK(&x[0], xStride, hi-lo, nb, &prep[lo/2*nb*kPairBlock])
}

// rowsZ runs one activation row (decoding) through the two-row kernels: the row is
// prepared once (prepPairsZ, one half of each pair-block used), then weight rows go two
// at a time, their lanes side by side in a zmm; an odd last row goes to VecDot. Each
// result has VecDot's bits. BenchmarkDotTile/…/1: see docs/perf-cpu.md.
func rowsZ(tl *Tile, typ Type, nb int, bias *[32]byte, dot func(int, []byte, []byte) float32) {
	s := tileScratchPool.Get().(*tileScratch)
	defer tileScratchPool.Put(s)
	s.prep = grow(s.prep, nb*pairBlock)
	prepPairsZ(&tl.X[0], tl.XStride, 1, nb, &bias[0], &s.prep[0])
	r := tl.Rows &^ 1
	if pairs := r / 2; pairs > 0 {
		w, out := &tl.W[0], &tl.Out[0]
		switch typ {
		case Q8_0:
			rows2Q8_0Z(w, tl.WStride, pairs, nb, &s.prep[0], out)
		case Q4_0:
			rows2Q4_0Z(w, tl.WStride, pairs, nb, &s.prep[0], out)
		default:
			rows2Q5_0Z(w, tl.WStride, pairs, nb, &s.prep[0], out)
		}
	}
	if r < tl.Rows {
		tl.Out[r] = dot(tl.N, tl.W[r*tl.WStride:], tl.X)
	}
}

// Prepared sizes of the Q4_K tile kernel (internal/asmgen/tilek.go): one activation
// pair-block of Q8_K, one unpacked Q4_K super-block.
const (
	kPairBlock = 704
	kWBlock    = 832
)

func init() {
	if !hasTileZ {
		return
	}
	tileKernels[Q4_K] = tileQ4K
}

// tileQ4K runs the Q4_K tile kernel (same structure as tileZ, Q8_K activations).
func tileQ4K(tl *Tile) { tileK(tl, false) }

// tileK runs the Q4_K (q6 false) or Q6_K tile kernel on Q8_K activation pairs, or the
// row-by-row fallback below its minimum rows. The kernels are called directly (not
// through a func value) so the arguments stay on the stack.
func tileK(tl *Tile, q6 bool) {
	minRows, fallback, wBlock := tileMinRows, dotQ4_KSIMD, kWBlock
	if q6 {
		minRows, fallback, wBlock = tileMinRowsQ6K, dotQ6_KSIMD, k6WBlock
	}
	nb := tl.N / QK_K
	if nb == 0 || tl.NX < minRows {
		dotTileGo(fallback, tl)
		return
	}
	pairs := (tl.NX + 1) / 2
	s := tileScratchPool.Get().(*tileScratch)
	defer tileScratchPool.Put(s)
	if tl.Prep == nil {
		s.prep = grow(s.prep, pairs*nb*kPairBlock)
	}
	s.wu = grow(s.wu, nb*wBlock)
	s.out = grow(s.out, 2*pairs*tl.Rows)
	prep := s.prep
	if tl.Prep != nil {
		prep = tl.Prep.buf
	} else {
		prepRowsK(s.prep, tl.X, tl.XStride, 0, tl.NX, tl.NX, nb)
	}
	a := tileArgs{
		w: &tl.W[0], wStride: tl.WStride, rows: tl.Rows, nb: nb,
		wu: &s.wu[0], xp: &prep[0], pairs: pairs, out: &s.out[0],
	}
	if q6 {
		tileQ6_KZ((*uintptr)(unsafe.Pointer(&a)))
	} else {
		tileQ4_KZ((*uintptr)(unsafe.Pointer(&a)))
	}
	for t := 0; t < tl.NX; t++ {
		copy(tl.Out[t*tl.OutStride:t*tl.OutStride+tl.Rows], s.out[t*tl.Rows:(t+1)*tl.Rows])
	}
}

const k6WBlock = 864 // an unpacked Q6_K super-block (internal/asmgen/tilek.go)

// tileMinRowsQ6K: the Q6_K tile does more integer work per chunk than VecDot's (two
// maddubs per activation pair) and only pays once the unpacking is shared widely:
// BenchmarkDotTile (256×4864) 2 rows 0.275 vs 0.217 ms, 8 rows 0.75 vs 0.72 ms,
// 64 rows 5.85 vs 7.71 ms.
const tileMinRowsQ6K = 16

func init() {
	if !hasTileZ {
		return
	}
	tileKernels[Q6_K] = tileQ6K
}

// tileQ6K runs the Q6_K tile kernel on the Q4_K kernel's prepared activations.
func tileQ6K(tl *Tile) { tileK(tl, true) }

// clearOddHalfK zeroes the second row of the last prepared Q8_K pair: the partner an
// odd activation row count lacks (its results are dropped; zeros keep them finite).
func clearOddHalfK(prep []byte, pairs, nb int) {
	base := (pairs - 1) * nb * kPairBlock
	for b := 0; b < nb; b++ {
		blk := prep[base+b*kPairBlock:]
		for c := 0; c < 8; c++ {
			clear(blk[64*c+32 : 64*c+64])
		}
		clear(blk[528:544])
		clear(blk[576:608])
		clear(blk[624:640])
		clear(blk[672:704])
	}
}
