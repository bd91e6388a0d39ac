package main

import (
	"strconv"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// tileDirectQ8_0 emits tileQ8_0ZD, the Q8_0 tile kernel for few activation rows: it
// reads each weight block's levels straight from the Q8_0 rows (one VPXORD turns them
// into the unsigned w+128 of tileQ8_0Z) and the block scales from a.dw, already in
// float32 (quant.TileScales: per group of four rows, block b's four scales at
// dw + (g·nb + b)·16 bytes). So there is no unpacking pass before the dots, which at
// two to eight activation rows cost about as much as the dots themselves; from
// tileDirectMaxPairs pairs on tileQ8_0Z's one pass is cheaper than a VPXORD per block,
// row and pair pass. The dots and their order are tileQ8_0Z's, so are the bits.
//
// Weight rows go four at a time, then two, then one; R12 (the chunk's next row) is a
// multiple of four at every four-row step, and of two at the two-row step.
func tileDirectQ8_0() {
	name := "tileQ8_0ZD"
	TEXT(name, NOSPLIT, "func(a *uintptr)")
	Pragma("noescape")
	Doc(name + " computes a tile of Q8_0 dots in ggml's order from float32 block scales (AVX512F/BW/VL, AVX512_VNNI).")
	a := R13
	Load(Param("a"), a)
	MOVQ(Mem{Base: a, Disp: taNB}, R14)
	IMUL3Q(U32(pairBlock), R14, R14) // distance between activation pairs
	MOVQ(Mem{Base: a, Disp: taW}, RBX)
	VBROADCASTI64X4(signBits, Z15)
	XORQ(R12, R12) // r

	steps := []int{4, 2, 1}
	stepLabel := func(k int) string { return name + "_rows" + strconv.Itoa(steps[k]) }
	for k, nr := range steps {
		rows := stepLabel(k)
		Label(rows)
		MOVQ(Mem{Base: a, Disp: taRows}, R9)
		SUBQ(R12, R9)
		CMPQ(R9, Imm(uint64(nr)))
		if k+1 < len(steps) {
			JL(LabelRef(stepLabel(k + 1)))
		} else {
			JL(LabelRef(name + "_done"))
		}
		XORQ(R8, R8) // pair index
		for _, np := range []int{2, 1} {
			loop := pairLoop(rows, np, a)
			tileBlocksDirect(loop, nr, np, a)
			storeDots(loop, nr, np, a, 0)
			ADDQ(Imm(uint64(np)), R8)
			JMP(LabelRef(loop))
		}
		Label(rows + "_next")
		for i := 0; i < nr; i++ {
			ADDQ(Mem{Base: a, Disp: taWStride}, RBX)
		}
		ADDQ(Imm(uint64(nr)), R12)
		JMP(LabelRef(rows))
	}
	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// tileBlocksDirect is tileBlocks reading the weights in place: rows r..r+3 of the
// chunk at RSI, RSI+R9, RDI, RDI+R9 (R9 the row stride, RDI = RSI + 2·stride), their
// scales at RAX + 4i (RAX = dw + (r/4·nb)·16 + (r%4)·4), one block further per step.
func tileBlocksDirect(loop string, nr, np int, a Register) {
	MOVQ(R8, R10)
	IMULQ(R14, R10)
	ADDQ(Mem{Base: a, Disp: taXP}, R10)
	LEAQ(Mem{Base: R10, Index: R14, Scale: 1}, R11)
	tmps := [2][2][2]VecPhysical{{{Z20, Z21}, {Z22, Z23}}, {{Z29, Z30}, {Z31, Z3}}}
	ws, ds := [4]VecPhysical{Z18, Z24, Z4, Z5}, [4]VecPhysical{Z19, Z25, Z6, Z7}
	xs := [2]Register{R10, R11}
	for i := 0; i < nr; i++ {
		for p := 0; p < np; p++ {
			VPXORD(accs[i][p], accs[i][p], accs[i][p])
		}
	}
	LEAQ(Mem{Base: RBX, Disp: 2}, RSI) // row 0's levels of block 0
	MOVQ(Mem{Base: a, Disp: taWStride}, R9)
	LEAQ(Mem{Base: RSI, Index: R9, Scale: 2}, RDI)
	MOVQ(R12, RAX)
	SHRQ(Imm(2), RAX)
	IMULQ(Mem{Base: a, Disp: taNB}, RAX)
	SHLQ(Imm(4), RAX)
	ADDQ(Mem{Base: a, Disp: taDW}, RAX)
	MOVQ(R12, RDX)
	ANDQ(Imm(3), RDX)
	LEAQ(Mem{Base: RAX, Index: RDX, Scale: 4}, RAX)
	body := func(u int) {
		o := u * q8_0Bytes
		wm := [4]Mem{{Base: RSI, Disp: o}, {Base: RSI, Index: R9, Scale: 1, Disp: o}, {Base: RDI, Disp: o}, {Base: RDI, Index: R9, Scale: 1, Disp: o}}
		for i := 0; i < nr; i++ {
			if u == 0 && prefetchDist != 0 {
				// As the one-row kernels: the weights stream from memory once.
				PREFETCHT1(wm[i].Offset(prefetchDist))
			}
			VBROADCASTI64X4(wm[i], ws[i])
			VPXORD(Z15, ws[i], ws[i]) // w XOR 0x80 = w + 128 as an unsigned byte
			VBROADCASTSS(Mem{Base: RAX, Disp: 4*i + 16*u}, ds[i])
		}
		tileBlockDots(nr, np, xs, tmps, ws, ds, u)
	}
	advance := func(n int) {
		ADDQ(U32(uint64(n*q8_0Bytes)), RSI)
		ADDQ(U32(uint64(n*q8_0Bytes)), RDI)
		ADDQ(U32(uint64(n*16)), RAX)
		ADDQ(U32(uint64(n*pairBlock)), R10)
		ADDQ(U32(uint64(n*pairBlock)), R11)
	}
	// Two blocks per iteration, an odd count's first block alone (as tileBlocks).
	MOVQ(Mem{Base: a, Disp: taNB}, RCX)
	TESTQ(U32(1), RCX)
	JZ(LabelRef(loop + "_blk"))
	body(0)
	advance(1)
	DECQ(RCX)
	JZ(LabelRef(loop + "_blkdone"))
	Label(loop + "_blk")
	body(0)
	body(1)
	advance(2)
	SUBQ(Imm(2), RCX)
	JNZ(LabelRef(loop + "_blk"))
	Label(loop + "_blkdone")
}
