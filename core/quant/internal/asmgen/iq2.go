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
	ones8 = splat("ones8", 1)
	iq1SDot()
	iq1MDot()
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

var ones8 Mem

// pack64 loads four 64-bit GP values into one YMM (value r in qword r).
func pack64(v func(r int) reg.GPVirtual) reg.VecVirtual {
	lo, hi := XMM(), XMM()
	for r := 0; r < 4; r++ {
		e := v(r)
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

// levelLanes is Σ level·x as int16 pairs for signed levels (ggml's mul_add_epi8).
func levelLanes(lv reg.VecVirtual, x Mem) reg.VecVirtual {
	a, xs, p := YMM(), YMM(), YMM()
	VPSIGNB(lv, lv, a)
	VMOVDQU(x, xs)
	VPSIGNB(lv, xs, xs)
	VPMADDUBSW(xs, a, p)
	return p
}

// scales2 broadcasts the int16 scale lo to lanes 0-7 and hi to lanes 8-15 of a new YMM.
func scales2(lo, hi reg.GPVirtual) reg.VecVirtual {
	l, h, sc := XMM(), XMM(), YMM()
	VMOVD(lo, l)
	VPBROADCASTW(l, l)
	VMOVD(hi, h)
	VPBROADCASTW(h, h)
	VINSERTI128(Imm(1), h, l.AsY(), sc)
	return sc
}

// iq1SDot emits func(w, x *byte, nb int, grid *byte, acc *[8]float32, acc1 *float32):
// ggml's AVX2 ggml_vec_dot_iq1_s_q8_K: the level lanes into acc, the delta term
// Σ ±(2s+1)·bsums as acc1 = fma(d, sumi, acc1) per super-block.
func iq1SDot() {
	const wBytes = 50
	name := "dotIQ1_SAVX2"
	TEXT(name, NOSPLIT, "func(w, x *byte, nb int, grid *byte, acc *[8]float32, acc1 *float32)")
	Pragma("noescape")
	Doc(name + " runs ggml's IQ1_S·Q8_K loop over nb super-blocks into acc and acc1 (AVX2, FMA, F16C).")
	wp, xp, nb := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("nb"), GP64())
	gp, accp, acc1p := Load(Param("grid"), GP64()), Load(Param("acc"), GP64()), Load(Param("acc1"), GP64())
	acc, acc1 := YMM(), XMM()
	VMOVUPS(Mem{Base: accp}, acc)
	VMOVSS(Mem{Base: acc1p}, acc1)
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	sumi := YMM()
	VPXOR(sumi, sumi, sumi)
	sumi1 := GP32()
	XORL(sumi1, sumi1)
	for g := 0; g < 8; g++ {
		qh := GP32()
		MOVWLZX(Mem{Base: wp, Disp: 34 + 2*g}, qh)
		lv := entries64(gp, func(r int) reg.GPVirtual {
			ix, t := byteAt(Mem{Base: wp, Disp: 2 + 4*g + r}), GP32()
			MOVL(qh, t)
			if r > 0 {
				SHRL(Imm(uint64(3*r)), t)
			}
			ANDL(Imm(7), t)
			SHLL(Imm(8), t)
			ORL(t, ix)
			return ix
		})
		p := levelLanes(lv, Mem{Base: xp, Disp: 4 + 32*g})
		sc := oddScale(qh, 12, 7)
		VPMADDWD(scales2(sc, sc), p, p)
		VPADDD(p, sumi, sumi)
		// sumi1 += ±(bsum[2g] + bsum[2g+1])·scale, negative where bit 15 of qh is set
		b0, b1 := GP32(), GP32()
		MOVWLSX(Mem{Base: xp, Disp: 4 + 256 + 4*g}, b0)
		MOVWLSX(Mem{Base: xp, Disp: 4 + 256 + 4*g + 2}, b1)
		ADDL(b1, b0)
		IMULL(sc, b0)
		neg := GP32()
		MOVL(b0, neg)
		NEGL(neg)
		BTL(Imm(15), qh)
		CMOVLCS(neg, b0)
		ADDL(b0, sumi1)
	}
	xd := XMM()
	VMOVSS(Mem{Base: xp}, xd)
	d := f16Scalar(Mem{Base: wp}, xd)
	yd, f := YMM(), YMM()
	VBROADCASTSS(d, yd)
	VCVTDQ2PS(sumi, f)
	VFMADD231PS(f, yd, acc)
	s1 := XMM()
	VCVTSI2SSL(sumi1, s1, s1)
	VFMADD231SS(s1, d, acc1)
	ADDQ(U32(wBytes), wp)
	ADDQ(U32(292), xp)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	VMOVUPS(acc, Mem{Base: accp})
	VMOVSS(acc1, Mem{Base: acc1p})
	VZEROUPPER()
	RET()
}

// iq1MDot emits func(w, x *byte, nb int, grid *byte, acc1, acc2 *[8]float32): ggml's AVX2
// ggml_vec_dot_iq1_m_q8_K: the level lanes into acc1, the delta lanes (±x per run, times
// the same half-group scales) into acc2.
func iq1MDot() {
	const wBytes = 56
	name := "dotIQ1_MAVX2"
	TEXT(name, NOSPLIT, "func(w, x *byte, nb int, grid *byte, acc1, acc2 *[8]float32)")
	Pragma("noescape")
	Doc(name + " runs ggml's IQ1_M·Q8_K loop over nb super-blocks into acc1 and acc2 (AVX2, FMA, F16C).")
	wp, xp, nb := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("nb"), GP64())
	gp, a1p, a2p := Load(Param("grid"), GP64()), Load(Param("acc1"), GP64()), Load(Param("acc2"), GP64())
	acc1, acc2 := YMM(), YMM()
	VMOVUPS(Mem{Base: a1p}, acc1)
	VMOVUPS(Mem{Base: a2p}, acc2)
	Label(name + "_loop")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	sl, sd := YMM(), YMM()
	VPXOR(sl, sl, sl)
	VPXOR(sd, sd, sd)
	for g := 0; g < 8; g++ {
		var h [4]reg.GPVirtual
		for r := range h {
			h[r] = byteAt(Mem{Base: wp, Disp: 32 + 2*g + r/2})
			if r%2 == 1 {
				SHRL(Imm(4), h[r])
			}
		}
		lv := entries64(gp, func(r int) reg.GPVirtual {
			ix, t := byteAt(Mem{Base: wp, Disp: 4*g + r}), GP32()
			MOVL(h[r], t)
			ANDL(Imm(7), t)
			SHLL(Imm(8), t)
			ORL(t, ix)
			return ix
		})
		x := Mem{Base: xp, Disp: 4 + 32*g}
		scw := GP32()
		MOVWLZX(Mem{Base: wp, Disp: 48 + 2*(g/2)}, scw)
		sc := scales2(oddScale(scw, 6*(g%2), 7), oddScale(scw, 6*(g%2)+3, 7))
		p := levelLanes(lv, x)
		VPMADDWD(sc, p, p)
		VPADDD(p, sl, sl)
		// delta lanes: x·(±1) per run (bytes 0x01, or 0xff where bit 3 of the run's nibble)
		dv := pack64(func(r int) reg.GPVirtual {
			t := GP64()
			MOVL(h[r], t.As32()) // zero-extends
			SHRQ(Imm(3), t)
			ANDQ(Imm(1), t)
			NEGQ(t)
			m := GP64()
			MOVQ(U64(0xfefefefefefefefe), m)
			ANDQ(m, t)
			MOVQ(U64(0x0101010101010101), m)
			ORQ(m, t)
			return t
		})
		xs, q, one := YMM(), YMM(), YMM()
		VMOVDQU(x, xs)
		VPSIGNB(dv, xs, xs)
		VMOVDQU(ones8, one)
		VPMADDUBSW(xs, one, q)
		VPMADDWD(sc, q, q)
		VPADDD(q, sd, sd)
	}
	// d: the f16 assembled from the top nibbles of the four scale words, times x.d
	u, t := GP32(), GP32()
	XORL(u, u)
	for i := 0; i < 4; i++ {
		MOVWLZX(Mem{Base: wp, Disp: 48 + 2*i}, t)
		SHRL(Imm(12), t)
		if i > 0 {
			SHLL(Imm(uint64(4*i)), t)
		}
		ORL(t, u)
	}
	dh := XMM()
	VMOVD(u, dh)
	VCVTPH2PS(dh, dh)
	xd := XMM()
	VMOVSS(Mem{Base: xp}, xd)
	VMULSS(dh, xd, xd) // x.d·f16
	yd, f := YMM(), YMM()
	VBROADCASTSS(xd, yd)
	VCVTDQ2PS(sl, f)
	VFMADD231PS(f, yd, acc1)
	VCVTDQ2PS(sd, f)
	VFMADD231PS(f, yd, acc2)
	ADDQ(U32(wBytes), wp)
	ADDQ(U32(292), xp)
	DECQ(nb)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	VMOVUPS(acc1, Mem{Base: a1p})
	VMOVUPS(acc2, Mem{Base: a2p})
	VZEROUPPER()
	RET()
}
