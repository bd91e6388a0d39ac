package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

var absMask, packPerm, f127, fNeg127, fOne Mem

func fromFloatConstants() {
	absMask = GLOBL("absMask", RODATA|NOPTR)
	for i := 0; i < 8; i++ {
		DATA(4*i, U32(0x7fffffff))
	}
	packPerm = GLOBL("packPerm", RODATA|NOPTR)
	for i, p := range []uint32{0, 4, 1, 5, 2, 6, 3, 7} {
		DATA(4*i, U32(p))
	}
	f127 = GLOBL("f127", RODATA|NOPTR)
	DATA(0, U32(math.Float32bits(127)))
	fNeg127 = GLOBL("fNeg127", RODATA|NOPTR)
	DATA(0, U32(math.Float32bits(-127)))
	fOne = GLOBL("fOne", RODATA|NOPTR)
	DATA(0, U32(math.Float32bits(1)))
}

// hmax leaves the largest of the eight floats of y in lane 0 of x (x is y's low half).
func hmax(y VecPhysical, x, t VecPhysical) {
	VEXTRACTF128(Imm(1), y, t)
	VMAXPS(t, x, x)
	VMOVHLPS(x, x, t)
	VMAXPS(t, x, x)
	VMOVSHDUP(x, t)
	VMAXSS(t, x, x)
}

// packStore rounds Y0-Y3 (already scaled) half to even, packs them to 32 signed bytes in
// order (ggml's packs + permute) and stores them at m. Y14 holds the permutation.
func packStore(m Mem) {
	for _, r := range []VecPhysical{Y0, Y1, Y2, Y3} {
		VROUNDPS(Imm(0), r, r)
		VCVTPS2DQ(r, r)
	}
	VPACKSSDW(Y1, Y0, Y0)
	VPACKSSDW(Y3, Y2, Y2)
	VPACKSSWB(Y2, Y0, Y0)
	VPERMD(Y0, Y14, Y0)
	VMOVDQU(Y0, m)
}

// fromFloatQ8_0 emits ggml's x86 quantize_row_q8_0 for nb blocks: amax, d = amax/127 as
// binary16 (round to nearest even), q = round-half-even(x·(127/amax)), 0 when amax is 0.
func fromFloatQ8_0() {
	TEXT("fromFloatQ8_0AVX2", NOSPLIT, "func(dst *byte, src *float32, nb int)")
	Pragma("noescape")
	Doc("fromFloatQ8_0AVX2 quantizes nb blocks of 32 floats to Q8_0 as ggml's x86 quantize_row_q8_0 (AVX2, F16C).")
	Load(Param("dst"), RDI)
	Load(Param("src"), RSI)
	Load(Param("nb"), RCX)
	VMOVUPS(absMask, Y15)
	VMOVDQU(packPerm, Y14)
	Label("ff80_block")
	TESTQ(RCX, RCX)
	JZ(LabelRef("ff80_done"))
	for i, r := range []VecPhysical{Y0, Y1, Y2, Y3} {
		VMOVUPS(Mem{Base: RSI, Disp: 32 * i}, r)
	}
	VANDPS(Y15, Y0, Y4)
	for _, r := range []VecPhysical{Y1, Y2, Y3} {
		VANDPS(Y15, r, Y5)
		VMAXPS(Y5, Y4, Y4)
	}
	hmax(Y4, X4, X5) // X4[0] = amax
	VDIVSS(f127, X4, X5)
	VCVTPS2PH(Imm(0), X5, X6)
	VMOVD(X6, R8L)
	MOVW(R8W, Mem{Base: RDI})
	VMOVSS(f127, X7)
	VDIVSS(X4, X7, X7) // 127/amax
	VXORPS(X8, X8, X8)
	VCMPSS(Imm(0), X8, X4, X9) // amax == 0
	VANDNPS(X7, X9, X7)
	VBROADCASTSS(X7, Y7)
	for _, r := range []VecPhysical{Y0, Y1, Y2, Y3} {
		VMULPS(Y7, r, r)
	}
	packStore(Mem{Base: RDI, Disp: 2})
	ADDQ(U32(128), RSI)
	ADDQ(Imm(34), RDI)
	DECQ(RCX)
	JMP(LabelRef("ff80_block"))
	Label("ff80_done")
	VZEROUPPER()
	RET()
}

// fromFloatQ8_K emits quantize_row_q8_K_ref for nb blocks, except the bsums (core/quant
// adds them): max = the first value of largest magnitude, iscale = −127/max,
// q = round-half-even(iscale·x), d = 1/iscale; an all-zero block gets d = 0, q = 0.
func fromFloatQ8_K() {
	TEXT("fromFloatQ8_KAVX2", NOSPLIT, "func(dst *byte, src *float32, nb int)")
	Pragma("noescape")
	Doc("fromFloatQ8_KAVX2 writes d and qs of nb Q8_K blocks as quantize_row_q8_K_ref (AVX2); bsums are left to the caller.")
	Load(Param("dst"), RDI)
	Load(Param("src"), RSI)
	Load(Param("nb"), RCX)
	VMOVUPS(absMask, Y15)
	VMOVDQU(packPerm, Y14)
	Label("ff8k_block")
	TESTQ(RCX, RCX)
	JZ(LabelRef("ff8k_done"))
	VXORPS(Y4, Y4, Y4)
	for i := 0; i < 32; i++ {
		VANDPS(Mem{Base: RSI, Disp: 32 * i}, Y15, Y5)
		VMAXPS(Y5, Y4, Y4)
	}
	hmax(Y4, X4, X5)
	VXORPS(X8, X8, X8)
	VUCOMISS(X8, X4)
	JNE(LabelRef("ff8k_nonzero"))
	// All zero: d = 0 and every level 0.
	VXORPS(Y0, Y0, Y0)
	for i := 0; i < 9; i++ {
		VMOVDQU(Y0, Mem{Base: RDI, Disp: 32 * i})
	}
	JMP(LabelRef("ff8k_next"))

	Label("ff8k_nonzero")
	// The first value whose magnitude is amax gives the sign of the scale.
	VBROADCASTSS(X4, Y5)
	MOVQ(RSI, R10)
	Label("ff8k_find")
	VANDPS(Mem{Base: R10}, Y15, Y6)
	VCMPPS(Imm(0), Y5, Y6, Y6)
	VMOVMSKPS(Y6, R8L)
	TESTL(R8L, R8L)
	JNZ(LabelRef("ff8k_found"))
	ADDQ(Imm(32), R10)
	JMP(LabelRef("ff8k_find"))
	Label("ff8k_found")
	BSFL(R8L, R9L)
	VMOVSS(Mem{Base: R10, Index: R9, Scale: 4}, X6) // max
	VMOVSS(fNeg127, X7)
	VDIVSS(X6, X7, X7) // iscale = −127/max
	VMOVSS(fOne, X8)
	VDIVSS(X7, X8, X8) // d = 1/iscale
	VMOVSS(X8, Mem{Base: RDI})
	VBROADCASTSS(X7, Y7)
	for g := 0; g < 8; g++ {
		for i, r := range []VecPhysical{Y0, Y1, Y2, Y3} {
			VMULPS(Mem{Base: RSI, Disp: 128*g + 32*i}, Y7, r)
		}
		packStore(Mem{Base: RDI, Disp: 4 + 32*g})
	}
	Label("ff8k_next")
	ADDQ(U32(1024), RSI)
	ADDQ(U32(292), RDI)
	DECQ(RCX)
	JMP(LabelRef("ff8k_block"))
	Label("ff8k_done")
	VZEROUPPER()
	RET()
}
