package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Two-row kernels (AVX-512 F/BW/VL + VNNI) for one activation row, the matmuls of
// decoding: a zmm holds the eight lanes of weight rows r and r+1 side by side, and each
// pair is still its own chain acc = fma(f16(w.d)·f16(x.d), float32(lanes), acc) over
// the blocks, as VecDot. One VPDPBUSD on the unsigned levels (w+bias), started from the
// prepared −bias·Σ4 x lanes, gives ggml's exact integer lanes for both rows, where the
// AVX2 kernel needs sign, sign, maddubs and madd per row.

func rowsKernels() {
	mask0F64 = GLOBL("mask0F64", RODATA|NOPTR)
	for i := 0; i < 64; i++ {
		DATA(i, U8(0x0f))
	}
	rowsKernel("rows2Q8_0Z", 34, unpack2Q8_0)
	rowsKernel("rows2Q4_0Z", 18, unpack2Q4_0)
	rowsKernel("rows2Q5_0Z", 22, unpack2Q5_0)
}

var mask0F64 Mem

// An unpacker2 writes the 32 unsigned levels of the blocks at w0 and w1 into Z18,
// row 0 in the low half; Y0-Y4 are scratch.
type unpacker2 func(w0, w1 Mem)

func unpack2Q8_0(w0, w1 Mem) {
	unpackQ8_0(w0)
	VMOVDQA(Y0, Y2)
	unpackQ8_0(w1)
	VINSERTI64X4(Imm(1), Y0, Z2, Z18)
}

// unpack2Q4_0 unpacks both rows' nibbles at once: [q0 | q1] as 16-byte lanes, then
// [low q0, low q1, high q0, high q1] reordered to [low q0, high q0 | low q1, high q1].
func unpack2Q4_0(w0, w1 Mem) { unpack2Nibbles(w0.Offset(2), w1.Offset(2)) }

func unpack2Nibbles(m0, m1 Mem) {
	VMOVDQU(m0, X0)
	VINSERTI128(Imm(1), m1, Y0, Y0)
	VPSRLW(Imm(4), Y0, Y1)
	VINSERTI64X4(Imm(1), Y1, Z0, Z18)
	VSHUFI64X2(Imm(0xd8), Z18, Z18, Z18)
	VPANDD(mask0F64, Z18, Z18)
}

// unpack2Q5_0 adds each row's fifth bits (as unpackQ5_0) to both rows' nibbles.
func unpack2Q5_0(w0, w1 Mem) {
	unpack2Nibbles(w0.Offset(6), w1.Offset(6))
	for i, w := range []Mem{w0, w1} {
		b := []VecPhysical{Y2, Y1}[i]
		VPBROADCASTD(w.Offset(2), b)
		VPSHUFB(bitsShuf, b, b)
		VPOR(bitsMask, b, b)
		VPCMPEQB(allOnes, b, b)
		VPAND(sixteen, b, b)
	}
	VINSERTI64X4(Imm(1), Y1, Z2, Z3)
	VPORD(Z3, Z18, Z18)
}

// rowsKernel emits func(w *byte, wStride, pairs, nb int, xp *byte, out *float32): for
// p < pairs, the dots of weight rows 2p and 2p+1 (at w + 2p·wStride, nb blocks each)
// with the activation row prepared by prepPairsZ (one row: pair-blocks of pairBlock
// bytes, half 0) go to out[2p] and out[2p+1], each reduced as hsum_float_8.
func rowsKernel(name string, wBytes int, unpack2 unpacker2) {
	TEXT(name, NOSPLIT, "func(w *byte, wStride, pairs, nb int, xp *byte, out *float32)")
	Pragma("noescape")
	Doc(name + " runs pairs of weight rows against one prepared activation row in ggml's order (AVX512F/BW/VL, AVX512_VNNI, F16C).")
	Load(Param("w"), RAX)
	Load(Param("wStride"), R9)
	Load(Param("pairs"), R12)
	Load(Param("nb"), R13)
	Load(Param("xp"), R14)
	Load(Param("out"), R11)
	Label(name + "_pair")
	MOVQ(RAX, RSI)
	LEAQ(Mem{Base: RAX, Index: R9, Scale: 1}, RDI) // the second row
	MOVQ(R13, RCX)
	MOVQ(R14, R10)
	VPXORD(Z16, Z16, Z16)
	Label(name + "_blk")
	prefetchW(RSI, 64)
	prefetchW(RDI, 64)
	unpack2(Mem{Base: RSI}, Mem{Base: RDI})        // [row 0 levels | row 1 levels]
	VBROADCASTI64X4(Mem{Base: R10}, Z20)           // x levels, both halves
	VBROADCASTI64X4(Mem{Base: R10, Disp: 64}, Z19) // −bias·Σ4 x, both halves
	vpdpbusd(Z20, Z18, Z19)                        // Σ4 w·x of both rows
	VCVTDQ2PS(Z19, Z19)
	VPBROADCASTW(Mem{Base: RSI}, X3)
	VPBROADCASTW(Mem{Base: RDI}, X4)
	VINSERTI128(Imm(1), X4, Y3, Y3)
	VCVTPH2PS(Y3, Z21)                           // [f16(w0.d) ×8 | f16(w1.d) ×8]
	VBROADCASTSS(Mem{Base: R10, Disp: 128}, Z22) // f16(x.d)
	VMULPS(Z22, Z21, Z21)
	VFMADD231PS(Z19, Z21, Z16)
	ADDQ(U32(wBytes), RSI)
	ADDQ(U32(wBytes), RDI)
	ADDQ(U32(pairBlock), R10)
	DECQ(RCX)
	JNZ(LabelRef(name + "_blk"))
	// hsum_float_8 of each half: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)).
	VMOVUPS(Z16, Z0)
	VEXTRACTF64X4(Imm(1), Z0, Y1)
	lanesSum(Y0, X2, X3)
	VMOVSS(X2, Mem{Base: R11})
	lanesSum(Y1, X2, X3)
	VMOVSS(X2, Mem{Base: R11, Disp: 4})
	ADDQ(Imm(8), R11)
	LEAQ(Mem{Base: RAX, Index: R9, Scale: 2}, RAX)
	DECQ(R12)
	JNZ(LabelRef(name + "_pair"))
	VZEROUPPER()
	RET()
}
