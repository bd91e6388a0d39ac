package main

import (
	"strconv"

	. "github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// Tile kernels (AVX-512 F/BW/VL + VNNI) for Q8_0, Q4_0 and Q5_0 weights in ggml's order:
// every (weight row, activation row) pair is its own chain of
// acc = fma(f16(w.d)·f16(x.d), float32(lanes), acc) over the blocks, exactly as VecDot.
// A zmm register holds the eight lanes of two activation rows side by side, and two
// such pairs run interleaved, so four FMA chains are in flight and the weight block is
// unpacked once per row, not once per dot.

// Offsets of core/quant's tileArgs fields (8 bytes each).
const (
	taW, taWStride, taRows, taNB, taWU, taDW, taXP, taPairs, taOut = 0, 8, 16, 24, 32, 40, 48, 56, 64
	// The 32-block tiles store straight into the caller's Out: its stride, and the
	// activation row count (an odd count's last pair has no second row to store).
	taOutStride, taNX = 72, 80
	// Prepared activation pair-block: qs of both rows, −bias·Σ4 lanes of both rows,
	// the two float32 block scales each broadcast over 8 lanes.
	pairBlock = 192
)

// vpdpbusd emits VPDPBUSD src, u, acc (acc += Σ4 u_unsigned·src_signed), which avo's
// instruction table lacks (AVX512_VNNI; EVEX-encoded by the Go assembler).
func vpdpbusd(src Op, u, acc Register) {
	Instruction(&ir.Instruction{
		Opcode:   "VPDPBUSD",
		Operands: []Op{src, u, acc},
		Inputs:   []Op{src, u, acc},
		Outputs:  []Op{acc},
		ISA:      []string{"AVX512_VNNI"},
	})
}

// unpacker writes block (at w) as 32 unsigned levels into Y0, using Y1 as scratch.
type unpacker func(w Mem)

func unpackQ8_0(w Mem) {
	VMOVDQU(w.Offset(2), Y0)
	VPXOR(signBits, Y0, Y0) // w XOR 0x80 = w + 128 as an unsigned byte
}

func unpackNibbles(m Mem) {
	VBROADCASTI128(m, Y0)
	VPSRLW(Imm(4), Y0, Y1)
	VPBLENDD(Imm(0xf0), Y1, Y0, Y0)
	VPAND(mask0F, Y0, Y0)
}

func unpackQ4_0(w Mem) { unpackNibbles(w.Offset(2)) }

func unpackQ5_0(w Mem) {
	unpackNibbles(w.Offset(6))
	VPBROADCASTD(w.Offset(2), Y1)
	VPSHUFB(bitsShuf, Y1, Y1)
	VPOR(bitsMask, Y1, Y1)
	VPCMPEQB(allOnes, Y1, Y1)
	VPAND(sixteen, Y1, Y1)
	VPOR(Y1, Y0, Y0)
}

var signBits Mem

func tileKernels() {
	prepPairs()
	tileKernel("tileQ8_0Z", 34, unpackQ8_0)
	tileKernel("tileQ4_0Z", 18, unpackQ4_0)
	tileKernel("tileQ5_0Z", 22, unpackQ5_0)
	tileDirectQ8_0()
	prepPairsK()
	tileQ4K()
	tileQ6K()
}

// pairLoop emits the head of a tile kernel's loop over activation pairs np at a time
// (R8 the next pair, a the tileArgs): the label prefix+"_pairs<np>", then a jump to
// prefix+"_pairs1" (np = 2) or prefix+"_next" (np = 1) when fewer than np pairs are
// left (R9 = pairs left). It returns the label.
func pairLoop(prefix string, np int, a Register) string {
	loop := prefix + "_pairs" + strconv.Itoa(np)
	Label(loop)
	MOVQ(Mem{Base: a, Disp: taPairs}, R9)
	SUBQ(R8, R9)
	CMPQ(R9, Imm(uint64(np)))
	if np == 2 {
		JL(LabelRef(prefix + "_pairs1"))
	} else {
		JL(LabelRef(prefix + "_next"))
	}
	return loop
}

// prepPairs emits func(x *byte, xStride, nx, nb int, bias *byte, out *byte): activation
// row t, block b goes to pair t/2, half t%2 of pair-block (t/2)·nb + b: its 32 levels,
// its eight lanes −bias·Σ of 4 levels (VPDPBUSD with the bias bytes, negated), its
// scale ×8.
func prepPairs() {
	TEXT("prepPairsZ", NOSPLIT, "func(x *byte, xStride, nx, nb int, bias *byte, out *byte)")
	Pragma("noescape")
	Doc("prepPairsZ prepares Q8_0 activation rows for the tile kernels (AVX512_VNNI, AVX512VL, F16C).")
	Load(Param("x"), RSI)
	Load(Param("xStride"), R9)
	Load(Param("nx"), RCX)
	Load(Param("nb"), R10)
	Load(Param("bias"), RAX)
	Load(Param("out"), RDI)
	VMOVDQU(Mem{Base: RAX}, Y15)
	// R11 = nb·pairBlock, the distance between pairs.
	MOVQ(R10, R11)
	IMUL3Q(U32(pairBlock), R11, R11)
	XORQ(R8, R8) // t
	Label("prep_row")
	CMPQ(R8, RCX)
	JGE(LabelRef("prep_done"))
	// RDX = out + (t/2)·nb·pairBlock + 32·(t%2)
	MOVQ(R8, RDX)
	SHRQ(Imm(1), RDX)
	IMULQ(R11, RDX)
	ADDQ(RDI, RDX)
	MOVQ(R8, RAX)
	ANDQ(Imm(1), RAX)
	SHLQ(Imm(5), RAX)
	ADDQ(RAX, RDX)
	MOVQ(RSI, RBX) // block pointer
	MOVQ(R10, R12) // blocks left
	Label("prep_block")
	VMOVDQU(Mem{Base: RBX, Disp: 2}, Y0)
	VMOVDQU(Y0, Mem{Base: RDX})
	VPXOR(Y1, Y1, Y1)
	vpdpbusd(Y0, Y15, Y1)
	VPXOR(Y3, Y3, Y3)
	VPSUBD(Y1, Y3, Y1) // −bias·Σ4: the tile kernels start each dot's lanes from it
	VMOVDQU(Y1, Mem{Base: RDX, Disp: 64})
	VPXOR(X2, X2, X2)
	VPINSRW(Imm(0), Mem{Base: RBX}, X2, X2)
	VCVTPH2PS(X2, X2)
	VBROADCASTSS(X2, Y2)
	VMOVUPS(Y2, Mem{Base: RDX, Disp: 128})
	ADDQ(Imm(34), RBX)
	ADDQ(U32(pairBlock), RDX)
	DECQ(R12)
	JNZ(LabelRef("prep_block"))
	ADDQ(R9, RSI)
	INCQ(R8)
	JMP(LabelRef("prep_row"))
	Label("prep_done")
	VZEROUPPER()
	RET()
}

// lanesSum reduces the eight floats of y (clobbering y's upper half use) into lane 0
// of d, as ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)); t is scratch.
func lanesSum(y VecPhysical, d, t VecPhysical) {
	VEXTRACTF128(Imm(1), y, t)
	VADDPS(t, y.AsX(), d)
	VMOVHLPS(d, d, t)
	VADDPS(t, d, d)
	VMOVSHDUP(d, t)
	VADDSS(t, d, d)
}

// tileKernel emits func(a *uintptr) over a tileArgs. Weight rows go four at a time (then
// two, then one): each is unpacked into its slot of a.wu (levels) and a.dw (float32
// scales); then the activation pairs run two at a time (then one), so up to eight zmm
// FMA chains advance per block while every activation load serves all the weight rows.
// Results go straight to out[t·outStride + r] for t < nx.
func tileKernel(name string, wBytes int, unpack unpacker) {
	TEXT(name, NOSPLIT, "func(a *uintptr)")
	Pragma("noescape")
	Doc(name + " computes a tile of dots in ggml's order (AVX512F/BW/VL, AVX512_VNNI, F16C).")
	a := R13
	Load(Param("a"), a)
	MOVQ(Mem{Base: a, Disp: taNB}, R14)
	IMUL3Q(U32(pairBlock), R14, R14) // distance between activation pairs
	MOVQ(Mem{Base: a, Disp: taW}, RBX)
	XORQ(R12, R12) // r

	// Steps of weight rows: sixteen (four groups of four) while they last, then four,
	// two, one. A group's block loop keeps its four rows' accumulators in registers; the
	// groups of a step run one after another over the same activation pairs, which stay
	// in L1 (a pair-block is 192 bytes: 10.5 KB per two pairs of 896 values), so the
	// activations stream from L2 once per sixteen weight rows instead of once per four.
	steps := []struct{ nr, groups int }{{4, 4}, {4, 1}, {2, 1}, {1, 1}}
	stepLabel := func(k int) string {
		return name + "_rows" + strconv.Itoa(steps[k].nr*steps[k].groups)
	}
	for k, st := range steps {
		nr, groups := st.nr, st.groups
		n := nr * groups
		rows := stepLabel(k)
		Label(rows)
		if groups > 1 {
			// Only while the groups' unpacked rows stay in L1 too (nb·36 bytes per row:
			// 16 KB at 28 blocks); BenchmarkDotTile at 152 blocks ran 2 % slower.
			CMPQ(Mem{Base: a, Disp: taNB}, Imm(maxGroupedBlocks))
			JG(LabelRef(stepLabel(k + 1)))
		}
		MOVQ(Mem{Base: a, Disp: taRows}, R9)
		SUBQ(R12, R9)
		CMPQ(R9, Imm(uint64(n)))
		if k+1 < len(steps) {
			JL(LabelRef(stepLabel(k + 1)))
		} else {
			JL(LabelRef(name + "_done"))
		}
		// Unpack n rows, each group's nr rows interleaved per block: row i of group g
		// has its levels of block b at wu + g·nb·32·nr + (b·nr + i)·32 and its f16(d) at
		// dw + g·nb·4·nr + (b·nr + i)·4.
		for j := 0; j < n; j++ {
			g, i := j/nr, j%nr
			MOVQ(RBX, RAX)
			for q := 0; q < j; q++ {
				ADDQ(Mem{Base: a, Disp: taWStride}, RAX)
			}
			groupBase(a, nr, g)
			MOVQ(Mem{Base: a, Disp: taNB}, RCX)
			if i > 0 {
				ADDQ(U32(32*i), RSI)
				ADDQ(U32(4*i), RDI)
			}
			un := rows + "_unpack" + strconv.Itoa(j)
			Label(un)
			unpack(Mem{Base: RAX})
			VMOVDQU(Y0, Mem{Base: RSI})
			VPXOR(X2, X2, X2)
			VPINSRW(Imm(0), Mem{Base: RAX}, X2, X2)
			VCVTPH2PS(X2, X2)
			VMOVSS(X2, Mem{Base: RDI})
			ADDQ(U32(wBytes), RAX)
			ADDQ(U32(32*nr), RSI)
			ADDQ(U32(4*nr), RDI)
			DECQ(RCX)
			JNZ(LabelRef(un))
		}
		XORQ(R8, R8) // pair index
		for _, np := range []int{2, 1} {
			loop := pairLoop(rows, np, a)
			for g := 0; g < groups; g++ {
				gl := loop + "_g" + strconv.Itoa(g)
				tileBlocks(gl, nr, np, a, g)
				storeDots(gl, nr, np, a, g)
			}
			ADDQ(Imm(uint64(np)), R8)
			JMP(LabelRef(loop))
		}
		Label(rows + "_next")
		for i := 0; i < n; i++ {
			ADDQ(Mem{Base: a, Disp: taWStride}, RBX)
		}
		ADDQ(Imm(uint64(n)), R12)
		JMP(LabelRef(rows))
	}

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// storeDots reduces and stores the dots of group g's nr weight rows (at row R12 +
// g·nr) with np activation pairs (from pair R8): out[(2p+h)·outStride + r+i],
// skipping row 2p+1 = nx; gl is the label prefix of the calling block loop.
func storeDots(gl string, nr, np int, a Register, g int) {
	if nr == 4 && np == 2 {
		reduce4x4(gl, a, 4*g)
		return
	}
	// Reduce and store out[(2p+h)·outStride + r+i], skipping row 2p+1 = nx.
	for i := 0; i < nr; i++ {
		MOVQ(R8, R9)
		SHLQ(Imm(1), R9)
		IMULQ(Mem{Base: a, Disp: taOutStride}, R9)
		ADDQ(R12, R9)
		if off := g*nr + i; off > 0 {
			ADDQ(Imm(uint64(off)), R9)
		}
		MOVQ(Mem{Base: a, Disp: taOut}, RAX)
		for p := 0; p < np; p++ {
			skip := gl + "_r" + strconv.Itoa(i) + "_p" + strconv.Itoa(p) + "_odd"
			VMOVUPS(accs[i][p], Z0)
			VEXTRACTF64X4(Imm(1), Z0, Y1)
			lanesSum(Y0, X2, X3)
			VMOVSS(X2, Mem{Base: RAX, Index: R9, Scale: 4})
			ADDQ(Mem{Base: a, Disp: taOutStride}, R9)
			LEAQ(Mem{Base: R8, Index: R8, Scale: 1, Disp: 2*p + 1}, RDX)
			CMPQ(RDX, Mem{Base: a, Disp: taNX})
			JGE(LabelRef(skip))
			lanesSum(Y1, X2, X3)
			VMOVSS(X2, Mem{Base: RAX, Index: R9, Scale: 4})
			Label(skip)
			ADDQ(Mem{Base: a, Disp: taOutStride}, R9)
		}
	}
}

// reduce4x4 reduces the sixteen dots of four weight rows (i) and two activation pairs
// (four rows k) at once and stores them as out[(2p+k)·outStride + r+i], with the sum of
// lanesSum per dot, ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), in 21 operations instead of
// 112 (15 of them shuffles against 64):
//
//	U_i = [a(i,k) for k = 0..3], a_j = l_j + l_j+4  (VSHUFF32X4 of the 128-bit quarters)
//	E = [b0,b1 of (0,k) | b0,b1 of (1,k)], F for rows 2, 3, b0 = a0+a2, b1 = a1+a3
//	R = [b0+b1 of (i,k) for i = 0..3] in 128-bit lane k: four stores of four rows.
//
// Row 2p+3 is skipped when it is nx (an odd count); rows 2p..2p+2 exist.
func reduce4x4(loop string, a Register, rowOff int) {
	us := [4]VecPhysical{Z0, Z1, Z2, Z3}
	t0, t1 := Z4, Z5
	for i := 0; i < 4; i++ {
		VSHUFF32X4(Imm(0x88), accs[i][1], accs[i][0], t0) // [X.q0, X.q2, Y.q0, Y.q2]
		VSHUFF32X4(Imm(0xdd), accs[i][1], accs[i][0], t1) // [X.q1, X.q3, Y.q1, Y.q3]
		VADDPS(t1, t0, us[i])
	}
	e, f := Z6, Z7
	for j, d := range []VecPhysical{e, f} {
		VSHUFPS(Imm(0x44), us[2*j+1], us[2*j], t0) // [c0, c1, d0, d1]
		VSHUFPS(Imm(0xee), us[2*j+1], us[2*j], t1) // [c2, c3, d2, d3]
		VADDPS(t1, t0, d)
	}
	VSHUFPS(Imm(0x88), f, e, t0) // [e0, e2, f0, f2]
	VSHUFPS(Imm(0xdd), f, e, t1) // [e1, e3, f1, f3]
	VADDPS(t1, t0, Z8)
	MOVQ(R8, R9)
	SHLQ(Imm(1), R9)
	IMULQ(Mem{Base: a, Disp: taOutStride}, R9)
	ADDQ(R12, R9)
	if rowOff > 0 {
		ADDQ(Imm(uint64(rowOff)), R9)
	}
	MOVQ(Mem{Base: a, Disp: taOut}, RAX)
	skip := loop + "_row3"
	for k := 0; k < 4; k++ {
		if k == 3 {
			LEAQ(Mem{Base: R8, Index: R8, Scale: 1, Disp: 3}, RDX)
			CMPQ(RDX, Mem{Base: a, Disp: taNX})
			JGE(LabelRef(skip))
		}
		if k == 0 {
			VMOVUPS(X8, Mem{Base: RAX, Index: R9, Scale: 4})
		} else {
			VEXTRACTF32X4(Imm(uint64(k)), Z8, Mem{Base: RAX, Index: R9, Scale: 4})
		}
		if k < 3 {
			ADDQ(Mem{Base: a, Disp: taOutStride}, R9)
		}
	}
	Label(skip)
}

// maxGroupedBlocks is the most blocks per row for which the sixteen-row step runs.
const maxGroupedBlocks = 48

// groupBase points RSI and RDI at group g's unpacked levels and scales (groups of nr
// rows: nb·32·nr and nb·4·nr bytes each); it clobbers RDX.
func groupBase(a Register, nr, g int) {
	MOVQ(Mem{Base: a, Disp: taWU}, RSI)
	MOVQ(Mem{Base: a, Disp: taDW}, RDI)
	if g > 0 {
		MOVQ(Mem{Base: a, Disp: taNB}, RDX)
		IMUL3Q(U32(32*nr*g), RDX, RDX)
		ADDQ(RDX, RSI)
		MOVQ(Mem{Base: a, Disp: taNB}, RDX)
		IMUL3Q(U32(4*nr*g), RDX, RDX)
		ADDQ(RDX, RDI)
	}
}

// accs[i][p] is the accumulator of weight row i (of up to four) with activation pair p.
var accs = [4][2]VecPhysical{{Z16, Z17}, {Z26, Z27}, {Z12, Z13}, {Z14, Z28}}

// tileBlocks emits the block loop for nr weight rows (unpacked in wu/dw) and np
// activation pairs starting at pair R8: acc[i][p] = fma(dw_i·dx, lanes, acc[i][p]).
func tileBlocks(loop string, nr, np int, a Register, g int) {
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
	groupBase(a, nr, g)
	// Two blocks per iteration (half the pointer updates and loop branch, which compete
	// with the vector operations for ports 0 and 5): BenchmarkDotTile Q4_0 64 rows, 896
	// columns −3 %, 4864 columns −8 %. An odd count runs one block first.
	MOVQ(Mem{Base: a, Disp: taNB}, RCX)
	TESTQ(U32(1), RCX)
	JZ(LabelRef(loop + "_blk"))
	tileBlockBody(nr, np, xs, tmps, ws, ds, 0)
	ADDQ(U32(32*nr), RSI)
	ADDQ(U32(4*nr), RDI)
	ADDQ(U32(pairBlock), R10)
	ADDQ(U32(pairBlock), R11)
	DECQ(RCX)
	JZ(LabelRef(loop + "_blkdone"))
	Label(loop + "_blk")
	for u := 0; u < 2; u++ {
		tileBlockBody(nr, np, xs, tmps, ws, ds, u)
	}
	ADDQ(U32(2*32*nr), RSI)
	ADDQ(U32(2*4*nr), RDI)
	ADDQ(U32(2*pairBlock), R10)
	ADDQ(U32(2*pairBlock), R11)
	SUBQ(Imm(2), RCX)
	JNZ(LabelRef(loop + "_blk"))
	Label(loop + "_blkdone")
}

// tileBlockBody emits one block (the u-th of an iteration) of tileBlocks' loop.
func tileBlockBody(nr, np int, xs [2]Register, tmps [2][2][2]VecPhysical, ws, ds [4]VecPhysical, u int) {
	for i := 0; i < nr; i++ { // the nr rows' block b lie together (tileKernel)
		VBROADCASTI64X4(Mem{Base: RSI, Disp: 32*i + u*32*nr}, ws[i])
		VBROADCASTSS(Mem{Base: RDI, Disp: 4*i + u*4*nr}, ds[i])
	}
	tileBlockDots(nr, np, xs, tmps, ws, ds, u)
}

// tileBlockDots emits the dots of one block (the u-th of an iteration) once the nr
// weight rows' levels are in ws and their scales in ds.
func tileBlockDots(nr, np int, xs [2]Register, tmps [2][2][2]VecPhysical, ws, ds [4]VecPhysical, u int) {
	// The pair's levels and scales are loaded once for all weight rows (Z8-Z11: EVEX
	// reaches them too); the load ports, not the ALUs, were the limit.
	// The pair's −bias·Σ4 lanes too (Z0, Z1), copied into each dot's accumulator by a
	// register move: reloading them from memory for every weight row cost 15 % of the
	// kernel's time (BenchmarkDotTile Q4_0 64 rows).
	xv, xsc, xl := [2]VecPhysical{Z8, Z9}, [2]VecPhysical{Z10, Z11}, [2]VecPhysical{Z0, Z1}
	o := u * pairBlock
	for p := 0; p < np; p++ {
		if nr >= 2 {
			VMOVDQU32(Mem{Base: xs[p], Disp: o}, xv[p])
			VMOVUPS(Mem{Base: xs[p], Disp: o + 128}, xsc[p])
			VMOVDQU32(Mem{Base: xs[p], Disp: o + 64}, xl[p])
		}
		for i := 0; i < nr; i++ {
			pv, sv := tmps[i%2][p][0], tmps[i%2][p][1]
			// Σ4 (w+bias)·x − bias·Σ4 x: exact int32 lanes, as ggml's; starting
			// from the prepared −bias·Σ4 lanes saves an ALU operation per dot.
			if nr >= 2 {
				VMOVDQA32(xl[p], pv)
				vpdpbusd(xv[p], ws[i], pv)
				VMULPS(xsc[p], ds[i], sv) // f16(w.d)·f16(x.d)
			} else {
				VMOVDQU32(Mem{Base: xs[p], Disp: o + 64}, pv)
				vpdpbusd(Mem{Base: xs[p], Disp: o}, ws[i], pv)
				VMULPS(Mem{Base: xs[p], Disp: o + 128}, ds[i], sv)
			}
			VCVTDQ2PS(pv, pv)
			VFMADD231PS(pv, sv, accs[i][p])
		}
	}
}
