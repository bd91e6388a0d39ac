package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// iq4Table holds the sixteen IQ4 levels (core/quant's iq4Levels) in both 128-bit halves,
// for VPSHUFB.
var iq4Table Mem

func iqConstants() {
	levels := []int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	iq4Table = bytes32("iq4Table", func(i int) byte { return byte(levels[i%16]) })
}

// iq4Levels loads the 32 levels of a 16-byte nibble group at m (value j in byte j).
func iq4Levels(m Mem, table reg.VecVirtual) reg.VecVirtual {
	q := nibbles(m)
	VPSHUFB(q, table, q)
	return q
}

// signedDot is the int16 pair sums of Σ v·x for signed bytes v (|v| ≤ 127) and the 32
// activation bytes at x: ggml's mul_add_epi8 (|v| times x with v's sign).
func signedDot(v reg.VecVirtual, x Mem) reg.VecVirtual {
	a, yx, p := YMM(), YMM(), YMM()
	VMOVDQU(x, yx)
	VPSIGNB(v, v, a)
	VPSIGNB(v, yx, yx)
	VPMADDUBSW(yx, a, p)
	return p
}

// iq4NLDot emits func(w, x *byte, np int, acc *[16]float32): ggml's AVX2
// ggml_vec_dot_iq4_nl_q8_0 loop over np pairs of blocks, the even blocks into acc[0:8],
// the odd into acc[8:16]; the caller adds the halves and any last block.
func iq4NLDot() {
	TEXT("dotIQ4_NLAVX2", NOSPLIT, "func(w, x *byte, np int, acc *[16]float32)")
	Pragma("noescape")
	Doc("dotIQ4_NLAVX2 runs ggml's IQ4_NL·Q8_0 loop over np pairs of blocks into acc (AVX2, FMA, F16C).")
	wp, xp, np, accp := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("np"), GP64()), Load(Param("acc"), GP64())
	acc := [2]reg.VecVirtual{YMM(), YMM()}
	VMOVUPS(Mem{Base: accp}, acc[0])
	VMOVUPS(Mem{Base: accp, Disp: 32}, acc[1])
	table := YMM()
	VMOVDQU(iq4Table, table)
	Label("iq4nl_loop")
	TESTQ(np, np)
	JZ(LabelRef("iq4nl_done"))
	prefetchW(wp, 2*18)
	for b := 0; b < 2; b++ {
		w, x := Mem{Base: wp, Disp: 18 * b}, Mem{Base: xp, Disp: q8_0Bytes * b}
		p := signedDot(iq4Levels(w.Offset(2), table), x.Offset(2))
		VPMADDWD(ones16, p, p)
		// d = f16(x.d)·f16(w.d)
		xd := XMM()
		VPXOR(xd, xd, xd)
		VPINSRW(Imm(0), x, xd, xd)
		VCVTPH2PS(xd, xd)
		d := f16Scalar(w, xd)
		yd, f := YMM(), YMM()
		VBROADCASTSS(d, yd)
		VCVTDQ2PS(p, f)
		VFMADD231PS(f, yd, acc[b])
	}
	ADDQ(U32(2*18), wp)
	ADDQ(U32(2*q8_0Bytes), xp)
	DECQ(np)
	JMP(LabelRef("iq4nl_loop"))
	Label("iq4nl_done")
	VMOVUPS(acc[0], Mem{Base: accp})
	VMOVUPS(acc[1], Mem{Base: accp, Disp: 32})
	VZEROUPPER()
	RET()
}

// iq4XSDot emits func(w, x *byte, nb int, acc *[8]float32): ggml's AVX2
// ggml_vec_dot_iq4_xs_q8_K loop; the caller reduces acc.
func iq4XSDot() {
	const wBytes = 136
	TEXT("dotIQ4_XSAVX2", NOSPLIT, "func(w, x *byte, nb int, acc *[8]float32)")
	Pragma("noescape")
	Doc("dotIQ4_XSAVX2 runs ggml's IQ4_XS·Q8_K loop over nb super-blocks into acc (AVX2, FMA, F16C).")
	wp, xp, nb, accp := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("nb"), GP64()), Load(Param("acc"), GP64())
	acc := YMM()
	VMOVUPS(Mem{Base: accp}, acc)
	table := YMM()
	VMOVDQU(iq4Table, table)
	Label("iq4xs_loop")
	TESTQ(nb, nb)
	JZ(LabelRef("iq4xs_done"))
	prefetchW(wp, wBytes)
	sh := GP32()
	MOVWLZX(Mem{Base: wp, Disp: 2}, sh)
	sumi := YMM()
	VPXOR(sumi, sumi, sumi)
	for g := 0; g < 8; g++ {
		p := signedDot(iq4Levels(Mem{Base: wp, Disp: 8 + 16*g}, table), Mem{Base: xp, Disp: 4 + 32*g})
		// ls = (scales_l nibble g%2 | (scales_h bits 2g..2g+1)<<4) − 32
		ls, hi := GP32(), GP32()
		MOVBLZX(Mem{Base: wp, Disp: 4 + g/2}, ls)
		if g%2 == 1 {
			SHRL(Imm(4), ls)
		}
		ANDL(Imm(0xf), ls)
		MOVL(sh, hi)
		if g > 0 {
			SHRL(Imm(uint64(2*g)), hi)
		}
		ANDL(Imm(3), hi)
		SHLL(Imm(4), hi)
		ORL(hi, ls)
		SUBL(Imm(32), ls)
		s, sx := YMM(), XMM()
		VMOVD(ls, sx)
		VPBROADCASTW(sx, s)
		VPMADDWD(s, p, p)
		VPADDD(p, sumi, sumi)
	}
	xd := XMM()
	VMOVSS(Mem{Base: xp}, xd)
	d := f16Scalar(Mem{Base: wp}, xd)
	yd, f := YMM(), YMM()
	VBROADCASTSS(d, yd)
	VCVTDQ2PS(sumi, f)
	VFMADD231PS(f, yd, acc)
	ADDQ(U32(wBytes), wp)
	ADDQ(U32(292), xp)
	DECQ(nb)
	JMP(LabelRef("iq4xs_loop"))
	Label("iq4xs_done")
	VMOVUPS(acc, Mem{Base: accp})
	VZEROUPPER()
	RET()
}

// unsignedDot is Σ q·x as int32 lanes for unsigned levels q (Q4_1/Q5_1: no bias).
func unsignedDot(q reg.VecVirtual, x Mem) reg.VecVirtual {
	p := YMM()
	VPMADDUBSW(x, q, p)
	VPMADDWD(ones16, p, p)
	return p
}

func bodyQ4_1(w, x Mem, _ reg.VecVirtual) reg.VecVirtual {
	return unsignedDot(nibbles(w.Offset(4)), x.Offset(4))
}

func bodyQ5_1(w, x Mem, _ reg.VecVirtual) reg.VecVirtual {
	q := nibbles(w.Offset(8))
	b := YMM()
	VPBROADCASTD(w.Offset(4), b)
	VPSHUFB(bitsShuf, b, b)
	VPOR(bitsMask, b, b)
	VPCMPEQB(allOnes, b, b)
	VPAND(sixteen, b, b)
	VPOR(b, q, q)
	return unsignedDot(q, x.Offset(4))
}

// fp4Table holds the sixteen doubled E2M1 levels (core/quant's fp4Levels) in both halves;
// e8m0Table the 256 halved E8M0 scales 2^(e-128) as float32 (e 0 and 1 subnormal).
var fp4Table, e8m0Table Mem

func mxfp4Constants() {
	levels := []int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
	fp4Table = bytes32("fp4Table", func(i int) byte { return byte(levels[i%16]) })
	e8m0Table = GLOBL("e8m0Table", RODATA|NOPTR)
	for e := 0; e < 256; e++ {
		bits := uint32(e-1) << 23
		if e < 2 {
			bits = 0x00200000 << e
		}
		DATA(4*e, U32(bits))
	}
}

// mxfp4Dot emits func(w, x *byte, np int, acc *[16]float32): ggml's AVX2
// ggml_vec_dot_mxfp4_q8_0 loop over np pairs of blocks, the even blocks into acc[0:8],
// the odd into acc[8:16]; the caller adds the halves and any last block.
func mxfp4Dot() {
	TEXT("dotMXFP4AVX2", NOSPLIT, "func(w, x *byte, np int, acc *[16]float32)")
	Pragma("noescape")
	Doc("dotMXFP4AVX2 runs ggml's MXFP4·Q8_0 loop over np pairs of blocks into acc (AVX2, FMA, F16C).")
	wp, xp, np, accp := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("np"), GP64()), Load(Param("acc"), GP64())
	acc := [2]reg.VecVirtual{YMM(), YMM()}
	VMOVUPS(Mem{Base: accp}, acc[0])
	VMOVUPS(Mem{Base: accp, Disp: 32}, acc[1])
	table, tab := YMM(), GP64()
	VMOVDQU(fp4Table, table)
	LEAQ(e8m0Table, tab)
	Label("mxfp4_loop")
	TESTQ(np, np)
	JZ(LabelRef("mxfp4_done"))
	prefetchW(wp, 2*17)
	for b := 0; b < 2; b++ {
		w, x := Mem{Base: wp, Disp: 17 * b}, Mem{Base: xp, Disp: q8_0Bytes * b}
		p := signedDot(iq4Levels(w.Offset(1), table), x.Offset(2))
		VPMADDWD(ones16, p, p)
		// d = f16(x.d)·2^(e-128)
		xd := f16ToScalar(x)
		e := GP64()
		MOVBQZX(w, e)
		VMULSS(Mem{Base: tab, Index: e, Scale: 4}, xd, xd)
		yd, f := YMM(), YMM()
		VBROADCASTSS(xd, yd)
		VCVTDQ2PS(p, f)
		VFMADD231PS(f, yd, acc[b])
	}
	ADDQ(U32(2*17), wp)
	ADDQ(U32(2*q8_0Bytes), xp)
	DECQ(np)
	JMP(LabelRef("mxfp4_loop"))
	Label("mxfp4_done")
	VMOVUPS(acc[0], Mem{Base: accp})
	VMOVUPS(acc[1], Mem{Base: accp, Disp: 32})
	VZEROUPPER()
	RET()
}

var shifts07, onesD Mem

func iq3SConstants() {
	shifts07 = GLOBL("shifts07", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(4*i, U32(uint32(i)))
	}
	onesD = GLOBL("onesD", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(4*i, U32(1))
	}
}

// iq3SDot emits func(w, x *byte, nb int, grid *uint32, acc *[8]float32): ggml's AVX2
// ggml_vec_dot_iq3_s_q8_K loop (grid is core/quant's iq3SGrid); the caller reduces acc.
func iq3SDot() {
	const wBytes = 110
	TEXT("dotIQ3_SAVX2", NOSPLIT, "func(w, x *byte, nb int, grid *uint32, acc *[8]float32)")
	Pragma("noescape")
	Doc("dotIQ3_SAVX2 runs ggml's IQ3_S·Q8_K loop over nb super-blocks into acc (AVX2, FMA, F16C).")
	wp, xp, nb := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("nb"), GP64())
	gp, accp := Load(Param("grid"), GP64()), Load(Param("acc"), GP64())
	acc := YMM()
	VMOVUPS(Mem{Base: accp}, acc)
	Label("iq3s_loop")
	TESTQ(nb, nb)
	JZ(LabelRef("iq3s_done"))
	prefetchW(wp, wBytes)
	sumi := YMM()
	VPXOR(sumi, sumi, sumi)
	for g := 0; g < 8; g++ {
		// the eight codebook entries of the group: grid[qs[8g+r] | (bit r of qh[g])<<8],
		// loaded one by one (VPGATHERDD is several times slower on this class of CPU)
		hb := GP32()
		MOVBLZX(Mem{Base: wp, Disp: 66 + g}, hb)
		lo, hi := XMM(), XMM()
		for r := 0; r < 8; r++ {
			ix, t := GP32(), GP32()
			MOVBLZX(Mem{Base: wp, Disp: 2 + 8*g + r}, ix)
			MOVL(hb, t)
			if r > 0 {
				SHRL(Imm(uint64(r)), t)
			}
			ANDL(Imm(1), t)
			SHLL(Imm(8), t)
			ORL(t, ix)
			e := GP32()
			MOVL(Mem{Base: gp, Index: ix.As64(), Scale: 4}, e)
			dst := lo
			if r >= 4 {
				dst = hi
			}
			if r%4 == 0 {
				VMOVD(e, dst) // defines dst (a read-before-write would keep it live)
			} else {
				VPINSRD(Imm(uint64(r%4)), e, dst, dst)
			}
		}
		mags := YMM()
		VINSERTI128(Imm(1), hi, lo.AsY(), mags)
		// the signs applied to the activations: 0xff where bit j%8 of signs[4g+j/8]
		s, xs := YMM(), YMM()
		VPBROADCASTD(Mem{Base: wp, Disp: 74 + 4*g}, s)
		VPSHUFB(bitsShuf, s, s)
		VPOR(bitsMask, s, s)
		VPCMPEQB(allOnes, s, s)
		VPXOR(Mem{Base: xp, Disp: 4 + 32*g}, s, xs)
		VPSUBB(s, xs, xs)
		p := YMM()
		VPMADDUBSW(xs, mags, p)
		// times the odd scale 1+2·(nibble g%2 of scales[g/2])
		ls := GP32()
		MOVBLZX(Mem{Base: wp, Disp: 106 + g/2}, ls)
		if g%2 == 1 {
			SHRL(Imm(4), ls)
		}
		ANDL(Imm(0xf), ls)
		LEAL(Mem{Base: ls, Index: ls, Scale: 1, Disp: 1}, ls)
		sc, scx := YMM(), XMM()
		VMOVD(ls, scx)
		VPBROADCASTW(scx, sc)
		VPMADDWD(sc, p, p)
		VPADDD(p, sumi, sumi)
	}
	xd := XMM()
	VMOVSS(Mem{Base: xp}, xd)
	d := f16Scalar(Mem{Base: wp}, xd)
	yd, f := YMM(), YMM()
	VBROADCASTSS(d, yd)
	VCVTDQ2PS(sumi, f)
	VFMADD231PS(f, yd, acc)
	ADDQ(U32(wBytes), wp)
	ADDQ(U32(292), xp)
	DECQ(nb)
	JMP(LabelRef("iq3s_loop"))
	Label("iq3s_done")
	VMOVUPS(acc, Mem{Base: accp})
	VZEROUPPER()
	RET()
}
