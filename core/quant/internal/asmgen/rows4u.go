package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Prefill kernels of Q4_0 and Q5_0 on AVX2 from weights unpacked once per tile.
// rows4x2 unpacks every weight block again for every group of four activation rows
// (four uops for Q4_0's nibbles, ten for Q5_0's fifth bits); here a chunk of weight rows
// is unpacked once into a scratch (unpackRows: 32 level bytes and the block scale as
// eight float32 per block), the activation side once per tile (prepBias4: each block's
// bias lanes bias·Σ4 x as int32, and its scale as float32), and rows4x2u's pair step
// is six uops: maddubs, madd, the bias subtracted from the int32 lanes, convert, scale
// product, FMA. The int32 lanes are ggml's Σ4 (q−bias)·x exactly (no int16 sum can
// saturate: |q·x| pairs ≤ 2·31·127), and each pair keeps its own FMA chain in block
// order with the scale f16(w.d)·f16(x.d), so the results are VecDot's bits.

// uBlock is the unpacked size of one weight block: 32 levels, then f16(w.d) ×8.
const uBlock = 64

// unpackRows emits func(w *byte, wStride, rows, nb int, wu *byte): rows weight rows
// (at w + r·wStride, nb blocks each) unpacked to wu + (r·nb + b)·uBlock.
func unpackRows(name string, wBytes int, unpack func(w Mem) []reg.VecVirtual) {
	TEXT(name, NOSPLIT, "func(w *byte, wStride, rows, nb int, wu *byte)")
	Pragma("noescape")
	Doc(name + " unpacks rows weight rows of nb blocks into 32 level bytes and eight float32 scales per block (AVX2, F16C).")
	w0, stride, rows := Load(Param("w"), GP64()), Load(Param("wStride"), GP64()), Load(Param("rows"), GP64())
	nb0, wu := Load(Param("nb"), GP64()), Load(Param("wu"), GP64())
	wp, nb := GP64(), GP64()
	Label(name + "_row")
	MOVQ(w0, wp)
	MOVQ(nb0, nb)
	Label(name + "_block")
	u := unpack(Mem{Base: wp})[0]
	VMOVDQU(u, Mem{Base: wu})
	VMOVUPS(f16Broadcast(Mem{Base: wp}), Mem{Base: wu, Disp: 32})
	ADDQ(U32(wBytes), wp)
	ADDQ(U32(uBlock), wu)
	DECQ(nb)
	JNZ(LabelRef(name + "_block"))
	ADDQ(stride, w0)
	DECQ(rows)
	JNZ(LabelRef(name + "_row"))
	VZEROUPPER()
	RET()
}

// prepBias4 emits func(x *byte, xStride, groups, nb int, c32 *byte, xd *float32): for
// group g of four Q8_0 activation rows (row 4g+a at x + (4g+a)·xStride) and block b,
// the int32 lanes bias·Σ4 x at c32 + ((g·nb + b)·4 + a)·32 and f16(x.d) at
// xd[(g·nb + b)·4 + a].
func prepBias4(name string, corrConst Mem) {
	TEXT(name, NOSPLIT, "func(x *byte, xStride, groups, nb int, c32 *byte, xd *float32)")
	Pragma("noescape")
	Doc(name + " prepares the bias lanes and scales of groups of four Q8_0 activation rows (AVX2, F16C).")
	x0, xs, groups := Load(Param("x"), GP64()), Load(Param("xStride"), GP64()), Load(Param("groups"), GP64())
	nb0, cp, dp := Load(Param("nb"), GP64()), Load(Param("c32"), GP64()), Load(Param("xd"), GP64())
	corr := loadCorr(corrConst)
	xa, xb, nb := GP64(), GP64(), GP64()
	Label(name + "_group")
	MOVQ(x0, xa)
	LEAQ(Mem{Base: x0, Index: xs, Scale: 2}, xb)
	MOVQ(nb0, nb)
	Label(name + "_block")
	for a, x := range actRows4(xa, xb, xs) {
		c := YMM()
		VPMADDUBSW(x.Offset(2), corr, c)
		VPMADDWD(ones16, c, c)
		VMOVDQU(c, Mem{Base: cp, Disp: 32 * a})
		VMOVSS(f16ToScalar(x), Mem{Base: dp, Disp: 4 * a})
	}
	ADDQ(Imm(q8_0Bytes), xa)
	ADDQ(Imm(q8_0Bytes), xb)
	ADDQ(Imm(128), cp)
	ADDQ(Imm(16), dp)
	DECQ(nb)
	JNZ(LabelRef(name + "_block"))
	LEAQ(Mem{Base: x0, Index: xs, Scale: 4}, x0)
	DECQ(groups)
	JNZ(LabelRef(name + "_group"))
	VZEROUPPER()
	RET()
}

// actRows4 addresses four activation rows from xa (rows 0, 1) and xb = xa + 2·xs.
func actRows4(xa, xb, xs reg.Register) [4]Mem {
	return [4]Mem{{Base: xa}, {Base: xa, Index: xs, Scale: 1}, {Base: xb}, {Base: xb, Index: xs, Scale: 1}}
}

// rows4x2u emits func(wu *byte, rows, nb int, x *byte, xStride int, c32 *byte, xd
// *float32, out *float32, outStride int): for weight row pairs (rows even) of the
// unpacked scratch wu and one group of four activation rows with their prepared bias
// lanes and scales (prepBias4's layout for that group), out[a·outStride + r] = VecDot.
// The same kernel serves Q4_0 and Q5_0: the bias lives in c32.
func rows4x2u(name string) {
	TEXT(name, NOSPLIT, "func(wu *byte, rows, nb int, x *byte, xStride int, c32 *byte, xd *float32, out *float32, outStride int)")
	Pragma("noescape")
	Doc(name + " runs ggml's block loop for rows (even) unpacked weight rows, two at a time, against four prepared activation rows (AVX2, FMA, F16C).")
	wp, rows := Load(Param("wu"), GP64()), Load(Param("rows"), GP64())
	rs := Load(Param("nb"), GP64())
	SHLQ(Imm(6), rs) // bytes of one unpacked row: nb·uBlock
	xs := Load(Param("xStride"), GP64())
	op, os := Load(Param("out"), GP64()), Load(Param("outStride"), GP64())
	SHLQ(Imm(2), os)
	xa, xb, cp, dp, nb := GP64(), GP64(), GP64(), GP64(), GP64()
	Label(name + "_pair")
	Load(Param("x"), xa)
	LEAQ(Mem{Base: xa, Index: xs, Scale: 2}, xb)
	Load(Param("c32"), cp)
	Load(Param("xd"), dp)
	Load(Param("nb"), nb)
	acc := [2][4]reg.VecVirtual{zeroed4(), zeroed4()}
	Label(name + "_block")
	w := [2]Mem{{Base: wp}, {Base: wp, Index: rs, Scale: 1}}
	u := [2]reg.VecVirtual{YMM(), YMM()}
	for r := range u {
		VMOVDQU(w[r], u[r])
	}
	for a, x := range actRows4(xa, xb, xs) {
		yx, xdv := YMM(), YMM()
		VMOVDQU(x.Offset(2), yx)
		VBROADCASTSS(Mem{Base: dp, Disp: 4 * a}, xdv)
		for r := 0; r < 2; r++ {
			p, d := YMM(), YMM()
			VPMADDUBSW(yx, u[r], p)
			VPMADDWD(ones16, p, p)
			VPSUBD(Mem{Base: cp, Disp: 32 * a}, p, p)
			VCVTDQ2PS(p, p)
			VMULPS(w[r].Offset(32), xdv, d) // f16(x.d)·f16(w.d)
			VFMADD231PS(p, d, acc[r][a])
		}
	}
	ADDQ(Imm(uBlock), wp)
	ADDQ(Imm(q8_0Bytes), xa)
	ADDQ(Imm(q8_0Bytes), xb)
	ADDQ(Imm(128), cp)
	ADDQ(Imm(16), dp)
	DECQ(nb)
	JNZ(LabelRef(name + "_block"))
	// wp is one row past its row: skip the pair's second row.
	ADDQ(rs, wp)
	op2 := nb // free after the loop
	for r := 0; r < 2; r++ {
		for a, o := range outRows4(op, os, op2, 4*r) {
			hsumStore(acc[r][a], o)
		}
	}
	ADDQ(Imm(8), op)
	SUBQ(Imm(2), rows)
	JNZ(LabelRef(name + "_pair"))
	VZEROUPPER()
	RET()
}

// prepScales4 emits func(x *byte, xStride, nb int, xd *float32): f16(x_a.d) of block b
// of the four Q8_0 activation rows at x (a·xStride bytes apart), broadcast to eight
// float32, at xd[(4b+a)·8] (the prepared scales of rows4x2 and rows4p).
func prepScales4() {
	TEXT("prepScales4AVX2", NOSPLIT, "func(x *byte, xStride, nb int, xd *float32)")
	Pragma("noescape")
	Doc("prepScales4AVX2 broadcasts the block scales of four Q8_0 activation rows to eight float32 each (AVX2, F16C).")
	xa, xs, nb, dp := Load(Param("x"), GP64()), Load(Param("xStride"), GP64()), Load(Param("nb"), GP64()), Load(Param("xd"), GP64())
	xb := GP64()
	LEAQ(Mem{Base: xa, Index: xs, Scale: 2}, xb)
	Label("prepScales4_block")
	for a, x := range actRows4(xa, xb, xs) {
		VMOVUPS(f16Broadcast(x), Mem{Base: dp, Disp: 32 * a})
	}
	ADDQ(Imm(q8_0Bytes), xa)
	ADDQ(Imm(q8_0Bytes), xb)
	ADDQ(Imm(128), dp)
	DECQ(nb)
	JNZ(LabelRef("prepScales4_block"))
	VZEROUPPER()
	RET()
}
