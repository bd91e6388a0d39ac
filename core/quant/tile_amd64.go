package quant

import (
	"encoding/binary"
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasVNNI selects the tile kernels: VPDPBUSD on 256-bit registers (AVX512_VNNI with
// AVX512VL) besides the AVX2/F16C of the block kernels.
var hasVNNI = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI

func init() {
	if !hasVNNI {
		return
	}
	// The shift is log2 of the bias the kernel's unsigned levels carry: Q8_0 levels are
	// w+128, Q4_0 and Q5_0 levels are q = value+8 and value+16.
	_ = tileQ8
	_ = tileK
}

// tileArgs is read by the generated tile kernels at fixed offsets (internal/asmgen's
// ta* constants): every field is 8 bytes, in this order.
type tileArgs struct {
	w         *byte
	wStride   int
	rows      int
	xq        *byte // prepared activations (prepArgs.out)
	_, _      uintptr
	xqStride  int // bytes from one prepared row to the next
	_         int
	nb        int // blocks per row
	nx        int
	acc       *float32 // 8 lanes per activation row
	out       *float32
	outStride int // bytes
}

// prepArgs is read by prepQ8Tile: nx Q8_0 rows of nb blocks at x become prepared rows
// at out (see internal/asmgen: levels transposed by dwords, −Σx<<shift, float32 scales).
type prepArgs struct {
	x         *byte
	xStride   int
	nx        int
	nb        int
	shift     int
	out       *byte
	outStride int
}

const prepGroupBytes = 320

type tileScratch struct {
	prep []byte
	acc  []float32
}

var tileScratchPool = sync.Pool{New: func() any { return new(tileScratch) }}

// tileQ8 runs a 32-block tile kernel. It pays from one activation row on: unpacking
// and transposing a weight group costs less than the horizontal reductions VecDot does
// per block (BenchmarkDotTileSmall: 1.2-2× VecDot at one row, 2-2.5× at two or three).
func tileQ8(tl *Tile, shift int, kernel func(*uintptr)) {
	nb := tl.N / qk
	groups := (nb + 7) / 8
	s := tileScratchPool.Get().(*tileScratch)
	need := tl.NX * groups * prepGroupBytes
	if cap(s.prep) < need {
		s.prep = make([]byte, need)
	}
	if cap(s.acc) < 8*tl.NX {
		s.acc = make([]float32, 8*tl.NX)
	}
	s.prep, s.acc = s.prep[:need], s.acc[:8*tl.NX]
	p := prepArgs{x: &tl.X[0], xStride: tl.XStride, nx: tl.NX, nb: nb, shift: shift,
		out: &s.prep[0], outStride: groups * prepGroupBytes}
	prepQ8Tile((*uintptr)(unsafe.Pointer(&p)))
	a := tileArgs{
		w: &tl.W[0], wStride: tl.WStride, rows: tl.Rows,
		xq: &s.prep[0], xqStride: groups * prepGroupBytes,
		nb: nb, nx: tl.NX, acc: &s.acc[0],
		out: &tl.Out[0], outStride: tl.OutStride * 4,
	}
	kernel((*uintptr)(unsafe.Pointer(&a)))
	tileScratchPool.Put(s)
}

// kPrepBytes is the prepared size of one Q8_K block for the K-quant tile kernels (see
// internal/asmgen/tilek.go): levels transposed by dwords across the eight 32-value
// chunks, int32 bsum pairs, int32 −32·bsums of the even and the odd groups, float32 d.
const kPrepBytes = 384

// prepQ8K writes the prepared form of tl's Q8_K activation rows into dst.
func prepQ8K(dst []byte, tl *Tile, nb int) {
	for t := 0; t < tl.NX; t++ {
		x := tl.X[t*tl.XStride:]
		for b := 0; b < nb; b++ {
			blk := x[b*q8_KBytes : (b+1)*q8_KBytes]
			out := dst[(t*nb+b)*kPrepBytes : (t*nb+b+1)*kPrepBytes]
			qs := blk[4 : 4+QK_K]
			for c := 0; c < 8; c++ {
				for j := 0; j < 8; j++ {
					binary.LittleEndian.PutUint32(out[32*j+4*c:], binary.LittleEndian.Uint32(qs[32*c+4*j:]))
				}
				e, o := q8KBsum(blk, 2*c), q8KBsum(blk, 2*c+1)
				binary.LittleEndian.PutUint32(out[256+4*c:], uint32(e+o))
				binary.LittleEndian.PutUint32(out[288+4*c:], uint32(-32*e))
				binary.LittleEndian.PutUint32(out[320+4*c:], uint32(-32*o))
			}
			copy(out[352:356], blk[:4])
		}
	}
}

func tileK(tl *Tile, kernel func(*uintptr)) {
	nb := tl.N / QK_K
	s := tileScratchPool.Get().(*tileScratch)
	need := tl.NX * nb * kPrepBytes
	if cap(s.prep) < need {
		s.prep = make([]byte, need)
	}
	if cap(s.acc) < 8*tl.NX {
		s.acc = make([]float32, 8*tl.NX)
	}
	s.prep, s.acc = s.prep[:need], s.acc[:8*tl.NX]
	prepQ8K(s.prep, tl, nb)
	a := tileArgs{
		w: &tl.W[0], wStride: tl.WStride, rows: tl.Rows,
		xq: &s.prep[0], xqStride: nb * kPrepBytes,
		nb: nb, nx: tl.NX, acc: &s.acc[0],
		out: &tl.Out[0], outStride: tl.OutStride * 4,
	}
	kernel((*uintptr)(unsafe.Pointer(&a)))
	tileScratchPool.Put(s)
}
