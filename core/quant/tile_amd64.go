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
	// The bias is what the unpacked unsigned levels carry: Q8_0 levels are w+128, Q4_0
	// and Q5_0 levels are v+8 and v+16.
	tileKernels[Q8_0] = func(tl *Tile) { tileZ(tl, Q8_0) }
	tileKernels[Q4_0] = func(tl *Tile) { tileZ(tl, Q4_0) }
	tileKernels[Q5_0] = func(tl *Tile) { tileZ(tl, Q5_0) }
}

// tileArgs is read by the generated tile kernels at fixed offsets (internal/asmgen's
// ta* constants): every field is 8 bytes, in this order.
type tileArgs struct {
	w       *byte
	wStride int
	rows    int
	nb      int      // blocks per row
	wu      *byte    // scratch: two rows' unpacked levels, 32 bytes per block
	dw      *float32 // scratch: two rows' block scales
	xp      *byte    // prepared activation pairs, pairBlock bytes per (pair, block)
	pairs   int
	out     *float32 // results, out[t·rows + r]
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

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// tileZ runs a 32-block tile kernel: the activation rows are prepared once, in pairs
// (an odd last row is paired with a zero row whose results are dropped), then every
// weight row is unpacked once and dotted with all pairs.
// The kernels are called directly, not through func values, so that the arguments stay
// on the stack (no allocation per call).
func tileZ(tl *Tile, typ Type) {
	var bias byte
	var dot func(int, []byte, []byte) float32
	switch typ {
	case Q8_0:
		bias, dot = 128, dotQ8_0SIMD
	case Q4_0:
		bias, dot = 8, dotQ4_0SIMD
	default:
		bias, dot = 16, dotQ5_0SIMD
	}
	nb := tl.N / qk
	if nb == 0 || tl.Rows < 2 && tl.NX < tileMinRows {
		dotTileGo(dot, tl)
		return
	}
	var biasBytes [32]byte
	for i := range biasBytes {
		biasBytes[i] = bias
	}
	if tl.NX < tileMinRows {
		rowsZ(tl, typ, nb, &biasBytes, dot)
		return
	}
	pairs := (tl.NX + 1) / 2
	s := tileScratchPool.Get().(*tileScratch)
	defer tileScratchPool.Put(s)
	s.prep = grow(s.prep, pairs*nb*pairBlock)
	s.wu = grow(s.wu, 4*nb*32) // up to four weight rows at a time
	s.dw = grow(s.dw, 4*nb)
	s.out = grow(s.out, 2*pairs*tl.Rows)
	if tl.NX%2 == 1 {
		// The missing partner row: zero levels, lanes and scales.
		base := (pairs - 1) * nb * pairBlock
		for b := 0; b < nb; b++ {
			blk := s.prep[base+b*pairBlock:]
			clear(blk[32:64])
			clear(blk[96:128])
			clear(blk[160:192])
		}
	}
	prepPairsZ(&tl.X[0], tl.XStride, tl.NX, nb, &biasBytes[0], &s.prep[0])
	a := tileArgs{
		w: &tl.W[0], wStride: tl.WStride, rows: tl.Rows, nb: nb,
		wu: &s.wu[0], dw: &s.dw[0], xp: &s.prep[0], pairs: pairs, out: &s.out[0],
	}
	switch typ {
	case Q8_0:
		tileQ8_0Z((*uintptr)(unsafe.Pointer(&a)))
	case Q4_0:
		tileQ4_0Z((*uintptr)(unsafe.Pointer(&a)))
	default:
		tileQ5_0Z((*uintptr)(unsafe.Pointer(&a)))
	}
	for t := 0; t < tl.NX; t++ {
		copy(tl.Out[t*tl.OutStride:t*tl.OutStride+tl.Rows], s.out[t*tl.Rows:(t+1)*tl.Rows])
	}
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
func tileQ4K(tl *Tile) {
	nb := tl.N / QK_K
	if nb == 0 || tl.NX < tileMinRows {
		dotTileGo(dotQ4_KSIMD, tl)
		return
	}
	pairs := (tl.NX + 1) / 2
	s := tileScratchPool.Get().(*tileScratch)
	defer tileScratchPool.Put(s)
	s.prep = grow(s.prep, pairs*nb*kPairBlock)
	s.wu = grow(s.wu, nb*kWBlock)
	s.out = grow(s.out, 2*pairs*tl.Rows)
	if tl.NX%2 == 1 {
		clearOddHalfK(s.prep, pairs, nb)
	}
	prepPairsK(&tl.X[0], tl.XStride, tl.NX, nb, &s.prep[0])
	a := tileArgs{
		w: &tl.W[0], wStride: tl.WStride, rows: tl.Rows, nb: nb,
		wu: &s.wu[0], xp: &s.prep[0], pairs: pairs, out: &s.out[0],
	}
	tileQ4_KZ((*uintptr)(unsafe.Pointer(&a)))
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
func tileQ6K(tl *Tile) {
	nb := tl.N / QK_K
	if nb == 0 || tl.NX < tileMinRowsQ6K {
		dotTileGo(dotQ6_KSIMD, tl)
		return
	}
	pairs := (tl.NX + 1) / 2
	s := tileScratchPool.Get().(*tileScratch)
	defer tileScratchPool.Put(s)
	s.prep = grow(s.prep, pairs*nb*kPairBlock)
	s.wu = grow(s.wu, nb*k6WBlock)
	s.out = grow(s.out, 2*pairs*tl.Rows)
	if tl.NX%2 == 1 {
		clearOddHalfK(s.prep, pairs, nb)
	}
	prepPairsK(&tl.X[0], tl.XStride, tl.NX, nb, &s.prep[0])
	a := tileArgs{
		w: &tl.W[0], wStride: tl.WStride, rows: tl.Rows, nb: nb,
		wu: &s.wu[0], xp: &s.prep[0], pairs: pairs, out: &s.out[0],
	}
	tileQ6_KZ((*uintptr)(unsafe.Pointer(&a)))
	for t := 0; t < tl.NX; t++ {
		copy(tl.Out[t*tl.OutStride:t*tl.OutStride+tl.Rows], s.out[t*tl.Rows:(t+1)*tl.Rows])
	}
}

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
