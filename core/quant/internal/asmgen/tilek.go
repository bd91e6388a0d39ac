package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Prepared Q8_K activations for the K-quant tile kernels, per activation row and
// super-block, kPrepBlock bytes: the 256 levels transposed by dwords across the eight
// 32-value chunks (dword j of chunk c at 32·j + 4·c), then int32[8] bsum pairs
// (bsums[2c]+bsums[2c+1], for the Q4_K mins), int32[8] −32·bsums[2c] and int32[8]
// −32·bsums[2c+1] (the Q6_K bias), and the float32 scale d.
const (
	kPrepBlock                          = 384
	kpPairs, kpBiasEven, kpBiasOdd, kpD = 256, 288, 320, 352
	q4KBytes, q6KBytes                  = 144, 210
)

// kTile is the shared frame of the K-quant tile kernels: loops over weight rows and
// super-blocks; unpack emits the weight side of super-block b (chunks in Y0-Y7 before
// the transpose into Y16-Y23, scale vectors in Y12/Y13, float scales in X15); act emits
// one activation row's partial into X0 (a float32 in lane 0), which is added to lane b%8
// of acc[t] (VecDot's order). Register use: R8 prepared row, R10 lane offset, R11 acc.
func kTile(name string, wBytes int, unpack func(), act func()) {
	TEXT(name, NOSPLIT, "func(a *uintptr)")
	Pragma("noescape")
	Doc(name + " computes a tile of dots into a.out (AVX512_VNNI, AVX512VL, AVX2, F16C).")
	a := R13
	Load(Param("a"), a)
	cnt := AllocLocal(8)
	MOVQ(Mem{Base: a, Disp: taW}, RBX)
	MOVQ(Mem{Base: a, Disp: taOut}, R12)
	MOVQ(Mem{Base: a, Disp: taRows}, RCX)

	Label(name + "_row")
	TESTQ(RCX, RCX)
	JZ(LabelRef(name + "_done"))
	MOVQ(Mem{Base: a, Disp: taAcc}, R11)
	MOVQ(Mem{Base: a, Disp: taNX}, R9)
	MOVQ(R9, cnt)
	VXORPS(Y0, Y0, Y0)
	Label(name + "_zero")
	VMOVUPS(Y0, Mem{Base: R11})
	ADDQ(Imm(32), R11)
	DECQ(cnt)
	JNZ(LabelRef(name + "_zero"))
	MOVQ(RBX, RAX)
	MOVQ(Mem{Base: a, Disp: taXQ}, RDX)
	MOVQ(Mem{Base: a, Disp: taNB}, R14)
	XORQ(R10, R10)

	Label(name + "_block")
	TESTQ(R14, R14)
	JZ(LabelRef(name + "_finish"))
	unpack()
	transpose8([8]VecPhysical{Y16, Y17, Y18, Y19, Y20, Y21, Y22, Y23})
	MOVQ(Mem{Base: a, Disp: taNX}, R9)
	MOVQ(R9, cnt)
	MOVQ(RDX, R8)
	MOVQ(Mem{Base: a, Disp: taAcc}, R11)
	ADDQ(R10, R11)
	Label(name + "_act")
	act()
	VADDSS(Mem{Base: R11}, X0, X0)
	VMOVSS(X0, Mem{Base: R11})
	ADDQ(Mem{Base: a, Disp: taXQStride}, R8)
	ADDQ(Imm(32), R11)
	DECQ(cnt)
	JNZ(LabelRef(name + "_act"))
	ADDQ(U32(kPrepBlock), RDX)
	ADDQ(U32(wBytes), RAX)
	ADDQ(Imm(4), R10)
	ANDQ(Imm(31), R10)
	DECQ(R14)
	JMP(LabelRef(name + "_block"))

	Label(name + "_finish")
	MOVQ(Mem{Base: a, Disp: taAcc}, R11)
	MOVQ(Mem{Base: a, Disp: taNX}, R9)
	MOVQ(R9, cnt)
	MOVQ(R12, R8)
	Label(name + "_out")
	VMOVUPS(Mem{Base: R11}, Y0)
	VEXTRACTF128(Imm(1), Y0, X1)
	VADDPS(X1, X0, X0)
	VMOVHLPS(X0, X0, X1)
	VADDPS(X1, X0, X0)
	VMOVSHDUP(X0, X1)
	VADDSS(X1, X0, X0)
	VMOVSS(X0, Mem{Base: R8})
	ADDQ(Mem{Base: a, Disp: taOutStride}, R8)
	ADDQ(Imm(32), R11)
	DECQ(cnt)
	JNZ(LabelRef(name + "_out"))
	ADDQ(Mem{Base: a, Disp: taWStride}, RBX)
	ADDQ(Imm(4), R12)
	DECQ(RCX)
	JMP(LabelRef(name + "_row"))

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// chunkSums leaves in lo (and hi, if not nil) the per-chunk sums Σ level·x of the
// transposed weights in Y16-Y23 with the prepared row at R8: dwords 0-3 of each chunk
// go to lo and 4-7 to hi when hi is given, all to lo otherwise. lo and hi start from
// the given initial memory (or zero).
func chunkSums(lo, hi VecPhysical, loInit, hiInit *Mem) {
	cols := []VecPhysical{Y16, Y17, Y18, Y19, Y20, Y21, Y22, Y23}
	acc := []VecPhysical{lo, Y1, Y2, Y3}
	if hi != nil {
		acc = []VecPhysical{lo, Y1, hi, Y3}
	}
	for i, r := range acc {
		switch {
		case i == 0 && loInit != nil:
			VMOVDQU(*loInit, r)
		case i == 2 && hi != nil && hiInit != nil:
			VMOVDQU(*hiInit, r)
		default:
			VPXOR(r, r, r)
		}
	}
	for j := 0; j < 8; j++ {
		k := j % 2 // lo side
		if hi != nil && j >= 4 {
			k = 2 + j%2
		} else if hi == nil {
			k = j % 4
		}
		vpdpbusd(Mem{Base: R8, Disp: 32 * j}, cols[j], acc[k])
	}
	if hi != nil {
		VPADDD(Y1, lo, lo)
		VPADDD(Y3, hi, hi)
		return
	}
	VPADDD(Y1, lo, lo)
	VPADDD(Y3, Y2, Y2)
	VPADDD(Y2, lo, lo)
}

func kTiles() {
	// Q4_K: chunk 2j = low nibbles of qs[32j:32j+32], chunk 2j+1 = high nibbles.
	kTile("tileQ4_KVNNI", q4KBytes, func() {
		for j := 0; j < 4; j++ {
			lo, hi := []VecPhysical{Y0, Y2, Y4, Y6}[j], []VecPhysical{Y1, Y3, Y5, Y7}[j]
			VMOVDQU(Mem{Base: RAX, Disp: 16 + 32*j}, lo)
			VPSRLW(Imm(4), lo, hi)
			VPAND(mask0F, lo, lo)
			VPAND(mask0F, hi, hi)
		}
		// Scales and mins (ggml's kmask unpacking, on dword lanes [u0 u1 u2 ·]) as
		// int32 vectors Y12 (scales) and Y13 (mins).
		VMOVDQU(Mem{Base: RAX, Disp: 4}, X12)
		VPSHUFD(Imm(0xaa), X12, X13) // [u2 u2 u2 u2]
		VPSRLVD(shift04, X13, X13)   // [u2, u2>>4, …]
		VPAND(mask0F, X13, X13)      // low 4 bits of the high scales / mins
		VPSRLD(Imm(6), X12, X14)     // [u0>>6, u1>>6, …]
		VPAND(mask03, X14, X14)
		VPSLLD(Imm(4), X14, X14)
		VPOR(X14, X13, X13)       // [scales 4-7, mins 4-7]
		VPAND(mask3F, X12, X12)   // [scales 0-3, mins 0-3]
		VPUNPCKLDQ(X13, X12, X12) // [scales 0-3, scales 4-7, mins 0-3, mins 4-7]
		VPSRLDQ(Imm(8), X12, X13)
		VPMOVZXBD(X12, Y12)
		VPMOVZXBD(X13, Y13)
		// X15 = [f16(d), f16(dmin)] as float32.
		VPXOR(X15, X15, X15)
		VPINSRW(Imm(0), Mem{Base: RAX}, X15, X15)
		VPINSRW(Imm(1), Mem{Base: RAX, Disp: 2}, X15, X15)
		VCVTPH2PS(X15, X15)
	}, func() {
		chunkSums(Y0, nil, nil, nil)
		VPMULLD(Y12, Y0, Y0) // scale_c · Σ q·x
		VPMULLD(Mem{Base: R8, Disp: kpPairs}, Y13, Y4)
		VPHADDD(Y4, Y0, Y0)
		VPHADDD(Y0, Y0, Y0)
		VEXTRACTI128(Imm(1), Y0, X4)
		VPADDD(X4, X0, X0) // [isum, summs, …]
		VCVTDQ2PS(X0, X0)
		VBROADCASTSS(Mem{Base: R8, Disp: kpD}, X4)
		VMULPS(X4, X15, X4) // [d, dmin] = [f16(w.d)·x.d, f16(w.dmin)·x.d]
		VMULPS(X4, X0, X0)  // [d·isum, dmin·summs]
		VMOVSHDUP(X0, X4)
		VSUBSS(X4, X0, X0)
	})
	// Q6_K: chunk c = 4n+k holds values 32c..32c+31 (levels 0..63); its dwords 0-3 are
	// scale group 2c and 4-7 group 2c+1.
	kTile("tileQ6_KVNNI", q6KBytes, func() {
		for n := 0; n < 2; n++ {
			qh, ql0, ql1 := Y8, Y9, Y10
			VMOVDQU(Mem{Base: RAX, Disp: 128 + 32*n}, qh)
			VMOVDQU(Mem{Base: RAX, Disp: 64 * n}, ql0)
			VMOVDQU(Mem{Base: RAX, Disp: 64*n + 32}, ql1)
			r := []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7}[4*n : 4*n+4]
			VPAND(mask0F, ql0, r[0])
			VPAND(mask03, qh, Y11)
			VPSLLW(Imm(4), Y11, Y11)
			VPOR(Y11, r[0], r[0])
			VPAND(mask0F, ql1, r[1])
			VPAND(mask0C, qh, Y11)
			VPSLLW(Imm(2), Y11, Y11)
			VPOR(Y11, r[1], r[1])
			VPSRLW(Imm(4), ql0, r[2])
			VPAND(mask0F, r[2], r[2])
			VPAND(mask30, qh, Y11)
			VPOR(Y11, r[2], r[2])
			VPSRLW(Imm(4), ql1, r[3])
			VPAND(mask0F, r[3], r[3])
			VPAND(maskC0, qh, Y11)
			VPSRLW(Imm(2), Y11, Y11)
			VPOR(Y11, r[3], r[3])
		}
		// Even and odd group scales as int32 vectors Y12, Y13.
		VMOVDQU(Mem{Base: RAX, Disp: 192}, X12)
		VPSHUFB(evenOdd, X12, X12)
		VPSRLDQ(Imm(8), X12, X13)
		VPMOVSXBD(X12, Y12)
		VPMOVSXBD(X13, Y13)
		VPXOR(X15, X15, X15)
		VPINSRW(Imm(0), Mem{Base: RAX, Disp: 208}, X15, X15)
		VCVTPH2PS(X15, X15)
	}, func() {
		even, odd := Mem{Base: R8, Disp: kpBiasEven}, Mem{Base: R8, Disp: kpBiasOdd}
		chunkSums(Y0, Y2, &even, &odd)
		VPMULLD(Y12, Y0, Y0)
		VPMULLD(Y13, Y2, Y2)
		VPADDD(Y2, Y0, Y0)
		VEXTRACTI128(Imm(1), Y0, X4)
		VPADDD(X4, X0, X0)
		VPSHUFD(Imm(0x4e), X0, X4)
		VPADDD(X4, X0, X0)
		VPSHUFD(Imm(0xb1), X0, X4)
		VPADDD(X4, X0, X0)
		VCVTDQ2PS(X0, X0)
		VMULSS(Mem{Base: R8, Disp: kpD}, X15, X4) // d = f16(w.d)·x.d
		VMULSS(X4, X0, X0)
	})
}

var evenOdd, shift04, mask3F Mem
