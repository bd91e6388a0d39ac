package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

var mask01 Mem

func kConstants() {
	mask01 = splat("mask01", 0x01)
}

// hsumInt32x4 leaves the sum of the four int32 lanes of v in lane 0.
func hsumInt32x4(v reg.VecVirtual) {
	VPHADDD(v, v, v)
	VPHADDD(v, v, v)
}

// q5KDot emits func(w, x *byte, nb int, acc *[8]float32, summs *float32): ggml's AVX2
// ggml_vec_dot_q5_K_q8_K loop: the lanes into acc, dmin·Σ(min·bsums) into the scalar
// summs (fused, as core/quant's dotQ5_K); the caller reduces acc and adds summs.
func q5KDot() {
	const wBytes = 176
	TEXT("dotQ5_KAVX2", NOSPLIT, "func(w, x *byte, nb int, acc *[8]float32, summs *float32)")
	Pragma("noescape")
	Doc("dotQ5_KAVX2 runs ggml's Q5_K·Q8_K block loop over nb super-blocks into acc and summs (AVX2, FMA, F16C).")
	wp, xp, nb := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("nb"), GP64())
	accp, sump := Load(Param("acc"), GP64()), Load(Param("summs"), GP64())
	acc, summs := YMM(), XMM()
	VMOVUPS(Mem{Base: accp}, acc)
	VMOVSS(Mem{Base: sump}, summs)
	sm := AllocLocal(32)
	Label("q5k_loop")
	TESTQ(nb, nb)
	JZ(LabelRef("q5k_done"))
	prefetchW(wp, wBytes)
	smw := k4ScaleMins(wp, sm)
	// summs += dmin·float32(Σ mins·(bsum pairs))
	bs, q8s, mins := XMM(), XMM(), XMM()
	VMOVDQU(Mem{Base: xp, Disp: 4 + 256}, bs)
	VPHADDW(Mem{Base: xp, Disp: 4 + 256 + 16}, bs, q8s)
	VEXTRACTI128(Imm(1), smw, mins)
	VPMADDWD(q8s, mins, mins)
	hsumInt32x4(mins)
	VCVTDQ2PS(mins, mins)
	xd := XMM()
	VMOVSS(Mem{Base: xp}, xd)
	dmin := f16Scalar(Mem{Base: wp, Disp: 2}, xd)
	VXORPS(signBit, dmin, dmin)    // −y.d·FP16(x.dmin)
	VFMADD231SS(mins, dmin, summs) // contracted, as GCC compiles ggml (-std=gnu11)
	// sumi lanes: chunk c holds nibble c%2 of q[32(c/2)..] | bit c of qh << 4, scale sc[c]
	qh := YMM()
	VMOVDQU(Mem{Base: wp, Disp: 16}, qh)
	sumi := YMM()
	VPXOR(sumi, sumi, sumi)
	for j := 0; j < 4; j++ {
		lo, hi := YMM(), YMM()
		VMOVDQU(Mem{Base: wp, Disp: 48 + 32*j}, lo)
		VPSRLW(Imm(4), lo, hi)
		VPAND(mask0F, lo, lo)
		VPAND(mask0F, hi, hi)
		for half, v := range []reg.VecVirtual{lo, hi} {
			c := 2*j + half
			b := YMM()
			if c > 0 {
				VPSRLW(Imm(uint64(c)), qh, b)
				VPAND(mask01, b, b)
			} else {
				VPAND(mask01, qh, b)
			}
			VPSLLW(Imm(4), b, b)
			VPOR(b, v, v)
			p, sc := YMM(), YMM()
			VPMADDUBSW(Mem{Base: xp, Disp: 4 + 32*c}, v, p)
			VPBROADCASTW(sm.Offset(2*c), sc)
			VPMADDWD(sc, p, p)
			VPADDD(p, sumi, sumi)
		}
	}
	d := f16Scalar(Mem{Base: wp}, xd)
	yd, f := YMM(), YMM()
	VBROADCASTSS(d, yd)
	VCVTDQ2PS(sumi, f)
	VFMADD231PS(f, yd, acc)
	ADDQ(U32(wBytes), wp)
	ADDQ(U32(292), xp)
	DECQ(nb)
	JMP(LabelRef("q5k_loop"))
	Label("q5k_done")
	VMOVUPS(acc, Mem{Base: accp})
	VMOVSS(summs, Mem{Base: sump})
	VZEROUPPER()
	RET()
}

// halfScales leaves in a new YMM the int16 scale of 16-value group g in lanes 0-7 and of
// group g+1 in lanes 8-15, from int16 scales at sc.
func halfScales(sc Mem, g int) reg.VecVirtual {
	s, hi := YMM(), XMM()
	VPBROADCASTW(sc.Offset(2*g), s)
	VPBROADCASTW(sc.Offset(2*g+2), hi)
	VINSERTI128(Imm(1), hi, s, s)
	return s
}

// q2KDot emits func(w, x *byte, nb int, acc *[8]float32): ggml's AVX2
// ggml_vec_dot_q2_K_q8_K loop (the mins fma'd into the lanes before the levels); the
// caller reduces acc.
func q2KDot() {
	const wBytes = 84
	TEXT("dotQ2_KAVX2", NOSPLIT, "func(w, x *byte, nb int, acc *[8]float32)")
	Pragma("noescape")
	Doc("dotQ2_KAVX2 runs ggml's Q2_K·Q8_K block loop over nb super-blocks into acc (AVX2, FMA, F16C).")
	wp, xp, nb, accp := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("nb"), GP64()), Load(Param("acc"), GP64())
	acc := YMM()
	VMOVUPS(Mem{Base: accp}, acc)
	sc := AllocLocal(32) // the sixteen 4-bit scales as int16
	Label("q2k_loop")
	TESTQ(nb, nb)
	JZ(LabelRef("q2k_done"))
	prefetchW(wp, wBytes)
	s16, m16 := YMM(), YMM()
	VPMOVZXBW(Mem{Base: wp}, s16)
	VPSRLW(Imm(4), s16, m16)
	VPAND(mask0F, s16, s16)
	VMOVDQU(s16, sc)
	xd := XMM()
	VMOVSS(Mem{Base: xp}, xd)
	// acc = fma(dmin, float32(mins·bsums pairs), acc)
	VPMADDWD(Mem{Base: xp, Disp: 4 + 256}, m16, m16)
	dmin := f16Scalar(Mem{Base: wp, Disp: 82}, xd)
	VXORPS(signBit, dmin, dmin)
	ym, fm := YMM(), YMM()
	VBROADCASTSS(dmin, ym)
	VCVTDQ2PS(m16, fm)
	VFMADD231PS(fm, ym, acc)
	sumi := YMM()
	VPXOR(sumi, sumi, sumi)
	for j := 0; j < 2; j++ {
		q := YMM()
		VMOVDQU(Mem{Base: wp, Disp: 16 + 32*j}, q)
		for k := 0; k < 4; k++ {
			v := YMM()
			if k > 0 {
				VPSRLW(Imm(uint64(2*k)), q, v)
				VPAND(mask03, v, v)
			} else {
				VPAND(mask03, q, v)
			}
			p := YMM()
			VPMADDUBSW(Mem{Base: xp, Disp: 4 + 128*j + 32*k}, v, p)
			VPMADDWD(halfScales(sc, 8*j+2*k), p, p)
			VPADDD(p, sumi, sumi)
		}
	}
	d := f16Scalar(Mem{Base: wp, Disp: 80}, xd)
	yd, f := YMM(), YMM()
	VBROADCASTSS(d, yd)
	VCVTDQ2PS(sumi, f)
	VFMADD231PS(f, yd, acc)
	ADDQ(U32(wBytes), wp)
	ADDQ(U32(292), xp)
	DECQ(nb)
	JMP(LabelRef("q2k_loop"))
	Label("q2k_done")
	VMOVUPS(acc, Mem{Base: accp})
	VZEROUPPER()
	RET()
}

// q3KDot emits func(w, x *byte, nb int, scales *int16, acc *[8]float32): ggml's AVX2
// ggml_vec_dot_q3_K_q8_K loop with the sixteen signed scales (already minus 32) of each
// super-block given as int16 at scales[16·b:]; the caller reduces acc.
func q3KDot() {
	const wBytes = 110
	TEXT("dotQ3_KAVX2", NOSPLIT, "func(w, x *byte, nb int, scales *int16, acc *[8]float32)")
	Pragma("noescape")
	Doc("dotQ3_KAVX2 runs ggml's Q3_K·Q8_K block loop over nb super-blocks with unpacked scales into acc (AVX2, FMA, F16C).")
	wp, xp, nb := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("nb"), GP64())
	scp, accp := Load(Param("scales"), GP64()), Load(Param("acc"), GP64())
	acc := YMM()
	VMOVUPS(Mem{Base: accp}, acc)
	Label("q3k_loop")
	TESTQ(nb, nb)
	JZ(LabelRef("q3k_done"))
	prefetchW(wp, wBytes)
	hm := YMM()
	VMOVDQU(Mem{Base: wp}, hm)
	sumi := YMM()
	VPXOR(sumi, sumi, sumi)
	for j := 0; j < 2; j++ {
		q := YMM()
		VMOVDQU(Mem{Base: wp, Disp: 32 + 32*j}, q)
		for k := 0; k < 4; k++ {
			v, m := YMM(), YMM()
			if k > 0 {
				VPSRLW(Imm(uint64(2*k)), q, v)
				VPAND(mask03, v, v)
			} else {
				VPAND(mask03, q, v)
			}
			// m = 4 where bit 4j+k of hmask is clear
			if c := 4*j + k; c > 0 {
				VPSRLW(Imm(uint64(c)), hm, m)
				VPAND(mask01, m, m)
			} else {
				VPAND(mask01, hm, m)
			}
			VPXOR(mask01, m, m)
			VPSLLW(Imm(2), m, m)
			x := Mem{Base: xp, Disp: 4 + 128*j + 32*k}
			p, pm := YMM(), YMM()
			VPMADDUBSW(x, v, p)
			VPMADDUBSW(x, m, pm)
			VPSUBW(pm, p, p)
			VPMADDWD(halfScales(Mem{Base: scp}, 8*j+2*k), p, p)
			VPADDD(p, sumi, sumi)
		}
	}
	xd := XMM()
	VMOVSS(Mem{Base: xp}, xd)
	d := f16Scalar(Mem{Base: wp, Disp: 108}, xd)
	yd, f := YMM(), YMM()
	VBROADCASTSS(d, yd)
	VCVTDQ2PS(sumi, f)
	VFMADD231PS(f, yd, acc)
	ADDQ(U32(wBytes), wp)
	ADDQ(U32(292), xp)
	ADDQ(U32(32), scp)
	DECQ(nb)
	JMP(LabelRef("q3k_loop"))
	Label("q3k_done")
	VMOVUPS(acc, Mem{Base: accp})
	VZEROUPPER()
	RET()
}

// dotBF16 emits func(w, x *byte, n int, acc *[32]float32): for the first n values (n a
// multiple of 32) it adds w_i·x_i, rounded to float32, to acc[i%32] (bfloat16 widened by
// a 16-bit shift: exact).
func dotBF16() {
	TEXT("dotBF16AVX2", NOSPLIT, "func(w, x *byte, n int, acc *[32]float32)")
	Pragma("noescape")
	Doc("dotBF16AVX2 adds float32(w_i·x_i) to acc[i%32] for the first n bfloat16 values; n%32 == 0 (AVX2).")
	wp, xp, n, accp := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("n"), GP64()), Load(Param("acc"), GP64())
	var acc [4]reg.VecVirtual
	for j := range acc {
		acc[j] = YMM()
		VMOVUPS(Mem{Base: accp, Disp: 32 * j}, acc[j])
	}
	Label("bf16_loop")
	CMPQ(n, Imm(32))
	JL(LabelRef("bf16_done"))
	for j := 0; j < 4; j++ {
		a, b := YMM(), YMM()
		VPMOVZXWD(Mem{Base: wp, Disp: 16 * j}, a)
		VPSLLD(Imm(16), a, a)
		VPMOVZXWD(Mem{Base: xp, Disp: 16 * j}, b)
		VPSLLD(Imm(16), b, b)
		VMULPS(b, a, a)
		VADDPS(a, acc[j], acc[j])
	}
	ADDQ(Imm(64), wp)
	ADDQ(Imm(64), xp)
	SUBQ(Imm(32), n)
	JMP(LabelRef("bf16_loop"))
	Label("bf16_done")
	for j := range acc {
		VMOVUPS(acc[j], Mem{Base: accp, Disp: 32 * j})
	}
	VZEROUPPER()
	RET()
}
