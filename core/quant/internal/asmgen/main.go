// Command asmgen writes core/quant's AVX2 dot kernels (dot_amd64.s) and their Go
// declarations (dot_amd64_stubs.go) with avo. Run it through `go generate` in
// core/quant; scripts/check-generated.sh checks the committed output is current.
//
// Every dot kernel performs the operations of the pure-Go definitions in core/quant
// (dot.go, dot_k.go), which follow ggml's x86 kernels: the same int32 lanes, the same
// FMAs in the same order. The pure-Go fma32 rounds exactly like VFMADD231PS, so the SIMD
// and pure-Go paths return the same bits; the activation quantizers write the same bytes.
package main

import (
	"os"
	"strconv"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

const q8_0Bytes = 34

// Constants of the K-quant kernels.
var signBit, shift04, mask3F Mem

var (
	ones16, mask0F, mask03, mask0C, mask30, maskC0, bitsShuf, bitsMask, allOnes, sixteen Mem
	eights, sixteens, thirtyTwos                                                         Mem
)

func main() {
	ConstraintExpr("amd64")
	if v := os.Getenv("ASMGEN_PREFETCH"); v != "" {
		prefetchDist, _ = strconv.Atoi(v)
	}
	constants()
	blockDot("dotQ8_0AVX2", 34, bodyQ8_0, Mem{})
	blockDot("dotQ4_0AVX2", 18, bodyQ4_0, eights)
	blockDot("dotQ5_0AVX2", 22, bodyQ5_0, sixteens)
	blockDotX("dotQ4_1AVX2", 20, 36, bodyQ4_1, Mem{})
	blockDotX("dotQ5_1AVX2", 24, 36, bodyQ5_1, Mem{})
	blockDotRows("rowsQ8_0AVX2", 34, bodyQ8_0, Mem{})
	blockDotRows("rowsQ4_0AVX2", 18, bodyQ4_0, eights)
	blockDotRows("rowsQ5_0AVX2", 22, bodyQ5_0, sixteens)
	blockDotRows4w("rows4wQ8_0AVX2", 34, pairQ8_0, Mem{}, false)
	blockDotRows4w("rows4wQ4_0AVX2", 18, pairQ4_0, eights, true)
	blockDotRows4w("rows4wQ5_0AVX2", 22, pairQ5_0, sixteens, true)
	blockDotRows4("rows4Q8_0AVX2", 34, splitQ8_0, Mem{})
	blockDotRows4("rows4Q4_0AVX2", 18, splitQ4_0, eights)
	blockDotRows4("rows4Q5_0AVX2", 22, splitQ5_0, sixteens)
	blockDotRows4P("rows4pQ8_0AVX2", 34, splitQ8_0, Mem{})
	blockDotRows4x2("rows4x2Q4_0AVX2", 18, splitQ4_0.unpack, eights)
	blockDotRows4x2("rows4x2Q5_0AVX2", 22, splitQ5_0.unpack, sixteens)
	unpackRows("unpackRowsQ4_0AVX2", 18, splitQ4_0.unpack)
	unpackRows("unpackRowsQ5_0AVX2", 22, splitQ5_0.unpack)
	blockDotRows4r("rows4rQ4_0AVX2")
	unrepackRows("unrepackQ4_0AVX2")
	unpackRowsR("unpackRowsRQ4_0AVX2")
	prepBias4("prepBias4Q4_0AVX2", eights)
	prepBias4("prepBias4Q5_0AVX2", sixteens)
	rows4x2u("rows4x2uAVX2")
	prepScales4()
	dotF16()
	dotBF16()
	q4KDot()
	q6KDot()
	rows4Q4K()
	rows4Q6K()
	kConstants()
	q5KDot()
	q2KDot()
	q3KDot()
	iqConstants()
	iq4NLDot()
	iq4XSDot()
	mxfp4Constants()
	mxfp4Dot()
	iq3SConstants()
	iq3SDot()
	cbDots()
	fromFloatConstants()
	fromFloatQ8_0()
	fromFloatQ8_K()
	tileKernels()
	rowsKernels()
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
	signBit = GLOBL("signBit", RODATA|NOPTR)
	for i := 0; i < 4; i++ {
		DATA(4*i, U32(0x80000000))
	}
	mask3F = splat("mask3F", 0x3f)
	signBits = splat("signBits", 0x80)
	shift04 = bytes32("shift04", func(i int) byte { return map[int]byte{4: 4}[i] })
	// Byte i of a broadcast 32-bit qh gets qh's byte i/8; OR-ing 0xff minus bit i%8 and
	// comparing with 0xff leaves 0xff exactly where bit i of qh is set.
	bitsShuf = bytes32("bitsShuf", func(i int) byte { return byte(i / 8) })
	bitsMask = bytes32("bitsMask", func(i int) byte { return ^byte(1 << (i % 8)) })
}

// prefetchDist is how far ahead of the block being dotted the kernels ask for weight
// bytes (PREFETCHT1, into L2): at one activation row a dot streams its weights from
// memory once, and the prefetch keeps more cache lines in flight than the hardware
// prefetcher alone. Qwen2.5-0.5B output head at one row, PREFETCHT0 at 2048 vs none:
// Q8_0 −15 % CPU time, Q4_0 −40 % (512 helped less, PREFETCHNTA hurt); whole-model
// decode with the two-row kernels, PREFETCHT1 at 4096 vs PREFETCHT0 at 2048: −3 to −5 %
// CPU time (docs/perf-cpu.md). ASMGEN_PREFETCH=N overrides the distance.
var prefetchDist = 4096

// prefetchW emits prefetches of the cache lines n bytes long at prefetchDist past w.
func prefetchW(w reg.Register, n int) {
	if prefetchDist == 0 {
		return
	}
	for off := 0; off < n; off += 64 {
		PREFETCHT1(Mem{Base: w, Disp: prefetchDist + off})
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
	blockDotX(name, wBytes, q8_0Bytes, body, corrConst)
}

// blockDotX is blockDot against activation blocks of xBytes (Q8_0 or Q8_1: d first).
func blockDotX(name string, wBytes, xBytes int, body blockBody, corrConst Mem) {
	TEXT(name, NOSPLIT, "func(w, x *byte, nb int, acc *[8]float32)")
	Pragma("noescape")
	Doc(name + " runs ggml's block loop over nb blocks into acc (AVX2, FMA, F16C).")
	wp, xp, nb, accp := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("nb"), GP64()), Load(Param("acc"), GP64())
	acc := YMM()
	VMOVUPS(Mem{Base: accp}, acc)
	corr := loadCorr(corrConst)
	scales := AllocLocal(32)
	blockLoop(name, wBytes, xBytes, body, corr, wp, xp, nb, acc, scales)
	VMOVUPS(acc, Mem{Base: accp})
	VZEROUPPER()
	RET()
}

func loadCorr(corrConst Mem) reg.VecVirtual {
	var corr reg.VecVirtual
	if corrConst != (Mem{}) {
		corr = YMM()
		VMOVDQU(corrConst, corr)
	}
	return corr
}

// blockDotRows emits func(w *byte, wStride, rows int, x *byte, nb int, out *float32):
// out[r] = hsum_float_8 of blockDot's lanes for weight row r (at w + r·wStride) against
// the activation row x, rows > 0: the dots VecDot computes, without a call per row.
func blockDotRows(name string, wBytes int, body blockBody, corrConst Mem) {
	TEXT(name, NOSPLIT, "func(w *byte, wStride, rows int, x *byte, nb int, out *float32)")
	Pragma("noescape")
	Doc(name + " runs ggml's block loop for rows weight rows against one activation row (AVX2, FMA, F16C).")
	w0, stride, rows := Load(Param("w"), GP64()), Load(Param("wStride"), GP64()), Load(Param("rows"), GP64())
	x0, nb0, out := Load(Param("x"), GP64()), Load(Param("nb"), GP64()), Load(Param("out"), GP64())
	corr := loadCorr(corrConst)
	scales := AllocLocal(32)
	wp, xp, nb := GP64(), GP64(), GP64()
	Label(name + "_row")
	MOVQ(w0, wp)
	MOVQ(x0, xp)
	MOVQ(nb0, nb)
	acc := YMM()
	VXORPS(acc, acc, acc)
	blockLoop(name, wBytes, q8_0Bytes, body, corr, wp, xp, nb, acc, scales)
	// hsum_float_8: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))
	hi, lo := XMM(), XMM()
	VEXTRACTF128(Imm(1), acc, hi)
	VADDPS(hi, acc.AsX(), lo)
	VMOVHLPS(lo, lo, hi)
	VADDPS(hi, lo, lo)
	VMOVSHDUP(lo, hi)
	VADDSS(hi, lo, lo)
	VMOVSS(lo, Mem{Base: out})
	ADDQ(stride, w0)
	ADDQ(Imm(4), out)
	DECQ(rows)
	JNZ(LabelRef(name + "_row"))
	VZEROUPPER()
	RET()
}

// blockLoop emits blockDot's loop over nb blocks at wp, xp into acc (wp, xp, nb move).
func blockLoop(name string, wBytes, xBytes int, body blockBody, corr reg.VecVirtual, wp, xp, nb reg.Register, acc reg.VecVirtual, scales Mem) {
	Label(name + "_group")
	CMPQ(nb, Imm(8))
	JL(LabelRef(name + "_tail"))
	prefetchW(wp, 8*wBytes)
	dw, dx := XMM(), XMM()
	for k := 0; k < 8; k++ {
		VPINSRW(Imm(uint64(k)), Mem{Base: wp, Disp: k * wBytes}, dw, dw)
		VPINSRW(Imm(uint64(k)), Mem{Base: xp, Disp: k * xBytes}, dx, dx)
	}
	blockScales(dw, dx, scales)
	for k := 0; k < 8; k++ {
		p := body(Mem{Base: wp, Disp: k * wBytes}, Mem{Base: xp, Disp: k * xBytes}, corr)
		fmaBlock(acc, p, scales.Offset(4*k))
	}
	ADDQ(U32(8*wBytes), wp)
	ADDQ(U32(8*xBytes), xp)
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
		VPINSRW(Imm(uint64(k)), Mem{Base: xp, Disp: k * xBytes}, tx, tx)
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
	ADDQ(Imm(uint64(xBytes)), xp)
	INCQ(i)
	CMPQ(i, nb)
	JL(LabelRef(name + "_tailblock"))

	Label(name + "_done")
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

// f16Scalar leaves f16(m)·xd in lane 0 of a new XMM (xd: lane 0 of an XMM).
func f16Scalar(m Mem, xd reg.VecVirtual) reg.VecVirtual {
	t := XMM()
	VPXOR(t, t, t)
	VPINSRW(Imm(0), m, t, t)
	VCVTPH2PS(t, t)
	VMULSS(t, xd, t) // xd·f16: ggml's y.d * FP16(x.d)
	return t
}

// q4KDot emits func(w, x *byte, nb int, acc *[8]float32, accm *[4]float32): ggml's AVX2
// ggml_vec_dot_q4_K_q8_K loop; the caller reduces acc and accm as ggml does.
func q4KDot() {
	TEXT("dotQ4_KAVX2", NOSPLIT, "func(w, x *byte, nb int, acc *[8]float32, accm *[4]float32)")
	Pragma("noescape")
	Doc("dotQ4_KAVX2 runs ggml's Q4_K·Q8_K block loop over nb super-blocks into acc and accm (AVX2, FMA, F16C).")
	wp, xp, nb := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("nb"), GP64())
	accp, accmp := Load(Param("acc"), GP64()), Load(Param("accm"), GP64())
	acc, accm := YMM(), XMM()
	VMOVUPS(Mem{Base: accp}, acc)
	VMOVUPS(Mem{Base: accmp}, accm)
	sm := AllocLocal(32) // scales 0-7 then mins 0-7, as int16
	Label("q4k_loop")
	TESTQ(nb, nb)
	JZ(LabelRef("q4k_done"))
	prefetchW(wp, 144)
	smw := k4ScaleMins(wp, sm)
	// acc_m = fma(dmin, float32(mins · bsum pairs), acc_m)
	bs, q8s, mins := XMM(), XMM(), XMM()
	VMOVDQU(Mem{Base: xp, Disp: 4 + 256}, bs)
	VPHADDW(Mem{Base: xp, Disp: 4 + 256 + 16}, bs, q8s)
	VEXTRACTI128(Imm(1), smw, mins)
	VPMADDWD(q8s, mins, mins)
	VCVTDQ2PS(mins, mins)
	xd := XMM()
	VMOVSS(Mem{Base: xp}, xd)
	dmin := f16Scalar(Mem{Base: wp, Disp: 2}, xd)
	VXORPS(signBit, dmin, dmin) // −y.d·FP16(x.dmin)
	VBROADCASTSS(dmin, dmin)
	VFMADD231PS(mins, dmin, accm)
	// sumi lanes: Σ_j scale_2j·(low nibbles · x) + scale_2j+1·(high nibbles · x)
	sumi := YMM()
	VPXOR(sumi, sumi, sumi)
	for j := 0; j < 4; j++ {
		q, hi := YMM(), YMM()
		VMOVDQU(Mem{Base: wp, Disp: 16 + 32*j}, q)
		VPSRLW(Imm(4), q, hi)
		VPAND(mask0F, q, q)
		VPAND(mask0F, hi, hi)
		for half, v := range []reg.VecVirtual{q, hi} {
			p, sc := YMM(), YMM()
			VPMADDUBSW(Mem{Base: xp, Disp: 4 + 64*j + 32*half}, v, p)
			VPBROADCASTW(sm.Offset(2*(2*j+half)), sc)
			VPMADDWD(sc, p, p)
			VPADDD(p, sumi, sumi)
		}
	}
	d := f16Scalar(Mem{Base: wp}, xd)
	yd, f := YMM(), YMM()
	VBROADCASTSS(d, yd)
	VCVTDQ2PS(sumi, f)
	VFMADD231PS(f, yd, acc)
	ADDQ(U32(144), wp)
	ADDQ(U32(292), xp)
	DECQ(nb)
	JMP(LabelRef("q4k_loop"))
	Label("q4k_done")
	VMOVUPS(acc, Mem{Base: accp})
	VMOVUPS(accm, Mem{Base: accmp})
	VZEROUPPER()
	RET()
}

// k4ScaleMins unpacks the eight 6-bit scales and mins of the Q4_K/Q5_K block at wp
// (ggml's kmask unpacking on dword lanes [u0 u1 u2 ·]) as int16 [scales 0-7, mins 0-7],
// stored at sm and returned.
func k4ScaleMins(wp reg.Register, sm Mem) reg.VecVirtual {
	u, t, h := XMM(), XMM(), XMM()
	VMOVDQU(Mem{Base: wp, Disp: 4}, u)
	VPSHUFD(Imm(0xaa), u, t) // [u2 u2 u2 u2]
	VPSRLVD(shift04, t, t)   // [u2, u2>>4, …]
	VPAND(mask0F, t, t)
	VPSRLD(Imm(6), u, h) // [u0>>6, u1>>6, …]
	VPAND(mask03, h, h)
	VPSLLD(Imm(4), h, h)
	VPOR(h, t, t)       // [scales 4-7, mins 4-7]
	VPAND(mask3F, u, u) // [scales 0-3, mins 0-3]
	VPUNPCKLDQ(t, u, u) // [scales 0-7, mins 0-7] as bytes
	smw := YMM()
	VPMOVZXBW(u, smw)
	VMOVDQU(smw, sm)
	return smw
}

// q6KDot emits func(w, x *byte, nb int, acc *[8]float32): ggml's AVX2
// ggml_vec_dot_q6_K_q8_K loop (its 2026 form: unsigned levels, the bias subtracted per
// super-block from the bsums); the caller reduces acc.
func q6KDot() {
	TEXT("dotQ6_KAVX2", NOSPLIT, "func(w, x *byte, nb int, acc *[8]float32)")
	Pragma("noescape")
	Doc("dotQ6_KAVX2 runs ggml's Q6_K·Q8_K block loop over nb super-blocks into acc (AVX2, FMA, F16C).")
	wp, xp, nb, accp := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("nb"), GP64()), Load(Param("acc"), GP64())
	acc := YMM()
	VMOVUPS(Mem{Base: accp}, acc)
	sc := AllocLocal(32) // the sixteen scales as int16
	Label("q6k_loop")
	TESTQ(nb, nb)
	JZ(LabelRef("q6k_done"))
	prefetchW(wp, 210)
	s16 := YMM()
	VPMOVSXBW(Mem{Base: wp, Disp: 192}, s16)
	VMOVDQU(s16, sc)
	sumi := YMM()
	VPXOR(sumi, sumi, sumi)
	for j := 0; j < 2; j++ {
		qh, ql0, ql1 := YMM(), YMM(), YMM()
		VMOVDQU(Mem{Base: wp, Disp: 128 + 32*j}, qh)
		VMOVDQU(Mem{Base: wp, Disp: 64 * j}, ql0)
		VMOVDQU(Mem{Base: wp, Disp: 64*j + 32}, ql1)
		for k := 0; k < 4; k++ {
			q := q6KQuants(k, ql0, ql1, qh)
			x := Mem{Base: xp, Disp: 4 + 128*j + 32*k}
			p := YMM()
			VPMADDUBSW(x, q, p)
			// Scale of group 8j+2k in lanes 0-7, of group 8j+2k+1 in lanes 8-15.
			g := 8*j + 2*k
			s, hi := YMM(), XMM()
			VPBROADCASTW(sc.Offset(2*g), s)
			VPBROADCASTW(sc.Offset(2*g+2), hi)
			VINSERTI128(Imm(1), hi, s, s)
			VPMADDWD(s, p, p)
			VPADDD(p, sumi, sumi)
		}
	}
	// sumi −= (bsums · scales pairs) << 5: lane k loses 32·(s_2k·bsum_2k + s_2k+1·bsum_2k+1).
	bsub := YMM()
	VPMADDWD(Mem{Base: xp, Disp: 4 + 256}, s16, bsub)
	VPSLLD(Imm(5), bsub, bsub)
	VPSUBD(bsub, sumi, sumi)
	xd := XMM()
	VMOVSS(Mem{Base: xp}, xd)
	d := f16Scalar(Mem{Base: wp, Disp: 208}, xd)
	yd, f := YMM(), YMM()
	VBROADCASTSS(d, yd)
	VCVTDQ2PS(sumi, f)
	VFMADD231PS(f, yd, acc)
	ADDQ(U32(210), wp)
	ADDQ(U32(292), xp)
	DECQ(nb)
	JMP(LabelRef("q6k_loop"))
	Label("q6k_done")
	VMOVUPS(acc, Mem{Base: accp})
	VZEROUPPER()
	RET()
}

// q6KQuants is the k-th (0-3) 32-byte run of 6-bit Q6_K quants of a half super-block,
// unpacked from its low-nibble loads ql0, ql1 and its high-bit load qh (ggml's order).
func q6KQuants(k int, ql0, ql1, qh reg.VecVirtual) reg.VecVirtual {
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
	return q
}
