package main

import (
	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Offsets of the fields of core/quant's tileArgs (all 8 bytes wide).
const (
	taW, taWStride, taRows, taXQ, taXS, taXD = 0, 8, 16, 24, 32, 40
	taXQStride, taXSStride, taNB, taNX       = 48, 56, 64, 72
	taAcc, taOut, taOutStride                = 80, 88, 96
)

// vpdpbusd emits VPDPBUSD src, u, acc (acc += Σ4 u_unsigned·src_signed), which avo's
// instruction table lacks (AVX512_VNNI with AVX512VL, EVEX-encoded by the Go assembler).
func vpdpbusd(src Op, u, acc Register) {
	Instruction(&ir.Instruction{
		Opcode:   "VPDPBUSD",
		Operands: []Op{src, u, acc},
		Inputs:   []Op{src, u, acc},
		Outputs:  []Op{acc},
		ISA:      []string{"AVX512_VNNI", "AVX512VL"},
	})
}

// A tileWeight emits the unsigned bytes of weight block k of the group at wp into dst
// (Y0-Y15), and the per-format left shift that turns Σx into the bias correction.
type tileWeight struct {
	name   string
	bytes  int
	shift  uint64 // bias = 1<<shift: 128 for Q8_0 (w+128), 8 for Q4_0, 16 for Q5_0
	unpack func(w Mem, dst VecPhysical)
}

func tileKernels() {
	prepQ8()
	tileKernel(tileWeight{"tileQ8_0VNNI", 34, 7, func(w Mem, dst VecPhysical) {
		VMOVDQU(w.Offset(2), dst)
		VPXOR(signBits, dst, dst) // w XOR 0x80 = w+128 as an unsigned byte
	}})
	tileKernel(tileWeight{"tileQ4_0VNNI", 18, 3, func(w Mem, dst VecPhysical) {
		VBROADCASTI128(w.Offset(2), dst)
		VPSRLW(Imm(4), dst, Y15)
		VPBLENDD(Imm(0xf0), Y15, dst, dst)
		VPAND(mask0F, dst, dst)
	}})
	tileKernel(tileWeight{"tileQ5_0VNNI", 22, 4, func(w Mem, dst VecPhysical) {
		VBROADCASTI128(w.Offset(6), dst)
		VPSRLW(Imm(4), dst, Y15)
		VPBLENDD(Imm(0xf0), Y15, dst, dst)
		VPAND(mask0F, dst, dst)
		VPBROADCASTD(w.Offset(2), Y15)
		VPSHUFB(bitsShuf, Y15, Y15)
		VPOR(bitsMask, Y15, Y15)
		VPCMPEQB(allOnes, Y15, Y15)
		VPAND(sixteen, Y15, Y15)
		VPOR(Y15, dst, dst)
	}})
}

var signBits Mem

// transpose8 transposes the 8×8 matrix of dwords in Y0-Y7 (row k = Y_k) into dst
// (column j = dst[j]), so lane k of dst[j] holds dword j of row k. It uses Y8-Y11.
func transpose8(dst [8]VecPhysical) {
	a := []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7}
	for h := 0; h < 2; h++ {
		r := a[4*h : 4*h+4]
		VPUNPCKLDQ(r[1], r[0], Y8)
		VPUNPCKHDQ(r[1], r[0], Y9)
		VPUNPCKLDQ(r[3], r[2], Y10)
		VPUNPCKHDQ(r[3], r[2], Y11)
		VPUNPCKLQDQ(Y10, Y8, r[0])
		VPUNPCKHQDQ(Y10, Y8, r[1])
		VPUNPCKLQDQ(Y11, Y9, r[2])
		VPUNPCKHQDQ(Y11, Y9, r[3])
	}
	for j := 0; j < 4; j++ {
		VSHUFI64X2(Imm(0), a[4+j], a[j], dst[j])
		VSHUFI64X2(Imm(3), a[4+j], a[j], dst[4+j])
	}
}

// Prepared activations: per activation row, per group of 8 blocks, 320 bytes:
// 256 bytes of levels transposed by dwords (dword j of block k at 32·j + 4·k), then
// eight int32 −bias·Σx, then eight float32 block scales. Rows are zero-padded to whole
// groups. With this layout VPDPBUSD leaves whole block sums in the lanes: no reduction.
const prepGroup = 320

// prepQ8 emits func(a *uintptr) over a prepArgs (x, xStride, nx, nb, shift, out, outStride).
func prepQ8() {
	TEXT("prepQ8Tile", NOSPLIT, "func(a *uintptr)")
	Pragma("noescape")
	Doc("prepQ8Tile writes the prepared form of a.nx Q8_0 activation rows (AVX512_VNNI, AVX512VL, AVX2, F16C).")
	a := R13
	Load(Param("a"), a)
	const paX, paXStride, paNX, paNB, paShift, paOut, paOutStride = 0, 8, 16, 24, 32, 40, 48
	MOVQ(Mem{Base: a, Disp: paX}, RBX)
	MOVQ(Mem{Base: a, Disp: paOut}, R12)
	MOVQ(Mem{Base: a, Disp: paNX}, RCX)
	MOVQ(Mem{Base: a, Disp: paShift}, R9)
	VMOVD(R9.As32(), X12)
	VMOVDQU(onesU8, Y13)
	Label("prep_row")
	TESTQ(RCX, RCX)
	JZ(LabelRef("prep_done"))
	MOVQ(RBX, RAX)
	MOVQ(R12, RDX)
	MOVQ(Mem{Base: a, Disp: paNB}, R14)
	Label("prep_group")
	TESTQ(R14, R14)
	JZ(LabelRef("prep_next"))
	VPXOR(X14, X14, X14)
	rows := []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7}
	for k := 0; k < 8; k++ {
		VPXOR(rows[k], rows[k], rows[k])
	}
	for k := 0; k < 8; k++ {
		CMPQ(R14, Imm(uint64(k+1)))
		JL(LabelRef("prep_loaded"))
		VMOVDQU(Mem{Base: RAX, Disp: 34*k + 2}, rows[k])
		VPINSRW(Imm(uint64(k)), Mem{Base: RAX, Disp: 34 * k}, X14, X14)
	}
	Label("prep_loaded")
	cols := [8]VecPhysical{Y16, Y17, Y18, Y19, Y20, Y21, Y22, Y23}
	transpose8(cols)
	VPXORD(Y24, Y24, Y24)
	for j := 0; j < 8; j++ {
		VMOVDQU64(cols[j], Mem{Base: RDX, Disp: 32 * j})
		vpdpbusd(cols[j], Y13, Y24) // Σx per block, in its lane
	}
	VMOVDQU64(Y24, Y0)
	VPSLLD(X12, Y0, Y0)
	VPXOR(Y1, Y1, Y1)
	VPSUBD(Y0, Y1, Y1)
	VMOVDQU(Y1, Mem{Base: RDX, Disp: 256})
	VCVTPH2PS(X14, Y2)
	VMOVUPS(Y2, Mem{Base: RDX, Disp: 288})
	ADDQ(U32(8*34), RAX)
	ADDQ(U32(prepGroup), RDX)
	SUBQ(Imm(8), R14)
	JAE(LabelRef("prep_group"))
	XORQ(R14, R14)
	JMP(LabelRef("prep_group"))
	Label("prep_next")
	ADDQ(Mem{Base: a, Disp: paXStride}, RBX)
	ADDQ(Mem{Base: a, Disp: paOutStride}, R12)
	DECQ(RCX)
	JMP(LabelRef("prep_row"))
	Label("prep_done")
	VZEROUPPER()
	RET()
}

var onesU8 Mem

// tileKernel emits func(a *uintptr), a pointing at a core/quant tileArgs. For each
// weight row and each group of eight blocks it unpacks the weight blocks once (bytes as
// unsigned levels), transposes them by dwords into Y16-Y23 and gathers their scales in
// Y14; then for every prepared activation row it computes the eight block sums with
// eight VPDPBUSD (starting from −bias·Σx, so the sums are exact Σ (q−bias)·x), and adds
// float32(isum)·(dw·dx) to lane b%8 of acc[t], the order of the pure-Go VecDot. After the
// last group it reduces acc[t] in VecDot's order into out[t].
//
// Registers are physical: VPDPBUSD, VSHUFI64X2 and the Y16+ moves are EVEX-encoded;
// everything else stays in Y0-Y15, which VEX instructions can reach.
func tileKernel(tw tileWeight) {
	n := tw.name
	TEXT(n, NOSPLIT, "func(a *uintptr)")
	Pragma("noescape")
	Doc(n + " computes a tile of dots into a.out (AVX512_VNNI, AVX512VL, AVX2, F16C).")
	a := R13
	Load(Param("a"), a)
	// R15 is left alone (the Go assembler uses it for globals when dynamic linking):
	// the activation-row counter lives on the stack.
	cnt := AllocLocal(8)
	MOVQ(Mem{Base: a, Disp: taW}, RBX)
	MOVQ(Mem{Base: a, Disp: taOut}, R12)
	MOVQ(Mem{Base: a, Disp: taRows}, RCX)
	rows := []VecPhysical{Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7}
	cols := [8]VecPhysical{Y16, Y17, Y18, Y19, Y20, Y21, Y22, Y23}

	Label(n + "_row")
	TESTQ(RCX, RCX)
	JZ(LabelRef(n + "_done"))
	MOVQ(Mem{Base: a, Disp: taAcc}, R11)
	MOVQ(Mem{Base: a, Disp: taNX}, R9)
	MOVQ(R9, cnt)
	VXORPS(Y0, Y0, Y0)
	Label(n + "_zero")
	VMOVUPS(Y0, Mem{Base: R11})
	ADDQ(Imm(32), R11)
	DECQ(cnt)
	JNZ(LabelRef(n + "_zero"))
	MOVQ(RBX, RAX)
	MOVQ(Mem{Base: a, Disp: taXQ}, RDX)
	MOVQ(Mem{Base: a, Disp: taNB}, R14)

	Label(n + "_group")
	TESTQ(R14, R14)
	JZ(LabelRef(n + "_finish"))
	// Missing blocks of a last, partial group keep zero levels and scales; the prepared
	// activations are zero there too, so they add exactly +0.
	VPXOR(X14, X14, X14)
	for k := 0; k < 8; k++ {
		VPXOR(rows[k], rows[k], rows[k])
	}
	for k := 0; k < 8; k++ {
		CMPQ(R14, Imm(uint64(k+1)))
		JL(LabelRef(n + "_loaded"))
		w := Mem{Base: RAX, Disp: k * tw.bytes}
		tw.unpack(w, rows[k])
		VPINSRW(Imm(uint64(k)), w, X14, X14)
	}
	Label(n + "_loaded")
	transpose8(cols)
	VCVTPH2PS(X14, Y14)
	MOVQ(Mem{Base: a, Disp: taNX}, R9)
	MOVQ(R9, cnt)
	MOVQ(RDX, R8)
	MOVQ(Mem{Base: a, Disp: taAcc}, R11)
	Label(n + "_act")
	VMOVDQU(Mem{Base: R8, Disp: 256}, Y0)
	VPXOR(Y1, Y1, Y1)
	VPXOR(Y2, Y2, Y2)
	VPXOR(Y3, Y3, Y3)
	for j := 0; j < 8; j++ {
		vpdpbusd(Mem{Base: R8, Disp: 32 * j}, cols[j], rows[j%4])
	}
	VPADDD(Y1, Y0, Y0)
	VPADDD(Y3, Y2, Y2)
	VPADDD(Y2, Y0, Y0)
	VMULPS(Mem{Base: R8, Disp: 288}, Y14, Y9)
	VCVTDQ2PS(Y0, Y0)
	VMULPS(Y9, Y0, Y0)
	VADDPS(Mem{Base: R11}, Y0, Y0)
	VMOVUPS(Y0, Mem{Base: R11})
	ADDQ(Mem{Base: a, Disp: taXQStride}, R8)
	ADDQ(Imm(32), R11)
	DECQ(cnt)
	JNZ(LabelRef(n + "_act"))
	ADDQ(U32(prepGroup), RDX)
	ADDQ(U32(8*tw.bytes), RAX)
	SUBQ(Imm(8), R14)
	JAE(LabelRef(n + "_group"))
	XORQ(R14, R14)
	JMP(LabelRef(n + "_group"))

	// out[t][r] = ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)), VecDot's lane reduction.
	Label(n + "_finish")
	MOVQ(Mem{Base: a, Disp: taAcc}, R11)
	MOVQ(Mem{Base: a, Disp: taNX}, R9)
	MOVQ(R9, cnt)
	MOVQ(R12, R8)
	Label(n + "_out")
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
	JNZ(LabelRef(n + "_out"))
	ADDQ(Mem{Base: a, Disp: taWStride}, RBX)
	ADDQ(Imm(4), R12)
	DECQ(RCX)
	JMP(LabelRef(n + "_row"))

	Label(n + "_done")
	VZEROUPPER()
	RET()
}
