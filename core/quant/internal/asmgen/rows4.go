package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// A splitBody is a blockBody in two steps, so that one weight block unpacked once serves
// several activation rows: unpack reads the weight block at w, dot takes its result and
// one Q8_0 activation block at x and returns the eight int32 lane partials.
type splitBody struct {
	unpack func(w Mem) []reg.VecVirtual
	dot    func(u []reg.VecVirtual, x Mem, corr reg.VecVirtual) reg.VecVirtual
}

var splitQ8_0 = splitBody{
	unpack: func(w Mem) []reg.VecVirtual {
		yw, aw := YMM(), YMM()
		VMOVDQU(w.Offset(2), yw)
		VPSIGNB(yw, yw, aw) // |w|
		return []reg.VecVirtual{yw, aw}
	},
	dot: func(u []reg.VecVirtual, x Mem, _ reg.VecVirtual) reg.VecVirtual {
		yx, p := YMM(), YMM()
		VMOVDQU(x.Offset(2), yx)
		VPSIGNB(u[0], yx, yx) // x·sign(w)
		VPMADDUBSW(yx, u[1], p)
		VPMADDWD(ones16, p, p)
		return p
	},
}

var splitQ4_0 = splitBody{
	unpack: func(w Mem) []reg.VecVirtual { return []reg.VecVirtual{nibbles(w.Offset(2))} },
	dot: func(u []reg.VecVirtual, x Mem, corr reg.VecVirtual) reg.VecVirtual {
		return biasedDot(u[0], x.Offset(2), corr)
	},
}

var splitQ5_0 = splitBody{
	unpack: func(w Mem) []reg.VecVirtual {
		q := nibbles(w.Offset(6))
		b := YMM()
		VPBROADCASTD(w.Offset(2), b)
		VPSHUFB(bitsShuf, b, b)
		VPOR(bitsMask, b, b)
		VPCMPEQB(allOnes, b, b)
		VPAND(sixteen, b, b)
		VPOR(b, q, q)
		return []reg.VecVirtual{q}
	},
	dot: splitQ4_0.dot,
}

// f16ToScalar leaves float32(f16 at m) in lane 0 of a new XMM.
func f16ToScalar(m Mem) reg.VecVirtual {
	t := XMM()
	VPXOR(t, t, t)
	VPINSRW(Imm(0), m, t, t)
	VCVTPH2PS(t, t)
	return t
}

// zeroed4 is four new YMM accumulators set to zero.
func zeroed4() [4]reg.VecVirtual {
	var acc [4]reg.VecVirtual
	for a := range acc {
		acc[a] = YMM()
		VXORPS(acc[a], acc[a], acc[a])
	}
	return acc
}

// outRows4 is the four output rows' addresses from op, os bytes apart, disp bytes into
// each: it sets op2 to op + 2·os for the last two.
func outRows4(op, os, op2 reg.Register, disp int) [4]Mem {
	LEAQ(Mem{Base: op, Index: os, Scale: 2}, op2)
	return [4]Mem{{Base: op, Disp: disp}, {Base: op, Index: os, Scale: 1, Disp: disp},
		{Base: op2, Disp: disp}, {Base: op2, Index: os, Scale: 1, Disp: disp}}
}

// rowsDone emits the end of a k-row kernel's row loop (label name_done): each row's
// accumulator summed and stored at out, then w0 k rows (of stride bytes) on, out k
// floats on, rows k fewer, back to name_rows while rows remain; then the return.
func rowsDone(name string, acc []reg.VecVirtual, out, w0, stride, rows reg.Register, k int) {
	Label(name + "_done")
	for i := range acc {
		hsumStore(acc[i], Mem{Base: out, Disp: 4 * i})
	}
	LEAQ(Mem{Base: w0, Index: stride, Scale: 4}, w0)
	ADDQ(Imm(uint64(4*k)), out)
	SUBQ(Imm(uint64(k)), rows)
	JNZ(LabelRef(name + "_rows"))
	VZEROUPPER()
	RET()
}

// hsumStore stores hsum_float_8(acc) = ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)) at m.
func hsumStore(acc reg.VecVirtual, m Mem) {
	hi, lo := XMM(), XMM()
	VEXTRACTF128(Imm(1), acc, hi)
	VADDPS(hi, acc.AsX(), lo)
	VMOVHLPS(lo, lo, hi)
	VADDPS(hi, lo, lo)
	VMOVSHDUP(lo, hi)
	VADDSS(hi, lo, lo)
	VMOVSS(lo, m)
}

// blockDotRows4 emits func(w *byte, wStride, rows int, x *byte, xStride, nb int, out
// *float32, outStride int): for each weight row r (at w + r·wStride) and each of four
// activation rows a (at x + a·xStride), out[a·outStride + r] = VecDot's dot: block by
// block acc_a = fma(f16(w.d)·f16(x_a.d), float32(lanes), acc_a), then hsum_float_8. Each
// weight block is unpacked once for the four rows.
func blockDotRows4(name string, wBytes int, body splitBody, corrConst Mem) {
	blockDotRows4Scales(name, wBytes, body, corrConst, false)
}

// blockDotRows4P is blockDotRows4 with the activation scales prepared as for
// blockDotRows4x2 (an extra xd *float32 argument before out): one VMULPS per dot.
func blockDotRows4P(name string, wBytes int, body splitBody, corrConst Mem) {
	blockDotRows4Scales(name, wBytes, body, corrConst, true)
}

func blockDotRows4Scales(name string, wBytes int, body splitBody, corrConst Mem, prepared bool) {
	sig := "func(w *byte, wStride, rows int, x *byte, xStride, nb int, out *float32, outStride int)"
	if prepared {
		sig = "func(w *byte, wStride, rows int, x *byte, xStride, nb int, xd *float32, out *float32, outStride int)"
	}
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(name + " runs ggml's block loop for rows weight rows against four activation rows (AVX2, FMA, F16C).")
	w0, stride, rows := Load(Param("w"), GP64()), Load(Param("wStride"), GP64()), Load(Param("rows"), GP64())
	x0, xs, nb0 := Load(Param("x"), GP64()), Load(Param("xStride"), GP64()), Load(Param("nb"), GP64())
	var xd0, xdp reg.Register
	if prepared {
		xd0, xdp = Load(Param("xd"), GP64()), GP64()
	}
	op, os := Load(Param("out"), GP64()), Load(Param("outStride"), GP64())
	SHLQ(Imm(2), os) // bytes
	corr := loadCorr(corrConst)
	wp, xa, xb, nb, op2 := GP64(), GP64(), GP64(), GP64(), GP64()
	Label(name + "_row")
	MOVQ(w0, wp)
	MOVQ(x0, xa)
	LEAQ(Mem{Base: x0, Index: xs, Scale: 2}, xb)
	if prepared {
		MOVQ(xd0, xdp)
	}
	MOVQ(nb0, nb)
	acc := zeroed4()
	Label(name + "_block")
	prefetchW(wp, wBytes)
	u := body.unpack(Mem{Base: wp})
	wd := f16ToScalar(Mem{Base: wp})
	var wdv reg.VecVirtual
	if prepared {
		wdv = YMM()
		VBROADCASTSS(wd, wdv)
	}
	for a := 0; a < 4; a++ {
		x := Mem{Base: xa}
		switch a {
		case 1:
			x = Mem{Base: xa, Index: xs, Scale: 1}
		case 2:
			x = Mem{Base: xb}
		case 3:
			x = Mem{Base: xb, Index: xs, Scale: 1}
		}
		p := body.dot(u, x, corr)
		f, d := YMM(), YMM()
		if prepared {
			VMULPS(Mem{Base: xdp, Disp: 32 * a}, wdv, d) // f16(w.d)·f16(x.d)
		} else {
			s := f16ToScalar(x)
			VMULSS(s, wd, s) // f16(w.d)·f16(x.d)
			VBROADCASTSS(s, d)
		}
		VCVTDQ2PS(p, f)
		VFMADD231PS(f, d, acc[a])
	}
	ADDQ(U32(wBytes), wp)
	ADDQ(Imm(q8_0Bytes), xa)
	ADDQ(Imm(q8_0Bytes), xb)
	if prepared {
		ADDQ(Imm(128), xdp)
	}
	DECQ(nb)
	JNZ(LabelRef(name + "_block"))
	for a, o := range outRows4(op, os, op2, 0) {
		hsumStore(acc[a], o)
	}
	ADDQ(stride, w0)
	ADDQ(Imm(4), op)
	DECQ(rows)
	JNZ(LabelRef(name + "_row"))
	VZEROUPPER()
	RET()
}

// blockDotRows4x2 is blockDotRows4 for two weight rows at a time (rows even): each
// activation block is loaded once for both weight rows, and its bias products
// (maddubs of the bias bytes, which depend on the activation only) computed once; the
// activation scales come prepared, f16(x_a.d) of block b broadcast to eight floats at
// xd[(4b+a)·8], so each dot's scale is one VMULPS by the broadcast f16(w.d). Every
// (weight row, activation row) keeps its own FMA chain in block order, and
// f16(w.d)·f16(x.d) is the same product in every lane, so the results are
// blockDotRows4's bits. Only for the biased formats (Q4_0, Q5_0: unpack returns one
// register, the dot is biasedDot's).
func blockDotRows4x2(name string, wBytes int, unpack func(w Mem) []reg.VecVirtual, corrConst Mem) {
	TEXT(name, NOSPLIT, "func(w *byte, wStride, rows int, x *byte, xStride, nb int, xd *float32, out *float32, outStride int)")
	Pragma("noescape")
	Doc(name + " runs ggml's block loop for rows (even) weight rows, two at a time, against four activation rows (AVX2, FMA, F16C).")
	w0, stride, rows := Load(Param("w"), GP64()), Load(Param("wStride"), GP64()), Load(Param("rows"), GP64())
	x0, xs, nb0 := Load(Param("x"), GP64()), Load(Param("xStride"), GP64()), Load(Param("nb"), GP64())
	xd0 := Load(Param("xd"), GP64())
	op, os := Load(Param("out"), GP64()), Load(Param("outStride"), GP64())
	SHLQ(Imm(2), os) // bytes
	corr := loadCorr(corrConst)
	wp, wq, xa, xb, xdp, nb, op2 := GP64(), GP64(), GP64(), GP64(), GP64(), GP64(), GP64()
	Label(name + "_row")
	MOVQ(w0, wp)
	LEAQ(Mem{Base: w0, Index: stride, Scale: 1}, wq)
	MOVQ(x0, xa)
	LEAQ(Mem{Base: x0, Index: xs, Scale: 2}, xb)
	MOVQ(xd0, xdp)
	MOVQ(nb0, nb)
	acc := [2][4]reg.VecVirtual{zeroed4(), zeroed4()}
	Label(name + "_block")
	prefetchW(wp, wBytes)
	prefetchW(wq, wBytes)
	u := [2]reg.VecVirtual{unpack(Mem{Base: wp})[0], unpack(Mem{Base: wq})[0]}
	var wdv [2]reg.VecVirtual
	for r, m := range []Mem{{Base: wp}, {Base: wq}} {
		wdv[r] = f16Broadcast(m)
	}
	for a := 0; a < 4; a++ {
		x := Mem{Base: xa}
		switch a {
		case 1:
			x = Mem{Base: xa, Index: xs, Scale: 1}
		case 2:
			x = Mem{Base: xb}
		case 3:
			x = Mem{Base: xb, Index: xs, Scale: 1}
		}
		c := YMM()
		VPMADDUBSW(x.Offset(2), corr, c) // bias·x, shared by both weight rows
		for r := 0; r < 2; r++ {
			p, d := YMM(), YMM()
			VPMADDUBSW(x.Offset(2), u[r], p)
			VPSUBW(c, p, p)
			VPMADDWD(ones16, p, p)
			VMULPS(Mem{Base: xdp, Disp: 32 * a}, wdv[r], d) // f16(w.d)·f16(x.d)
			VCVTDQ2PS(p, p)
			VFMADD231PS(p, d, acc[r][a])
		}
	}
	ADDQ(U32(wBytes), wp)
	ADDQ(U32(wBytes), wq)
	ADDQ(Imm(q8_0Bytes), xa)
	ADDQ(Imm(q8_0Bytes), xb)
	ADDQ(Imm(128), xdp)
	DECQ(nb)
	JNZ(LabelRef(name + "_block"))
	for r := 0; r < 2; r++ {
		for a, o := range outRows4(op, os, op2, 4*r) {
			hsumStore(acc[r][a], o)
		}
	}
	LEAQ(Mem{Base: w0, Index: stride, Scale: 2}, w0)
	ADDQ(Imm(8), op)
	SUBQ(Imm(2), rows)
	JNZ(LabelRef(name + "_row"))
	VZEROUPPER()
	RET()
}

// q8Scales8 returns the f16 scales of the eight Q8_0 blocks at xp as eight float32.
func q8Scales8(xp reg.Register) reg.VecVirtual {
	dx, fx := XMM(), YMM()
	for b := 0; b < 8; b++ {
		VPINSRW(Imm(uint64(b)), Mem{Base: xp, Disp: b * q8_0Bytes}, dx, dx)
	}
	VCVTPH2PS(dx, fx)
	return fx
}

// f16Broadcast returns float32(f16 at m) in all eight lanes of a new YMM (VPBROADCASTW
// then VCVTPH2PS: the same conversion as f16ToScalar, without the insert and the float
// broadcast).
func f16Broadcast(m Mem) reg.VecVirtual {
	t := YMM()
	VPBROADCASTW(m, t.AsX())
	VCVTPH2PS(t.AsX(), t)
	return t
}
