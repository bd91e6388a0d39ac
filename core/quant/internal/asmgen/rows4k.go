package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Four-activation-row AVX2 kernels of the K-quants (Q4_K, Q6_K): each weight
// super-block's levels and scales are unpacked once for four Q8_K activation rows,
// where VecDot unpacks them once per dot. Every (weight row, activation row) pair keeps
// VecDot's lanes and FMA chains (q4KDot, q6KDot): the integer lanes are sums of the
// same products (exact whatever the order), and each float step is the one of the
// one-row kernel.

const q8KBytes = 292

// rowsK emits the common frame of the K-quant rows4 kernels: func(w *byte, wStride,
// rows int, x *byte, xStride, nb int, out *float32, outStride int); for every weight row,
// block(wp, xs) runs one super-block at wp against the four activation rows at xs
// (their blocks at the same offset) into acc, and store(acc, outs) writes the four
// results.
func rowsK(name string, wBytes int, zero func(), block func(wp reg.Register, xs [4]Mem, acc [4]reg.VecVirtual),
	store func(acc [4]reg.VecVirtual, outs [4]Mem)) {
	TEXT(name, NOSPLIT, "func(w *byte, wStride, rows int, x *byte, xStride, nb int, out *float32, outStride int)")
	Pragma("noescape")
	Doc(name + " runs ggml's super-block loop for rows weight rows against four Q8_K activation rows (AVX2, FMA, F16C).")
	w0, stride, rows := Load(Param("w"), GP64()), Load(Param("wStride"), GP64()), Load(Param("rows"), GP64())
	x0, xs, nb0 := Load(Param("x"), GP64()), Load(Param("xStride"), GP64()), Load(Param("nb"), GP64())
	op, os := Load(Param("out"), GP64()), Load(Param("outStride"), GP64())
	SHLQ(Imm(2), os) // bytes
	wp, xa, xb, nb, op2 := GP64(), GP64(), GP64(), GP64(), GP64()
	Label(name + "_row")
	MOVQ(w0, wp)
	MOVQ(x0, xa)
	LEAQ(Mem{Base: x0, Index: xs, Scale: 2}, xb)
	MOVQ(nb0, nb)
	acc := zeroed4()
	if zero != nil {
		zero()
	}
	Label(name + "_block")
	prefetchW(wp, wBytes)
	block(wp, [4]Mem{{Base: xa}, {Base: xa, Index: xs, Scale: 1}, {Base: xb}, {Base: xb, Index: xs, Scale: 1}}, acc)
	ADDQ(U32(wBytes), wp)
	ADDQ(U32(q8KBytes), xa)
	ADDQ(U32(q8KBytes), xb)
	DECQ(nb)
	JNZ(LabelRef(name + "_block"))
	store(acc, outRows4(op, os, op2, 0))
	ADDQ(stride, w0)
	ADDQ(Imm(4), op)
	DECQ(rows)
	JNZ(LabelRef(name + "_row"))
	VZEROUPPER()
	RET()
}

// fmaSumi does acc = fma(x.d·f16w, float32(sumi), acc): the last step of a super-block
// in q4KDot and q6KDot (f16w: float32 of the weight's d, lane 0).
func fmaSumi(acc, sumi, f16w reg.VecVirtual, x Mem) {
	xd, yd, f := XMM(), YMM(), YMM()
	VMOVSS(x, xd)
	VMULSS(f16w, xd, xd) // y.d·FP16(x.d)
	VBROADCASTSS(xd, yd)
	VCVTDQ2PS(sumi, f)
	VFMADD231PS(f, yd, acc)
}

// rows4Q4K emits rows4Q4_KAVX2. The four min accumulators (acc_m of q4KDot, four lanes
// each) live on the stack: they take one FMA per super-block, and the registers hold
// the eight-lane accumulators and the levels.
func rows4Q4K() {
	var sm, accm Mem
	zero := func() {
		z := XMM()
		VXORPS(z, z, z)
		for a := 0; a < 4; a++ {
			VMOVUPS(z, accm.Offset(16*a))
		}
	}
	block := func(wp reg.Register, xs [4]Mem, acc [4]reg.VecVirtual) {
		smw := k4ScaleMins(wp, sm)
		mins := XMM()
		VEXTRACTI128(Imm(1), smw, mins)
		fd, fdm := f16ToScalar(Mem{Base: wp}), f16ToScalar(Mem{Base: wp, Disp: 2})
		// acc_m = fma(−x.d·f16(w.dmin), float32(mins · bsum pairs), acc_m)
		for a, x := range xs {
			bs, q8s := XMM(), XMM()
			VMOVDQU(x.Offset(4+256), bs)
			VPHADDW(x.Offset(4+256+16), bs, q8s)
			VPMADDWD(mins, q8s, q8s)
			VCVTDQ2PS(q8s, q8s)
			dm, am := XMM(), XMM()
			VMOVSS(x, dm)
			VMULSS(fdm, dm, dm)
			VXORPS(signBit, dm, dm)
			VBROADCASTSS(dm, dm)
			VMOVUPS(accm.Offset(16*a), am)
			VFMADD231PS(q8s, dm, am)
			VMOVUPS(am, accm.Offset(16*a))
		}
		var sumi [4]reg.VecVirtual
		for a := range sumi {
			sumi[a] = YMM()
			VPXOR(sumi[a], sumi[a], sumi[a])
		}
		for j := 0; j < 4; j++ {
			q, hi := YMM(), YMM()
			VMOVDQU(Mem{Base: wp, Disp: 16 + 32*j}, q)
			VPSRLW(Imm(4), q, hi)
			VPAND(mask0F, q, q)
			VPAND(mask0F, hi, hi)
			for half, v := range []reg.VecVirtual{q, hi} {
				sc := YMM()
				VPBROADCASTW(sm.Offset(2*(2*j+half)), sc)
				for a, x := range xs {
					p := YMM()
					VPMADDUBSW(x.Offset(4+64*j+32*half), v, p)
					VPMADDWD(sc, p, p)
					VPADDD(p, sumi[a], sumi[a])
				}
			}
		}
		for a, x := range xs {
			fmaSumi(acc[a], sumi[a], fd, x)
		}
	}
	// acc.sum() + ((m0 + m2) + (m1 + m3)), as dotQ4_KSIMD.
	store := func(acc [4]reg.VecVirtual, outs [4]Mem) {
		for a, o := range outs {
			hsumStore(acc[a], o)
			m, h, s := XMM(), XMM(), XMM()
			VMOVUPS(accm.Offset(16*a), m)
			VMOVHLPS(m, m, h)
			VADDPS(h, m, m) // [m0+m2, m1+m3]
			VMOVSHDUP(m, h)
			VADDSS(h, m, m)
			VMOVSS(o, s)
			VADDSS(m, s, s)
			VMOVSS(s, o)
		}
	}
	// The locals must be allocated inside the TEXT: rowsK calls zero, block and store
	// after it, so allocate them lazily on first use.
	alloc := func() {
		sm = AllocLocal(32)
		accm = AllocLocal(64)
	}
	rowsK("rows4Q4_KAVX2", 144, func() { alloc(); zero() }, block, store)
}

// rows4Q6K emits rows4Q6_KAVX2 (q6KDot's super-block for four activation rows).
func rows4Q6K() {
	var sc Mem
	block := func(wp reg.Register, xs [4]Mem, acc [4]reg.VecVirtual) {
		s16 := YMM()
		VPMOVSXBW(Mem{Base: wp, Disp: 192}, s16)
		VMOVDQU(s16, sc)
		var sumi [4]reg.VecVirtual
		for a := range sumi {
			sumi[a] = YMM()
			VPXOR(sumi[a], sumi[a], sumi[a])
		}
		for j := 0; j < 2; j++ {
			qh, ql0, ql1 := YMM(), YMM(), YMM()
			VMOVDQU(Mem{Base: wp, Disp: 128 + 32*j}, qh)
			VMOVDQU(Mem{Base: wp, Disp: 64 * j}, ql0)
			VMOVDQU(Mem{Base: wp, Disp: 64*j + 32}, ql1)
			for k := 0; k < 4; k++ {
				q := q6KQuants(k, ql0, ql1, qh)
				s := halfScales(sc, 8*j+2*k)
				for a, x := range xs {
					p := YMM()
					VPMADDUBSW(x.Offset(4+128*j+32*k), q, p)
					VPMADDWD(s, p, p)
					VPADDD(p, sumi[a], sumi[a])
				}
			}
		}
		// sumi −= (bsums · scales pairs) << 5, as q6KDot.
		fd := f16ToScalar(Mem{Base: wp, Disp: 208})
		VMOVDQU(sc, s16)
		for a, x := range xs {
			bsub := YMM()
			VPMADDWD(x.Offset(4+256), s16, bsub)
			VPSLLD(Imm(5), bsub, bsub)
			VPSUBD(bsub, sumi[a], sumi[a])
			fmaSumi(acc[a], sumi[a], fd, x)
		}
	}
	store := func(acc [4]reg.VecVirtual, outs [4]Mem) {
		for a, o := range outs {
			hsumStore(acc[a], o)
		}
	}
	rowsK("rows4Q6_KAVX2", 210, func() { sc = AllocLocal(32) }, block, store)
}
