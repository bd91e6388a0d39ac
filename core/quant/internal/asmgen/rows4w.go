package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Four-weight-row AVX2 kernels for one activation row (decoding, and the rows of a
// prefill that do not fill a group of four). blockDotRows runs one FMA chain at a time,
// so each block waits for the previous block's FMA (4 cycles on Zen 3/4); four weight
// rows give four independent chains, and they share the activation block's load, scale
// (and, for the biased formats, its bias products). Measured against blockDotRows
// (256 rows, one activation row, AMD EPYC with AVX2, fastest of 5): 512 columns
// 8.3-9.8 → 5.4 µs, 896 columns 12.9-17.2 → 11.4 µs; two rows a pass gave 5.8-6.7 and
// 12.8-15.3.

// A pairDot emits the integer lanes of one weight block at w against the activation
// block already loaded in yx; shared holds what prep computed from yx (or nil).
type pairDot struct {
	prep func(yx, corr reg.VecVirtual) reg.VecVirtual
	dot  func(w Mem, yx, shared reg.VecVirtual) reg.VecVirtual
}

var pairQ8_0 = pairDot{
	dot: func(w Mem, yx, _ reg.VecVirtual) reg.VecVirtual {
		yw, aw, p := YMM(), YMM(), YMM()
		VMOVDQU(w.Offset(2), yw)
		VPSIGNB(yw, yw, aw) // |w|
		VPSIGNB(yw, yx, p)  // x·sign(w)
		VPMADDUBSW(p, aw, p)
		VPMADDWD(ones16, p, p)
		return p
	},
}

// biasPrep is bias·x as int16 pairs (maddubs of the bias bytes): the same for every
// weight row.
func biasPrep(yx, corr reg.VecVirtual) reg.VecVirtual {
	c := YMM()
	VPMADDUBSW(yx, corr, c)
	return c
}

// biasedPairDot is biasedDot with the bias products precomputed.
func biasedPairDot(q, yx, c reg.VecVirtual) reg.VecVirtual {
	p := YMM()
	VPMADDUBSW(yx, q, p)
	VPSUBW(c, p, p)
	VPMADDWD(ones16, p, p)
	return p
}

var pairQ4_0 = pairDot{
	prep: biasPrep,
	dot: func(w Mem, yx, c reg.VecVirtual) reg.VecVirtual {
		return biasedPairDot(splitQ4_0.unpack(w)[0], yx, c)
	},
}

var pairQ5_0 = pairDot{
	prep: biasPrep,
	dot: func(w Mem, yx, c reg.VecVirtual) reg.VecVirtual {
		return biasedPairDot(splitQ5_0.unpack(w)[0], yx, c)
	},
}

// blockDotRows4w emits func(w *byte, wStride, rows int, x *byte, nb int, out *float32):
// blockDotRows for a multiple of four weight rows, four at a time: out[r] =
// hsum_float_8 of acc_r, acc_r = fma(f16(w_r.d)·f16(x.d), float32(lanes_r), acc_r) block
// by block, the bits of VecDot (each row keeps its own chain; the scale product is one
// VMULPS of the two broadcast scales, the same float32 product in every lane).
func blockDotRows4w(name string, wBytes int, body pairDot, corrConst Mem, grouped bool) {
	const k = 4
	TEXT(name, NOSPLIT, "func(w *byte, wStride, rows int, x *byte, nb int, out *float32)")
	Pragma("noescape")
	Doc(name + " runs ggml's block loop for rows (a multiple of 4) weight rows, four at a time, against one activation row (AVX2, FMA, F16C).")
	w0, stride, rows := Load(Param("w"), GP64()), Load(Param("wStride"), GP64()), Load(Param("rows"), GP64())
	x0, nb0, out := Load(Param("x"), GP64()), Load(Param("nb"), GP64()), Load(Param("out"), GP64())
	corr := loadCorr(corrConst)
	var scales Mem
	if grouped {
		scales = AllocLocal(4 * 32) // rows4wGroups' scale products
	}
	wp, wq, xp, nb := GP64(), GP64(), GP64(), GP64()
	s3 := GP64()
	LEAQ(Mem{Base: stride, Index: stride, Scale: 2}, s3)
	Label(name + "_rows")
	MOVQ(w0, wp)
	LEAQ(Mem{Base: w0, Index: stride, Scale: 2}, wq)
	MOVQ(x0, xp)
	MOVQ(nb0, nb)
	acc := make([]reg.VecVirtual, k)
	for i := range acc {
		acc[i] = YMM()
		VXORPS(acc[i], acc[i], acc[i])
	}
	ws := []Mem{{Base: wp}, {Base: wp, Index: stride, Scale: 1}, {Base: wq}, {Base: wp, Index: s3, Scale: 1}}
	if grouped {
		rows4wGroups(name, wBytes, body, corr, ws, xp, wp, wq, nb, scales, acc)
	}
	// The last nb%8 blocks (all of them if not grouped) one at a time.
	Label(name + "_tail")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	for _, w := range ws {
		PREFETCHT1(w.Offset(prefetchDist))
	}
	yx := YMM()
	VMOVDQU(Mem{Base: xp, Disp: 2}, yx)
	var shared reg.VecVirtual
	if body.prep != nil {
		shared = body.prep(yx, corr)
	}
	xd := f16Broadcast(Mem{Base: xp})
	for r, w := range ws {
		p := body.dot(w, yx, shared)
		d := f16Broadcast(w)
		VMULPS(xd, d, d) // f16(w.d)·f16(x.d)
		VCVTDQ2PS(p, p)
		VFMADD231PS(p, d, acc[r])
	}
	ADDQ(U32(wBytes), wp)
	ADDQ(U32(wBytes), wq)
	ADDQ(Imm(q8_0Bytes), xp)
	DECQ(nb)
	JMP(LabelRef(name + "_tail"))
	rowsDone(name, acc, out, w0, stride, rows, k)
}

// rows4wGroups emits the grouped part of blockDotRows4w: groups of eight blocks, the
// 4×8 scale products f16(w.d)·f16(x.d) gathered and multiplied in three vectors per row
// (VPINSRW ×8, VCVTPH2PS, VMULPS) into scales, then one broadcast load per dot, where
// the block loop converts and multiplies each scale on its own (about five uops a dot).
// Qwen2.5-0.5B decode (AMD EPYC, AVX2, -t 2, best of 3): Q4_0 47.4 → 57.0 t/s, Q4_K_M
// (Q5_0 at 896 columns) 37.8 → 39.5; Q8_0, whose rows are twice the bytes and whose
// decode is bound by memory, measured the same or slower, and keeps the block loop.
func rows4wGroups(name string, wBytes int, body pairDot, corr reg.VecVirtual, ws []Mem, xp, wp, wq, nb reg.GPVirtual, scales Mem, acc []reg.VecVirtual) {
	Label(name + "_group")
	CMPQ(nb, Imm(8))
	JL(LabelRef(name + "_tail"))
	for _, w := range ws {
		for off := 0; off < 8*wBytes; off += 64 {
			PREFETCHT1(w.Offset(prefetchDist + off))
		}
	}
	fx := q8Scales8(xp)
	for r, w := range ws {
		dw, fw := XMM(), YMM()
		for b := 0; b < 8; b++ {
			VPINSRW(Imm(uint64(b)), w.Offset(b*wBytes), dw, dw)
		}
		VCVTPH2PS(dw, fw)
		VMULPS(fx, fw, fw) // f16(w.d)·f16(x.d)
		VMOVUPS(fw, scales.Offset(32*r))
	}
	for b := 0; b < 8; b++ {
		yx := YMM()
		VMOVDQU(Mem{Base: xp, Disp: b*q8_0Bytes + 2}, yx)
		var shared reg.VecVirtual
		if body.prep != nil {
			shared = body.prep(yx, corr)
		}
		for r, w := range ws {
			p, d := body.dot(w.Offset(b*wBytes), yx, shared), YMM()
			VCVTDQ2PS(p, p)
			VBROADCASTSS(scales.Offset(32*r+4*b), d)
			VFMADD231PS(p, d, acc[r])
		}
	}
	ADDQ(U32(8*wBytes), wp)
	ADDQ(U32(8*wBytes), wq)
	ADDQ(U32(8*q8_0Bytes), xp)
	SUBQ(Imm(8), nb)
	JMP(LabelRef(name + "_group"))
}
