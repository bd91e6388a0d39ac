package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// The Q4_K tile kernel: ggml_vec_dot_q4_K_q8_K's operations for every (weight row,
// activation row) pair, two activation rows per zmm register and two pairs at a time.
//
// Prepared Q8_K activation pair-block (kPairBlock bytes): chunk c (32 values) of both
// rows at 64c; the eight bsum pairs (int16) of both rows at 512; x.d ×8 of both rows at
// 544; −x.d ×4 of both rows at 608; the sixteen bsums (int16) of both rows at 640 (for
// Q6_K).
//
// Unpacked weight super-block (kWBlock bytes): the 4-bit levels of chunk c at 32c (chunk
// 2j = low nibbles of qs[32j:], 2j+1 = high nibbles); scale c as 32 int16 at 256+64c;
// the eight mins as int16, twice, at 768; f16(d) at 800 and f16(dmin) at 804 as float32.
const (
	kPairBlock = 704
	kWBlock    = 832
)

// prepPairsK emits func(x *byte, xStride, nx, nb int, out *byte) for Q8_K rows.
func prepPairsK() {
	TEXT("prepPairsK", NOSPLIT, "func(x *byte, xStride, nx, nb int, out *byte)")
	Pragma("noescape")
	Doc("prepPairsK prepares Q8_K activation rows for the K-quant tile kernels (AVX2).")
	Load(Param("x"), RSI)
	Load(Param("xStride"), R9)
	Load(Param("nx"), RCX)
	Load(Param("nb"), R10)
	Load(Param("out"), RDI)
	MOVQ(R10, R11)
	IMUL3Q(U32(kPairBlock), R11, R11)
	XORQ(R8, R8)
	Label("prepk_row")
	CMPQ(R8, RCX)
	JGE(LabelRef("prepk_done"))
	// RDX = out + (t/2)·nb·kPairBlock; RAX = 32·(t%2)
	MOVQ(R8, RDX)
	SHRQ(Imm(1), RDX)
	IMULQ(R11, RDX)
	ADDQ(RDI, RDX)
	MOVQ(R8, RAX)
	ANDQ(Imm(1), RAX)
	SHLQ(Imm(5), RAX)
	MOVQ(RSI, RBX)
	MOVQ(R10, R12)
	Label("prepk_block")
	for c := 0; c < 8; c++ {
		VMOVDQU(Mem{Base: RBX, Disp: 4 + 32*c}, Y0)
		VMOVDQU(Y0, Mem{Base: RDX, Index: RAX, Scale: 1, Disp: 64 * c})
	}
	// Half offsets of the small fields: 16·h = RAX/2.
	MOVQ(RAX, R13)
	SHRQ(Imm(1), R13)
	VMOVDQU(Mem{Base: RBX, Disp: 4 + 256}, X0)
	VPHADDW(Mem{Base: RBX, Disp: 4 + 256 + 16}, X0, X0)
	VMOVDQU(X0, Mem{Base: RDX, Index: R13, Scale: 1, Disp: 512})
	VBROADCASTSS(Mem{Base: RBX}, Y1)
	VMOVUPS(Y1, Mem{Base: RDX, Index: RAX, Scale: 1, Disp: 544})
	VXORPS(signBit, X1, X2)
	VMOVUPS(X2, Mem{Base: RDX, Index: R13, Scale: 1, Disp: 608})
	VMOVDQU(Mem{Base: RBX, Disp: 4 + 256}, Y0)
	VMOVDQU(Y0, Mem{Base: RDX, Index: RAX, Scale: 1, Disp: 640})
	ADDQ(U32(292), RBX)
	ADDQ(U32(kPairBlock), RDX)
	DECQ(R12)
	JNZ(LabelRef("prepk_block"))
	ADDQ(R9, RSI)
	INCQ(R8)
	JMP(LabelRef("prepk_row"))
	Label("prepk_done")
	VZEROUPPER()
	RET()
}

// unpackQ4K writes the unpacked form of the Q4_K block at RAX to RDI (uses Y0-Y5).
func unpackQ4K() {
	for j := 0; j < 4; j++ {
		VMOVDQU(Mem{Base: RAX, Disp: 16 + 32*j}, Y0)
		VPSRLW(Imm(4), Y0, Y1)
		VPAND(mask0F, Y0, Y0)
		VPAND(mask0F, Y1, Y1)
		VMOVDQU(Y0, Mem{Base: RDI, Disp: 64 * j})
		VMOVDQU(Y1, Mem{Base: RDI, Disp: 64*j + 32})
	}
	// Scales and mins (ggml's kmask unpacking on dword lanes [u0 u1 u2 ·]).
	VMOVDQU(Mem{Base: RAX, Disp: 4}, X0)
	VPSHUFD(Imm(0xaa), X0, X1)
	VPSRLVD(shift04, X1, X1)
	VPAND(mask0F, X1, X1)
	VPSRLD(Imm(6), X0, X2)
	VPAND(mask03, X2, X2)
	VPSLLD(Imm(4), X2, X2)
	VPOR(X2, X1, X1)
	VPAND(mask3F, X0, X0)
	VPUNPCKLDQ(X1, X0, X0) // [scales 0-7, mins 0-7] as bytes
	VPMOVZXBW(X0, Y3)      // as int16
	VMOVDQU(Y3, Mem{Base: RDI, Disp: 768})
	for c := 0; c < 8; c++ {
		VPBROADCASTW(Mem{Base: RDI, Disp: 768 + 2*c}, Z4)
		VMOVDQU64(Z4, Mem{Base: RDI, Disp: 256 + 64*c})
	}
	VEXTRACTI128(Imm(1), Y3, X4) // mins
	VINSERTI128(Imm(1), X4, Y4, Y4)
	VMOVDQU(Y4, Mem{Base: RDI, Disp: 768})
	for i, off := range []int{0, 2} {
		VPXOR(X5, X5, X5)
		VPINSRW(Imm(0), Mem{Base: RAX, Disp: off}, X5, X5)
		VCVTPH2PS(X5, X5)
		VMOVSS(X5, Mem{Base: RDI, Disp: 800 + 4*i})
	}
}

// tileQ4K emits func(a *uintptr) over a tileArgs (wu: one row's unpacked blocks).
func tileQ4K() {
	type chain struct {
		sumi, p, acc, s, accm, fm, sm VecPhysical
		x                             Register
	}
	chains := []chain{
		{Z22, Z23, Z16, Z25, Z24, Z26, Z27, R10},
		{Z28, Z29, Z17, Z31, Z30, Z26, Z27, R11},
	}
	tileK("tileQ4_KZ", "Q4_K", 144, kWBlock, unpackQ4K, func(a Register, np int) {
		for _, c := range chains[:np] {
			VPXORD(c.acc, c.acc, c.acc)
			VPXORD(c.accm, c.accm, c.accm)
		}
	}, func(a Register, np int) {
		cs := chains[:np]
		VBROADCASTSS(Mem{Base: RSI, Disp: 800}, Z19) // f16(w.d)
		VBROADCASTSS(Mem{Base: RSI, Disp: 804}, Y20) // f16(w.dmin)
		VMOVDQU64(Mem{Base: RSI, Disp: 768}, Y21)    // mins, both halves
		for _, c := range cs {
			VPXORD(c.sumi, c.sumi, c.sumi)
		}
		for k := 0; k < 8; k++ {
			VBROADCASTI64X4(Mem{Base: RSI, Disp: 32 * k}, Z18)
			for _, c := range cs {
				VPMADDUBSW(Mem{Base: c.x, Disp: 64 * k}, Z18, c.p)
				VPMADDWD(Mem{Base: RSI, Disp: 256 + 64*k}, c.p, c.p)
				VPADDD(c.p, c.sumi, c.sumi)
			}
		}
		for _, c := range cs {
			// acc_m = fma(−x.d·f16(w.dmin), float32(mins · bsum pairs), acc_m)
			VPMADDWD(Mem{Base: c.x, Disp: 512}, Y21, c.fm.AsY())
			VCVTDQ2PS(c.fm.AsY(), c.fm.AsY())
			VMULPS(Mem{Base: c.x, Disp: 608}, Y20, c.sm.AsY())
			VFMADD231PS(c.fm.AsY(), c.sm.AsY(), c.accm.AsY())
			// acc = fma(x.d·f16(w.d), float32(sumi), acc)
			VCVTDQ2PS(c.sumi, c.sumi)
			VMULPS(Mem{Base: c.x, Disp: 544}, Z19, c.s)
			VFMADD231PS(c.sumi, c.s, c.acc)
		}
	}, func(a Register, np int) {
		// out[2p+h][r] = hsum_float_8(acc half) + ((m0+m2)+(m1+m3)) of the acc_m half.
		for _, c := range chains[:np] {
			VMOVUPS(c.acc, Z0)
			VEXTRACTF64X4(Imm(1), Z0, Y1)
			VMOVUPS(c.accm.AsY(), Y4)
			VEXTRACTF128(Imm(1), Y4, X5)
			for h, y := range []VecPhysical{Y0, Y1} {
				m := []VecPhysical{X4, X5}[h]
				lanesSum(y, X2, X3)
				VMOVHLPS(m, m, X6)
				VADDPS(X6, m, X6)
				VMOVSHDUP(X6, X7)
				VADDSS(X7, X6, X6)
				VADDSS(X6, X2, X2)
				VMOVSS(X2, Mem{Base: RAX, Index: R9, Scale: 4})
				ADDQ(Mem{Base: a, Disp: taRows}, R9)
			}
		}
	})
}

// tileK emits the K-quant tile kernel name (func(a *uintptr) over a tileArgs, with the
// tileArgs in a = R13): for each weight row (R12; RBX its blocks), unpack unpacks its nb
// super-blocks of blockBytes (RAX) into wu (wBlock bytes each, RDI); then for two
// activation pairs at a time, then one (R8 the first pair, R10 and R11 their
// pair-blocks), zero clears the accumulators, block runs per super-block (RSI its
// unpacked form) and store writes the dots with RAX = out and R9 = the index of
// out[2p][r].
func tileK(name, typ string, blockBytes, wBlock int, unpack func(), zero, block, store func(a Register, np int)) {
	TEXT(name, NOSPLIT, "func(a *uintptr)")
	Pragma("noescape")
	Doc(name + " computes a " + typ + " tile of dots in ggml's order (AVX512F/BW/VL, F16C).")
	a := R13
	Load(Param("a"), a)
	MOVQ(Mem{Base: a, Disp: taNB}, R14)
	IMUL3Q(U32(kPairBlock), R14, R14)
	MOVQ(Mem{Base: a, Disp: taW}, RBX)
	XORQ(R12, R12)

	Label(name + "_row")
	CMPQ(R12, Mem{Base: a, Disp: taRows})
	JGE(LabelRef(name + "_done"))
	MOVQ(RBX, RAX)
	MOVQ(Mem{Base: a, Disp: taWU}, RDI)
	MOVQ(Mem{Base: a, Disp: taNB}, RCX)
	Label(name + "_unpack")
	unpack()
	ADDQ(U32(uint64(blockBytes)), RAX)
	ADDQ(U32(uint64(wBlock)), RDI)
	DECQ(RCX)
	JNZ(LabelRef(name + "_unpack"))

	XORQ(R8, R8)
	for _, np := range []int{2, 1} {
		loop := pairLoop(name, np, a)
		MOVQ(R8, R10)
		IMULQ(R14, R10)
		ADDQ(Mem{Base: a, Disp: taXP}, R10)
		LEAQ(Mem{Base: R10, Index: R14, Scale: 1}, R11)
		zero(a, np)
		MOVQ(Mem{Base: a, Disp: taWU}, RSI)
		MOVQ(Mem{Base: a, Disp: taNB}, RCX)
		Label(loop + "_blk")
		block(a, np)
		ADDQ(U32(uint64(wBlock)), RSI)
		ADDQ(U32(kPairBlock), R10)
		ADDQ(U32(kPairBlock), R11)
		DECQ(RCX)
		JNZ(LabelRef(loop + "_blk"))
		MOVQ(R8, R9)
		SHLQ(Imm(1), R9)
		IMULQ(Mem{Base: a, Disp: taRows}, R9)
		ADDQ(R12, R9)
		MOVQ(Mem{Base: a, Disp: taOut}, RAX)
		store(a, np)
		ADDQ(Imm(uint64(np)), R8)
		JMP(LabelRef(loop))
	}
	Label(name + "_next")
	ADDQ(Mem{Base: a, Disp: taWStride}, RBX)
	INCQ(R12)
	JMP(LabelRef(name + "_row"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// The Q6_K tile kernel uses the same prepared activations (levels by chunk, x.d ×8 and
// the bsums). Unpacked weight super-block (k6WBlock bytes): the 6-bit levels of chunk c
// at 32c; chunk c's two scales as int16 [s_2c ×8, s_2c+1 ×8] twice at 256+64c; f16(d)
// at 768; the sixteen scales as int16, twice, at 800.
const k6WBlock = 864

// unpackQ6K writes the unpacked form of the Q6_K block at RAX to RDI (uses Y0-Y6).
func unpackQ6K() {
	for j := 0; j < 2; j++ {
		VMOVDQU(Mem{Base: RAX, Disp: 128 + 32*j}, Y4) // qh
		VMOVDQU(Mem{Base: RAX, Disp: 64 * j}, Y5)     // ql[0:32]
		VMOVDQU(Mem{Base: RAX, Disp: 64*j + 32}, Y6)  // ql[32:64]
		for k := 0; k < 4; k++ {
			switch k {
			case 0:
				VPAND(mask0F, Y5, Y0)
				VPAND(mask03, Y4, Y1)
				VPSLLW(Imm(4), Y1, Y1)
			case 1:
				VPAND(mask0F, Y6, Y0)
				VPAND(mask0C, Y4, Y1)
				VPSLLW(Imm(2), Y1, Y1)
			case 2:
				VPSRLW(Imm(4), Y5, Y0)
				VPAND(mask0F, Y0, Y0)
				VPAND(mask30, Y4, Y1)
			case 3:
				VPSRLW(Imm(4), Y6, Y0)
				VPAND(mask0F, Y0, Y0)
				VPAND(maskC0, Y4, Y1)
				VPSRLW(Imm(2), Y1, Y1)
			}
			VPOR(Y1, Y0, Y0)
			VMOVDQU(Y0, Mem{Base: RDI, Disp: 32 * (4*j + k)})
		}
	}
	VPMOVSXBW(Mem{Base: RAX, Disp: 192}, Y3)
	VMOVDQU(Y3, Mem{Base: RDI, Disp: 800})
	VMOVDQU(Y3, Mem{Base: RDI, Disp: 832})
	for c := 0; c < 8; c++ {
		VPBROADCASTW(Mem{Base: RDI, Disp: 800 + 4*c}, Y0)
		VPBROADCASTW(Mem{Base: RDI, Disp: 800 + 4*c + 2}, X1)
		VINSERTI128(Imm(1), X1, Y0, Y0)
		VMOVDQU(Y0, Mem{Base: RDI, Disp: 256 + 64*c})
		VMOVDQU(Y0, Mem{Base: RDI, Disp: 256 + 64*c + 32})
	}
	VPXOR(X5, X5, X5)
	VPINSRW(Imm(0), Mem{Base: RAX, Disp: 208}, X5, X5)
	VCVTPH2PS(X5, X5)
	VMOVSS(X5, Mem{Base: RDI, Disp: 768})
}

// tileQ6K emits func(a *uintptr) over a tileArgs (wu: one row's unpacked blocks).
func tileQ6K() {
	type chain struct {
		sumi, p, c, acc, s VecPhysical
		x                  Register
	}
	chains := []chain{{Z22, Z23, Z24, Z16, Z25, R10}, {Z26, Z27, Z28, Z17, Z29, R11}}
	tileK("tileQ6_KZ", "Q6_K", 210, k6WBlock, unpackQ6K, func(a Register, np int) {
		for _, c := range chains[:np] {
			VPXORD(c.acc, c.acc, c.acc)
		}
	}, func(a Register, np int) {
		cs := chains[:np]
		VBROADCASTSS(Mem{Base: RSI, Disp: 768}, Z19) // f16(w.d)
		for _, c := range cs {
			VPXORD(c.sumi, c.sumi, c.sumi)
		}
		for k := 0; k < 8; k++ {
			VBROADCASTI64X4(Mem{Base: RSI, Disp: 32 * k}, Z18)
			for _, c := range cs {
				x := Mem{Base: c.x, Disp: 64 * k}
				VPMADDUBSW(x, Z18, c.p) // Σ q·x pairs, q unsigned, as ggml
				VPMADDWD(Mem{Base: RSI, Disp: 256 + 64*k}, c.p, c.p)
				VPADDD(c.p, c.sumi, c.sumi)
			}
		}
		VMOVDQU64(Mem{Base: RSI, Disp: 800}, Z18) // the scales as int16, for both rows
		for _, c := range cs {
			// sumi −= (bsums · scales pairs) << 5, per row half, as ggml
			VPMADDWD(Mem{Base: c.x, Disp: 640}, Z18, c.c)
			VPSLLD(Imm(5), c.c, c.c)
			VPSUBD(c.c, c.sumi, c.sumi)
			VCVTDQ2PS(c.sumi, c.sumi)
			VMULPS(Mem{Base: c.x, Disp: 544}, Z19, c.s) // x.d·f16(w.d)
			VFMADD231PS(c.sumi, c.s, c.acc)
		}
	}, func(a Register, np int) {
		for _, c := range chains[:np] {
			VMOVUPS(c.acc, Z0)
			VEXTRACTF64X4(Imm(1), Z0, Y1)
			for _, y := range []VecPhysical{Y0, Y1} {
				lanesSum(y, X2, X3)
				VMOVSS(X2, Mem{Base: RAX, Index: R9, Scale: 4})
				ADDQ(Mem{Base: a, Disp: taRows}, R9)
			}
		}
	})
}
