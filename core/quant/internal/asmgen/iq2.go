package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The AVX2 dots of the codebook formats IQ3_XXS, IQ2_XXS, IQ2_XS and IQ2_S (core/quant's
// iq2.go): per 32-value group the magnitudes from the codebook (entries loaded one by
// one), the signs applied to the activations, the lanes times the odd scale 2s+1 of each
// half group; one fma per super-block with f16(w.d)·x.d; the caller scales the total
// by 1/8 (IQ2) or 1/4 (IQ3_XXS).

// evenSigns8 leaves in a new GP32 the 8 sign bits of the 7-bit field (v >> shift) & 127:
// the field with its parity as bit 7 (ggml's ksigns_iq2xs).
func evenSigns8(v reg.GPVirtual, shift int) reg.GPVirtual {
	t, p := GP32(), GP32()
	MOVL(v, t)
	if shift > 0 {
		SHRL(Imm(uint64(shift)), t)
	}
	ANDL(Imm(127), t)
	POPCNTL(t, p)
	ANDL(Imm(1), p)
	SHLL(Imm(7), p)
	ORL(p, t)
	return t
}

// signWord packs four sign bytes (GP32 values 0..255) into one GP32, byte k = s[k].
func signWord(s [4]reg.GPVirtual) reg.GPVirtual {
	w := GP32()
	MOVL(s[0], w)
	for k := 1; k < 4; k++ {
		SHLL(Imm(uint64(8*k)), s[k])
		ORL(s[k], w)
	}
	return w
}

// cbAccumulate adds to sumi the lanes of one group: mags (32 unsigned bytes), the sign
// bytes in signs (bit j of byte k: value 8k+j negative), the activations at x, and the
// int16 scales sLo (values 0-15) and sHi (16-31).
func cbAccumulate(sumi, mags reg.VecVirtual, signs reg.GPVirtual, x Mem, sLo, sHi reg.GPVirtual) {
	s, sx := YMM(), XMM()
	VMOVD(signs, sx)
	VPBROADCASTD(sx, s)
	VPSHUFB(bitsShuf, s, s)
	VPOR(bitsMask, s, s)
	VPCMPEQB(allOnes, s, s)
	xs := YMM()
	VPXOR(x, s, xs)
	VPSUBB(s, xs, xs)
	p := YMM()
	VPMADDUBSW(xs, mags, p)
	lo, hi, sc := XMM(), XMM(), YMM()
	VMOVD(sLo, lo)
	VPBROADCASTW(lo, lo)
	VMOVD(sHi, hi)
	VPBROADCASTW(hi, hi)
	VINSERTI128(Imm(1), hi, lo.AsY(), sc)
	VPMADDWD(sc, p, p)
	VPADDD(p, sumi, sumi)
}

// entries32 loads eight 4-byte codebook entries grid[idx(r)] into one YMM (entry r in
// dword r).
func entries32(grid reg.Register, idx func(r int) reg.GPVirtual) reg.VecVirtual {
	lo, hi := XMM(), XMM()
	for r := 0; r < 8; r++ {
		e := GP32()
		MOVL(Mem{Base: grid, Index: idx(r).As64(), Scale: 4}, e)
		dst := lo
		if r >= 4 {
			dst = hi
		}
		if r%4 == 0 {
			VMOVD(e, dst)
		} else {
			VPINSRD(Imm(uint64(r%4)), e, dst, dst)
		}
	}
	m := YMM()
	VINSERTI128(Imm(1), hi, lo.AsY(), m)
	return m
}

// entries64 loads four 8-byte codebook entries grid[idx(r)] into one YMM.
func entries64(grid reg.Register, idx func(r int) reg.GPVirtual) reg.VecVirtual {
	lo, hi := XMM(), XMM()
	for r := 0; r < 4; r++ {
		e := GP64()
		MOVQ(Mem{Base: grid, Index: idx(r).As64(), Scale: 8}, e)
		dst := lo
		if r >= 2 {
			dst = hi
		}
		if r%2 == 0 {
			VMOVQ(e, dst)
		} else {
			VPINSRQ(Imm(1), e, dst, dst)
		}
	}
	m := YMM()
	VINSERTI128(Imm(1), hi, lo.AsY(), m)
	return m
}

// byteAt zero-extends the byte at m into a new GP32.
func byteAt(m Mem) reg.GPVirtual {
	r := GP32()
	MOVBLZX(m, r)
	return r
}

// oddScale leaves 2·((v >> shift) & mask) + 1 in a new GP32.
func oddScale(v reg.GPVirtual, shift int, mask uint64) reg.GPVirtual {
	t := GP32()
	MOVL(v, t)
	if shift > 0 {
		SHRL(Imm(uint64(shift)), t)
	}
	ANDL(Imm(mask), t)
	LEAL(Mem{Base: t, Index: t, Scale: 1, Disp: 1}, t)
	return t
}

// cbDot emits the super-block loop of one codebook format; group emits group g's
// accumulation into sumi from the block at wp, the activations at xp and the codebook
// at gp.
func cbDot(name string, wBytes int, group func(sumi reg.VecVirtual, wp, xp, gp reg.Register, g int)) {
	TEXT(name, NOSPLIT, "func(w, x *byte, nb int, grid *byte, acc *[8]float32)")
	Pragma("noescape")
	Doc(name + " runs ggml's codebook·Q8_K loop over nb super-blocks into acc; the caller scales the sum (AVX2, FMA, F16C, POPCNT).")
	wp, xp, nb := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("nb"), GP64())
	gp, accp := Load(Param("grid"), GP64()), Load(Param("acc"), GP64())
	acc := YMM()
	VMOVUPS(Mem{Base: accp}, acc)
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	prefetchW(wp, wBytes)
	sumi := YMM()
	VPXOR(sumi, sumi, sumi)
	for g := 0; g < 8; g++ {
		group(sumi, wp, xp, gp, g)
	}
	xd := XMM()
	VMOVSS(Mem{Base: xp}, xd)
	d := f16Scalar(Mem{Base: wp}, xd)
	yd, f := YMM(), YMM()
	VBROADCASTSS(d, yd)
	VCVTDQ2PS(sumi, f)
	VFMADD231PS(f, yd, acc)
	ADDQ(U32(uint64(wBytes)), wp)
	ADDQ(U32(292), xp)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	VMOVUPS(acc, Mem{Base: accp})
	VZEROUPPER()
	RET()
}

func cbDots() {
	// IQ3_XXS: qs[64] at 2 (an iq3XXSGrid index per 4 values), the u32 of group g at 66+4g.
	cbDot("dotIQ3_XXSAVX2", 98, func(sumi reg.VecVirtual, wp, xp, gp reg.Register, g int) {
		mags := entries32(gp, func(r int) reg.GPVirtual { return byteAt(Mem{Base: wp, Disp: 2 + 8*g + r}) })
		aux := GP32()
		MOVL(Mem{Base: wp, Disp: 66 + 4*g}, aux)
		var s [4]reg.GPVirtual
		for l := range s {
			s[l] = evenSigns8(aux, 7*l)
		}
		sc := oddScale(aux, 28, 0xf)
		cbAccumulate(sumi, mags, signWord(s), Mem{Base: xp, Disp: 4 + 32*g}, sc, sc)
	})
	// IQ2_XXS: 8 bytes per group at 2+8g: four iq2XXSGrid indices, then the u32 of signs and scale.
	cbDot("dotIQ2_XXSAVX2", 66, func(sumi reg.VecVirtual, wp, xp, gp reg.Register, g int) {
		mags := entries64(gp, func(r int) reg.GPVirtual { return byteAt(Mem{Base: wp, Disp: 2 + 8*g + r}) })
		aux := GP32()
		MOVL(Mem{Base: wp, Disp: 2 + 8*g + 4}, aux)
		var s [4]reg.GPVirtual
		for l := range s {
			s[l] = evenSigns8(aux, 7*l)
		}
		sc := oddScale(aux, 28, 0xf)
		cbAccumulate(sumi, mags, signWord(s), Mem{Base: xp, Disp: 4 + 32*g}, sc, sc)
	})
	// IQ2_XS: a u16 per 8 values at 2+2(4g+r): iq2XSGrid index (9 bits), 7 sign bits;
	// scales[g] at 66, low nibble for values 0-15, high for 16-31.
	cbDot("dotIQ2_XSAVX2", 74, func(sumi reg.VecVirtual, wp, xp, gp reg.Register, g int) {
		var q [4]reg.GPVirtual
		for r := range q {
			q[r] = GP32()
			MOVWLZX(Mem{Base: wp, Disp: 2 + 2*(4*g+r)}, q[r])
		}
		mags := entries64(gp, func(r int) reg.GPVirtual {
			ix := GP32()
			MOVL(q[r], ix)
			ANDL(U32(511), ix)
			return ix
		})
		var s [4]reg.GPVirtual
		for r := range s {
			s[r] = evenSigns8(q[r], 9)
		}
		scb := byteAt(Mem{Base: wp, Disp: 66 + g})
		cbAccumulate(sumi, mags, signWord(s), Mem{Base: xp, Disp: 4 + 32*g}, oddScale(scb, 0, 0xf), oddScale(scb, 4, 0xf))
	})
	// IQ2_S: qs[32] at 2 (low index bytes), signs[32] at 34, qh[8] at 66 (2 index bits per
	// run), scales[8] at 74.
	cbDot("dotIQ2_SAVX2", 82, func(sumi reg.VecVirtual, wp, xp, gp reg.Register, g int) {
		qh := byteAt(Mem{Base: wp, Disp: 66 + g})
		mags := entries64(gp, func(r int) reg.GPVirtual {
			ix, t := byteAt(Mem{Base: wp, Disp: 2 + 4*g + r}), GP32()
			MOVL(qh, t)
			if r > 0 {
				SHRL(Imm(uint64(2*r)), t)
			}
			ANDL(Imm(3), t)
			SHLL(Imm(8), t)
			ORL(t, ix)
			return ix
		})
		signs := GP32()
		MOVL(Mem{Base: wp, Disp: 34 + 4*g}, signs)
		scb := byteAt(Mem{Base: wp, Disp: 74 + g})
		cbAccumulate(sumi, mags, signs, Mem{Base: xp, Disp: 4 + 32*g}, oddScale(scb, 0, 0xf), oddScale(scb, 4, 0xf))
	})
}
