package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Kernels of the repacked Q4_0 rows (core/quant/repack.go): each group of eight blocks
// of a row is 144 bytes, the eight f16 scales first, then four 32-byte pairs of blocks,
// byte j of pair p holding level j of block 2p in its low nibble and level j of block
// 2p+1 in its high nibble; the row's last nb%8 blocks stay in ggml's 18-byte layout. A
// row keeps its length, so rows are where they were.
//
// The repacking changes where the bytes are, not the arithmetic: each weight row still
// runs acc = fma(f16(w.d)·f16(x.d), float32(lanes), acc) block by block, the bits of
// VecDot. What it saves per row and block, against rows4wQ4_0AVX2: the eight VPINSRW of
// a group's scales become one VCVTPH2PS from memory, and the nibble split (broadcast,
// shift, blend, mask) becomes a mask, or a shift and a mask, of one load for two blocks.
const repackGroup = 144

// blockDotRows4r emits func(w *byte, wStride, rows int, x *byte, nb int, out *float32):
// rows4wQ4_0AVX2's results (rows a multiple of four, one activation row) from repacked
// weight rows.
func blockDotRows4r(name string) {
	const k, wBytes = 4, 18
	TEXT(name, NOSPLIT, "func(w *byte, wStride, rows int, x *byte, nb int, out *float32)")
	Pragma("noescape")
	Doc(name + " runs ggml's Q4_0 block loop for rows (a multiple of 4) repacked weight rows, four at a time, against one activation row (AVX2, FMA, F16C).")
	w0, stride, rows := Load(Param("w"), GP64()), Load(Param("wStride"), GP64()), Load(Param("rows"), GP64())
	x0, nb0, out := Load(Param("x"), GP64()), Load(Param("nb"), GP64()), Load(Param("out"), GP64())
	scales := AllocLocal(4 * 32)
	corr := loadCorr(eights)
	wp, wq, xp, nb := GP64(), GP64(), GP64(), GP64()
	s3 := GP64()
	LEAQ(Mem{Base: stride, Index: stride, Scale: 2}, s3)
	Label(name + "_rows")
	MOVQ(w0, wp)
	LEAQ(Mem{Base: w0, Index: stride, Scale: 2}, wq)
	MOVQ(x0, xp)
	MOVQ(nb0, nb)
	acc := zeroed4()
	ws := []Mem{{Base: wp}, {Base: wp, Index: stride, Scale: 1}, {Base: wq}, {Base: wp, Index: s3, Scale: 1}}

	Label(name + "_group")
	CMPQ(nb, Imm(8))
	JL(LabelRef(name + "_tail"))
	for _, w := range ws {
		for off := 0; off < repackGroup; off += 64 {
			PREFETCHT1(w.Offset(prefetchDist + off))
		}
	}
	fx := q8Scales8(xp)
	for r, w := range ws {
		fw := YMM()
		VCVTPH2PS(w, fw)
		VMULPS(fx, fw, fw) // f16(w.d)·f16(x.d), the eight blocks
		VMOVUPS(fw, scales.Offset(32*r))
	}
	for p := 0; p < 4; p++ {
		var yx, c [2]reg.VecVirtual
		for h := range yx {
			yx[h], c[h] = YMM(), YMM()
			VMOVDQU(Mem{Base: xp, Disp: (2*p+h)*q8_0Bytes + 2}, yx[h])
			VPMADDUBSW(yx[h], corr, c[h]) // 8·x as int16 pairs
		}
		for r, w := range ws {
			pk, q := YMM(), [2]reg.VecVirtual{YMM(), YMM()}
			VMOVDQU(w.Offset(16+32*p), pk)
			VPAND(mask0F, pk, q[0])
			VPSRLW(Imm(4), pk, q[1])
			VPAND(mask0F, q[1], q[1])
			for h := range q {
				s, d := YMM(), YMM()
				VPMADDUBSW(yx[h], q[h], s)
				VPSUBW(c[h], s, s)
				VPMADDWD(ones16, s, s)
				VCVTDQ2PS(s, s)
				VBROADCASTSS(scales.Offset(32*r+4*(2*p+h)), d)
				VFMADD231PS(s, d, acc[r])
			}
		}
	}
	ADDQ(U32(repackGroup), wp)
	ADDQ(U32(repackGroup), wq)
	ADDQ(U32(8*q8_0Bytes), xp)
	SUBQ(Imm(8), nb)
	JMP(LabelRef(name + "_group"))

	// The last nb%8 blocks, in ggml's layout, one at a time.
	Label(name + "_tail")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	yx := YMM()
	VMOVDQU(Mem{Base: xp, Disp: 2}, yx)
	shared := pairQ4_0.prep(yx, corr)
	xd := f16Broadcast(Mem{Base: xp})
	for r, w := range ws {
		p := pairQ4_0.dot(w, yx, shared)
		d := f16Broadcast(w)
		VMULPS(xd, d, d)
		VCVTDQ2PS(p, p)
		VFMADD231PS(p, d, acc[r])
	}
	ADDQ(U32(wBytes), wp)
	ADDQ(U32(wBytes), wq)
	ADDQ(Imm(q8_0Bytes), xp)
	DECQ(nb)
	JMP(LabelRef(name + "_tail"))
	rowsDone(name, acc[:], out, w0, stride, rows, k)
}

// unrepackRows emits func(w *byte, wStride, rows, groups int, dst *byte, dstStride int):
// the first groups·8 blocks of rows repacked Q4_0 rows back in ggml's layout at dst
// (the rows' other blocks are not touched: they are ggml's already); rows, groups ≥ 1.
func unrepackRows(name string) {
	TEXT(name, NOSPLIT, "func(w *byte, wStride, rows, groups int, dst *byte, dstStride int)")
	Pragma("noescape")
	Doc(name + " writes the groups of eight repacked Q4_0 blocks of rows rows in ggml's layout (AVX2).")
	w0, stride, rows := Load(Param("w"), GP64()), Load(Param("wStride"), GP64()), Load(Param("rows"), GP64())
	g0, d0, ds := Load(Param("groups"), GP64()), Load(Param("dst"), GP64()), Load(Param("dstStride"), GP64())
	wp, dp, g, t := GP64(), GP64(), GP64(), GP32()
	m := YMM()
	VMOVDQU(mask0F, m)
	Label(name + "_row")
	MOVQ(w0, wp)
	MOVQ(d0, dp)
	MOVQ(g0, g)
	Label(name + "_group")
	for b := 0; b < 8; b++ {
		MOVWLZX(Mem{Base: wp, Disp: 2 * b}, t)
		MOVW(t.As16(), Mem{Base: dp, Disp: 18 * b})
	}
	for p := 0; p < 4; p++ {
		pk, lo, hi := YMM(), YMM(), YMM()
		VMOVDQU(Mem{Base: wp, Disp: 16 + 32*p}, pk)
		VPAND(m, pk, lo) // levels of block 2p
		VPSRLW(Imm(4), pk, hi)
		VPAND(m, hi, hi) // levels of block 2p+1
		for h, v := range []reg.VecVirtual{lo, hi} {
			top := XMM()
			VEXTRACTI128(Imm(1), v, top)
			VPSLLW(Imm(4), top, top)
			VPOR(top, v.AsX(), top) // qs[j] = level j | level j+16 << 4
			VMOVDQU(top, Mem{Base: dp, Disp: 18*(2*p+h) + 2})
		}
	}
	ADDQ(U32(repackGroup), wp)
	ADDQ(U32(8*18), dp)
	DECQ(g)
	JNZ(LabelRef(name + "_group"))
	ADDQ(stride, w0)
	ADDQ(ds, d0)
	DECQ(rows)
	JNZ(LabelRef(name + "_row"))
	VZEROUPPER()
	RET()
}

// unpackRowsR emits unpackRows' function (func(w *byte, wStride, rows, nb int, wu
// *byte): 32 level bytes and eight float32 scales per block, uBlock bytes a block) for
// repacked Q4_0 rows: a pair of blocks' levels are one load's low and high nibbles.
func unpackRowsR(name string) {
	TEXT(name, NOSPLIT, "func(w *byte, wStride, rows, nb int, wu *byte)")
	Pragma("noescape")
	Doc(name + " unpacks rows repacked Q4_0 weight rows of nb blocks into 32 level bytes and eight float32 scales per block (AVX2, F16C).")
	w0, stride, rows := Load(Param("w"), GP64()), Load(Param("wStride"), GP64()), Load(Param("rows"), GP64())
	nb0, wu := Load(Param("nb"), GP64()), Load(Param("wu"), GP64())
	wp, nb := GP64(), GP64()
	m := YMM()
	VMOVDQU(mask0F, m)
	Label(name + "_row")
	MOVQ(w0, wp)
	MOVQ(nb0, nb)
	Label(name + "_group")
	CMPQ(nb, Imm(8))
	JL(LabelRef(name + "_tail"))
	for p := 0; p < 4; p++ {
		pk, hi := YMM(), YMM()
		VMOVDQU(Mem{Base: wp, Disp: 16 + 32*p}, pk)
		VPSRLW(Imm(4), pk, hi)
		VPAND(m, pk, pk)
		VPAND(m, hi, hi)
		for h, v := range []reg.VecVirtual{pk, hi} {
			b := 2*p + h
			VMOVDQU(v, Mem{Base: wu, Disp: b * uBlock})
			VMOVUPS(f16Broadcast(Mem{Base: wp, Disp: 2 * b}), Mem{Base: wu, Disp: b*uBlock + 32})
		}
	}
	ADDQ(U32(repackGroup), wp)
	ADDQ(U32(8*uBlock), wu)
	SUBQ(Imm(8), nb)
	JMP(LabelRef(name + "_group"))
	Label(name + "_tail")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_next"))
	u := splitQ4_0.unpack(Mem{Base: wp})[0]
	VMOVDQU(u, Mem{Base: wu})
	VMOVUPS(f16Broadcast(Mem{Base: wp}), Mem{Base: wu, Disp: 32})
	ADDQ(U32(18), wp)
	ADDQ(U32(uBlock), wu)
	DECQ(nb)
	JMP(LabelRef(name + "_tail"))
	Label(name + "_next")
	ADDQ(stride, w0)
	DECQ(rows)
	JNZ(LabelRef(name + "_row"))
	VZEROUPPER()
	RET()
}
