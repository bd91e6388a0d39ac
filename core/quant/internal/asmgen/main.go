// Command asmgen writes core/quant's AVX2 dot kernels (dot_amd64.s) and their Go
// declarations (dot_amd64_stubs.go) with avo. Run it through `go generate` in
// core/quant; scripts/check-generated.sh checks the committed output is current.
//
// Every kernel computes exactly the integers of the pure-Go definitions in core/quant
// (dot.go, dot_k.go) and, where it does float work, adds the float32 block partials in
// the same order: block b to lane b%8, one VMULPS and one VADDPS per block (no FMA), so
// the SIMD and pure-Go paths return the same bits.
package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

const q8_0Bytes = 34

var (
	ones16, mask0F, mask03, mask0C, mask30, maskC0, bitsShuf, bitsMask, allOnes, sixteen Mem
	eights, sixteens, thirtyTwos                                                         Mem
	q6Shuf                                                                               [4]Mem
)

func main() {
	ConstraintExpr("amd64")
	constants()
	blockDot("dotQ8_0AVX2", 34, bodyQ8_0, Mem{})
	blockDot("dotQ4_0AVX2", 18, bodyQ4_0, eights)
	blockDot("dotQ5_0AVX2", 22, bodyQ5_0, sixteens)
	dotF16()
	q4KInts()
	q6KInts()
	tileKernels()
	kTiles()
	fromFloatConstants()
	fromFloatQ8_0()
	fromFloatQ8_K()
	Generate()
}

func bytes32(name string, f func(i int) byte) Mem {
	m := GLOBL(name, RODATA|NOPTR)
	for i := 0; i < 32; i++ {
		DATA(i, U8(f(i)))
	}
	return m
}

func splat(name string, b byte) Mem { return bytes32(name, func(int) byte { return b }) }

func constants() {
	ones16 = bytes32("ones16", func(i int) byte { return byte(1 - i%2) })
	mask0F = splat("mask0F", 0x0f)
	mask03 = splat("mask03", 0x03)
	mask0C = splat("mask0C", 0x0c)
	mask30 = splat("mask30", 0x30)
	maskC0 = splat("maskC0", 0xc0)
	sixteen = splat("sixteen", 0x10)
	eights = splat("eights", 8)
	sixteens = splat("sixteens", 16)
	thirtyTwos = splat("thirtyTwos", 32)
	allOnes = splat("allOnes", 0xff)
	signBits = splat("signBits", 0x80)
	onesU8 = splat("onesU8", 1)
	mask3F = splat("mask3F", 0x3f)
	shift04 = bytes32("shift04", func(i int) byte { return map[int]byte{4: 4}[i] })
	// Q6_K: the 16 scale bytes reordered as the 8 even-group scales, then the 8 odd.
	evenOdd = bytes32("evenOdd", func(i int) byte {
		if i >= 16 {
			return 0
		}
		return byte(2*(i%8) + i/8)
	})
	// Byte i of a broadcast 32-bit qh gets qh's byte i/8; OR-ing 0xff minus bit i%8 and
	// comparing with 0xff leaves 0xff exactly where bit i of qh is set.
	bitsShuf = bytes32("bitsShuf", func(i int) byte { return byte(i / 8) })
	bitsMask = bytes32("bitsMask", func(i int) byte { return ^byte(1 << (i % 8)) })
	// Q6_K scales: with the eight int16 scales of one 128-value half in both lanes,
	// the low lane of mask k broadcasts scale 2k and the high lane scale 2k+1.
	for k := 0; k < 4; k++ {
		k := k
		q6Shuf[k] = bytes32("q6Shuf"+string(rune('0'+k)), func(i int) byte {
			w := 2 * k
			if i >= 16 {
				w++
			}
			return byte(2*w + i%2)
		})
	}
}

// A blockBody emits the integer dot of one 32-value weight block at w with the Q8_0
// block at x as eight int32 lane partials. corr holds the per-format bias constant
// register (8 or 16 in every byte), if any.
type blockBody func(w, x Mem, corr reg.VecVirtual) reg.VecVirtual

func bodyQ8_0(w, x Mem, _ reg.VecVirtual) reg.VecVirtual {
	yw, yx, ya, p := YMM(), YMM(), YMM(), YMM()
	VMOVDQU(w.Offset(2), yw)
	VMOVDQU(x.Offset(2), yx)
	VPSIGNB(yw, yw, ya) // |w|
	VPSIGNB(yw, yx, yx) // x·sign(w)
	VPMADDUBSW(yx, ya, p)
	VPMADDWD(ones16, p, p)
	return p
}

// nibbles loads 16 bytes of packed nibbles as 32 bytes: low nibbles then high nibbles.
func nibbles(m Mem) reg.VecVirtual {
	q, h := YMM(), YMM()
	VBROADCASTI128(m, q)
	VPSRLW(Imm(4), q, h)
	VPBLENDD(Imm(0xf0), h, q, q)
	VPAND(mask0F, q, q)
	return q
}

// biasedDot is Σ (q − bias)·x as int32 lanes, q unsigned bytes, bias in every byte of corr.
func biasedDot(q reg.VecVirtual, x Mem, corr reg.VecVirtual) reg.VecVirtual {
	yx, p, c := YMM(), YMM(), YMM()
	VMOVDQU(x, yx)
	VPMADDUBSW(yx, q, p)
	VPMADDUBSW(yx, corr, c)
	VPSUBW(c, p, p)
	VPMADDWD(ones16, p, p)
	return p
}

func bodyQ4_0(w, x Mem, corr reg.VecVirtual) reg.VecVirtual {
	return biasedDot(nibbles(w.Offset(2)), x.Offset(2), corr)
}

func bodyQ5_0(w, x Mem, corr reg.VecVirtual) reg.VecVirtual {
	q := nibbles(w.Offset(6))
	b := YMM()
	VPBROADCASTD(w.Offset(2), b)
	VPSHUFB(bitsShuf, b, b)
	VPOR(bitsMask, b, b)
	VPCMPEQB(allOnes, b, b)
	VPAND(sixteen, b, b)
	VPOR(b, q, q)
	return biasedDot(q, x.Offset(2), corr)
}

// reduce8 turns eight vectors of eight int32 lane partials into one vector whose lane k
// is the full sum of vector k. It asks for vector k only when it needs it, so that at
// most three partials are live (VEX instructions reach only Y0-Y15).
func reduce8(get func(k int) reg.VecVirtual) reg.VecVirtual {
	pair := func(a, b reg.VecVirtual) reg.VecVirtual {
		t := YMM()
		VPHADDD(b, a, t)
		return t
	}
	quad := func(k int) reg.VecVirtual {
		a := pair(get(k), get(k+1))
		b := pair(get(k+2), get(k+3))
		return pair(a, b)
	}
	u0 := quad(0)
	u1 := quad(4)
	lo, hi := YMM(), YMM()
	VPERM2I128(Imm(0x20), u1, u0, lo)
	VPERM2I128(Imm(0x31), u1, u0, hi)
	VPADDD(hi, lo, lo)
	return lo
}

// blockScales stores the eight float32 products f16(w.d)·f16(x.d) of the blocks whose
// scales were gathered into dw and dx (binary16 lanes) at m.
func blockScales(dw, dx reg.VecVirtual, m Mem) {
	fw, fx := YMM(), YMM()
	VCVTPH2PS(dw, fw)
	VCVTPH2PS(dx, fx)
	VMULPS(fx, fw, fw)
	VMOVUPS(fw, m)
}

// fmaBlock does acc = fma(scale, float32(lanes), acc): ggml's per-block step.
func fmaBlock(acc, lanes reg.VecVirtual, scale Mem) {
	f, d := YMM(), YMM()
	VCVTDQ2PS(lanes, f)
	VBROADCASTSS(scale, d)
	VFMADD231PS(f, d, acc)
}

// blockDot emits func(w, x *byte, nb int, acc *[8]float32) in ggml's order: for each
// block in turn, acc = fma(f16(w.d)·f16(x.d), float32(lane sums), acc), where lane k sums
// the products of bytes 4k..4k+3.
func blockDot(name string, wBytes int, body blockBody, corrConst Mem) {
	TEXT(name, NOSPLIT, "func(w, x *byte, nb int, acc *[8]float32)")
	Pragma("noescape")
	Doc(name + " runs ggml's block loop over nb blocks into acc (AVX2, FMA, F16C).")
	wp, xp, nb, accp := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("nb"), GP64()), Load(Param("acc"), GP64())
	acc := YMM()
	VMOVUPS(Mem{Base: accp}, acc)
	var corr reg.VecVirtual
	if corrConst != (Mem{}) {
		corr = YMM()
		VMOVDQU(corrConst, corr)
	}
	scales := AllocLocal(32)

	Label(name + "_group")
	CMPQ(nb, Imm(8))
	JL(LabelRef(name + "_tail"))
	dw, dx := XMM(), XMM()
	for k := 0; k < 8; k++ {
		VPINSRW(Imm(uint64(k)), Mem{Base: wp, Disp: k * wBytes}, dw, dw)
		VPINSRW(Imm(uint64(k)), Mem{Base: xp, Disp: k * q8_0Bytes}, dx, dx)
	}
	blockScales(dw, dx, scales)
	for k := 0; k < 8; k++ {
		p := body(Mem{Base: wp, Disp: k * wBytes}, Mem{Base: xp, Disp: k * q8_0Bytes}, corr)
		fmaBlock(acc, p, scales.Offset(4*k))
	}
	ADDQ(U32(8*wBytes), wp)
	ADDQ(U32(8*q8_0Bytes), xp)
	SUBQ(Imm(8), nb)
	JMP(LabelRef(name + "_group"))

	// Fewer than 8 blocks left: gather their scales, then one block at a time.
	Label(name + "_tail")
	TESTQ(nb, nb)
	JZ(LabelRef(name + "_done"))
	tw, tx := XMM(), XMM()
	VPXOR(tw, tw, tw)
	VPXOR(tx, tx, tx)
	for k := 0; k < 7; k++ {
		CMPQ(nb, Imm(uint64(k+1)))
		JL(LabelRef(name + "_tailscales"))
		VPINSRW(Imm(uint64(k)), Mem{Base: wp, Disp: k * wBytes}, tw, tw)
		VPINSRW(Imm(uint64(k)), Mem{Base: xp, Disp: k * q8_0Bytes}, tx, tx)
	}
	Label(name + "_tailscales")
	blockScales(tw, tx, scales)
	i := GP64()
	XORQ(i, i)
	Label(name + "_tailblock")
	{
		p := body(Mem{Base: wp}, Mem{Base: xp}, corr)
		s := scales
		s.Index, s.Scale = i, 4
		fmaBlock(acc, p, s)
	}
	ADDQ(U32(wBytes), wp)
	ADDQ(Imm(q8_0Bytes), xp)
	INCQ(i)
	CMPQ(i, nb)
	JL(LabelRef(name + "_tailblock"))

	Label(name + "_done")
	VMOVUPS(acc, Mem{Base: accp})
	VZEROUPPER()
	RET()
}

// dotF16 emits func(w, x *byte, n int, acc *[32]float32): for the first n values
// (n a multiple of 32) it adds w_i·x_i, rounded to float32, to acc[i%32].
func dotF16() {
	TEXT("dotF16AVX2", NOSPLIT, "func(w, x *byte, n int, acc *[32]float32)")
	Pragma("noescape")
	Doc("dotF16AVX2 adds float32(w_i·x_i) to acc[i%32] for the first n binary16 values; n%32 == 0 (AVX, F16C).")
	wp, xp, n, accp := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("n"), GP64()), Load(Param("acc"), GP64())
	var acc [4]reg.VecVirtual
	for j := range acc {
		acc[j] = YMM()
		VMOVUPS(Mem{Base: accp, Disp: 32 * j}, acc[j])
	}
	Label("f16_loop")
	CMPQ(n, Imm(32))
	JL(LabelRef("f16_done"))
	for j := 0; j < 4; j++ {
		a, b := YMM(), YMM()
		VCVTPH2PS(Mem{Base: wp, Disp: 16 * j}, a)
		VCVTPH2PS(Mem{Base: xp, Disp: 16 * j}, b)
		VMULPS(b, a, a)
		VADDPS(a, acc[j], acc[j])
	}
	ADDQ(Imm(64), wp)
	ADDQ(Imm(64), xp)
	SUBQ(Imm(32), n)
	JMP(LabelRef("f16_loop"))
	Label("f16_done")
	for j := range acc {
		VMOVUPS(acc[j], Mem{Base: accp, Disp: 32 * j})
	}
	VZEROUPPER()
	RET()
}

// hsum2 stores the full lane sums of a and b as two int32 at out[0], out[1].
func hsum2(a, b reg.VecVirtual, out Mem) {
	t, h := YMM(), XMM()
	VPHADDD(b, a, t)
	VPHADDD(t, t, t)
	VEXTRACTI128(Imm(1), t, h)
	VPADDD(h, t.AsX(), h)
	VMOVQ(h, out)
}

// q4KInts emits func(w, x *byte, nb int, out *int32): for each of nb Q4_K·Q8_K
// super-blocks it writes isum = Σ_g scale_g·Σ q·x and summs = Σ_g min_g·bsum_g.
func q4KInts() {
	TEXT("q4KIntsAVX2", NOSPLIT, "func(w, x *byte, nb int, out *int32)")
	Pragma("noescape")
	Doc("q4KIntsAVX2 writes (isum, summs) of each of nb Q4_K·Q8_K super-blocks to out[2b], out[2b+1] (AVX2).")
	wp, xp, nb, op := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("nb"), GP64()), Load(Param("out"), GP64())
	Label("q4k_loop")
	TESTQ(nb, nb)
	JZ(LabelRef("q4k_done"))
	var hi reg.VecVirtual
	sums := reduce8(func(k int) reg.VecVirtual {
		j, h := k/2, k%2
		v := hi
		if h == 0 {
			v, hi = YMM(), YMM()
			VMOVDQU(Mem{Base: wp, Disp: 16 + 32*j}, v)
			VPSRLW(Imm(4), v, hi)
			VPAND(mask0F, v, v)
			VPAND(mask0F, hi, hi)
		}
		t := YMM()
		VPMADDUBSW(Mem{Base: xp, Disp: 4 + 64*j + 32*h}, v, t)
		VPMADDWD(ones16, t, t)
		return t
	})
	// Unpack the 6-bit scales and mins (ggml's kmask trick) into two 64-bit words.
	u0, u1, u2, sc, mn, t := GP64(), GP64(), GP64(), GP64(), GP64(), GP64()
	MOVLQZX(Mem{Base: wp, Disp: 4}, u0)
	MOVLQZX(Mem{Base: wp, Disp: 8}, u1)
	MOVLQZX(Mem{Base: wp, Disp: 12}, u2)
	// scales 4..7: (u2 & 0x0f0f0f0f) | ((u0>>6) & 0x03030303) << 4
	MOVQ(u2, sc)
	ANDQ(U32(0x0f0f0f0f), sc)
	MOVQ(u0, t)
	SHRQ(Imm(6), t)
	ANDQ(U32(0x03030303), t)
	SHLQ(Imm(4), t)
	ORQ(t, sc)
	SHLQ(Imm(32), sc)
	ANDQ(U32(0x3f3f3f3f), u0)
	ORQ(u0, sc)
	// mins 4..7: ((u2>>4) & 0x0f0f0f0f) | ((u1>>6) & 0x03030303) << 4
	MOVQ(u2, mn)
	SHRQ(Imm(4), mn)
	ANDQ(U32(0x0f0f0f0f), mn)
	MOVQ(u1, t)
	SHRQ(Imm(6), t)
	ANDQ(U32(0x03030303), t)
	SHLQ(Imm(4), t)
	ORQ(t, mn)
	SHLQ(Imm(32), mn)
	ANDQ(U32(0x3f3f3f3f), u1)
	ORQ(u1, mn)

	xs, ys, xm, ym := XMM(), YMM(), XMM(), YMM()
	VMOVQ(sc, xs)
	VPMOVZXBD(xs, ys)
	VPMULLD(ys, sums, sums)
	VMOVQ(mn, xm)
	VPMOVZXBD(xm, ym)
	bs := YMM()
	VPMADDWD(Mem{Base: xp, Disp: 4 + 256}, ones16AsReg(), bs)
	VPMULLD(ym, bs, bs)
	hsum2(sums, bs, Mem{Base: op})

	ADDQ(U32(144), wp)
	ADDQ(U32(292), xp)
	ADDQ(Imm(8), op)
	DECQ(nb)
	JMP(LabelRef("q4k_loop"))
	Label("q4k_done")
	VZEROUPPER()
	RET()
}

func ones16AsReg() reg.VecVirtual {
	r := YMM()
	VMOVDQU(ones16, r)
	return r
}

// q6KInts emits func(w, x *byte, nb int, out *int32): out[b] = Σ_g scale_g·Σ (q−32)·x
// for each of nb Q6_K·Q8_K super-blocks.
func q6KInts() {
	TEXT("q6KIntsAVX2", NOSPLIT, "func(w, x *byte, nb int, out *int32)")
	Pragma("noescape")
	Doc("q6KIntsAVX2 writes isum of each of nb Q6_K·Q8_K super-blocks to out[b] (AVX2).")
	wp, xp, nb, op := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("nb"), GP64()), Load(Param("out"), GP64())
	c32 := YMM()
	VMOVDQU(thirtyTwos, c32)
	Label("q6k_loop")
	TESTQ(nb, nb)
	JZ(LabelRef("q6k_done"))
	acc := YMM()
	VPXOR(acc, acc, acc)
	sc16 := YMM()
	VPMOVSXBW(Mem{Base: wp, Disp: 192}, sc16)
	for n := 0; n < 2; n++ {
		scn := YMM()
		VPERMQ(Imm([]uint64{0x44, 0xee}[n]), sc16, scn)
		qh, ql0, ql1 := YMM(), YMM(), YMM()
		VMOVDQU(Mem{Base: wp, Disp: 128 + 32*n}, qh)
		VMOVDQU(Mem{Base: wp, Disp: 64 * n}, ql0)
		VMOVDQU(Mem{Base: wp, Disp: 64*n + 32}, ql1)
		for k := 0; k < 4; k++ {
			q, h := YMM(), YMM()
			switch k {
			case 0: // ql0&15 | (qh&3)<<4
				VPAND(mask0F, ql0, q)
				VPAND(mask03, qh, h)
				VPSLLW(Imm(4), h, h)
			case 1: // ql1&15 | (qh&12)<<2
				VPAND(mask0F, ql1, q)
				VPAND(mask0C, qh, h)
				VPSLLW(Imm(2), h, h)
			case 2: // ql0>>4 | qh&48
				VPSRLW(Imm(4), ql0, q)
				VPAND(mask0F, q, q)
				VPAND(mask30, qh, h)
			case 3: // ql1>>4 | (qh&192)>>2
				VPSRLW(Imm(4), ql1, q)
				VPAND(mask0F, q, q)
				VPAND(maskC0, qh, h)
				VPSRLW(Imm(2), h, h)
			}
			VPOR(h, q, q)
			x := Mem{Base: xp, Disp: 4 + 128*n + 32*k}
			yx, p, c, s := YMM(), YMM(), YMM(), YMM()
			VMOVDQU(x, yx)
			VPMADDUBSW(yx, q, p)
			VPMADDUBSW(yx, c32, c)
			VPSUBW(c, p, p)
			VPSHUFB(q6Shuf[k], scn, s)
			VPMADDWD(s, p, p)
			VPADDD(p, acc, acc)
		}
	}
	hx, t := XMM(), XMM()
	VEXTRACTI128(Imm(1), acc, hx)
	VPADDD(hx, acc.AsX(), hx)
	VPSHUFD(Imm(0x4e), hx, t)
	VPADDD(t, hx, hx)
	VPSHUFD(Imm(0xb1), hx, t)
	VPADDD(t, hx, hx)
	VMOVD(hx, Mem{Base: op})

	ADDQ(U32(210), wp)
	ADDQ(U32(292), xp)
	ADDQ(Imm(4), op)
	DECQ(nb)
	JMP(LabelRef("q6k_loop"))
	Label("q6k_done")
	VZEROUPPER()
	RET()
}
