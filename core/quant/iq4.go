package quant

import "encoding/binary"

// The 4-bit non-linear formats of ggml-common.h: each 4-bit index selects one of the 16
// levels of iq4Levels (denser near zero, where most weights lie), times a scale.
//
//	block_iq4_nl { f16 d; u8 qs[16] }                                  32 values; nibble j: value j (low), j+16 (high); x = d*level
//	block_iq4_xs { f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128] }   256 values in 8 groups of 32; group g has the 6-bit
//	                                                                   scale ls = (scales_l[g/2] nibble g%2) | (scales_h bits 2g..2g+1)<<4;
//	                                                                   x = d*(ls-32)*level, nibbles as IQ4_NL per group
//
// The dots run against Q8_0 (IQ4_NL) and Q8_K (IQ4_XS) activations.
const (
	iq4NLBytes = 2 + qk/2
	iq4XSBytes = 2 + 2 + QK_K/64 + QK_K/2
)

// iq4Levels are the 16 levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl), ascending.
var iq4Levels = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func init() {
	checkBlockBytes(IQ4_NL, qk, iq4NLBytes)
	checkBlockBytes(IQ4_XS, QK_K, iq4XSBytes)
	setConv(IQ4_NL, dequantIQ4_NL, quantizeIQ4_NL)
	setConv(IQ4_XS, dequantIQ4_XS, quantizeIQ4_XS)
	setDot(IQ4_NL, Q8_0, dotIQ4_NL, nil)
	setDot(IQ4_XS, Q8_K, dotIQ4_XS, nil)
}

// iq4Value is the level of value j (0..31) of a 16-byte nibble group.
func iq4Value(qs []byte, j int) int32 {
	if j < 16 {
		return int32(iq4Levels[qs[j]&0xf])
	}
	return int32(iq4Levels[qs[j-16]>>4])
}

// iq4XSScale is the signed 6-bit scale (ls-32) of group g of an IQ4_XS block.
func iq4XSScale(b []byte, g int) int32 {
	sh := binary.LittleEndian.Uint16(b[2:])
	lo := int32(b[4+g/2]>>(4*(g%2))) & 0xf
	hi := int32(sh>>(2*g)) & 3
	return lo | hi<<4 - 32
}

func dequantIQ4_NL(dst []float32, src []byte) {
	for i := 0; i < len(dst)/qk; i++ {
		b := src[i*iq4NLBytes : (i+1)*iq4NLBytes]
		d := f16At(b)
		y := dst[i*qk : (i+1)*qk]
		for j := range y {
			y[j] = d * float32(iq4Value(b[2:], j))
		}
	}
}

func dequantIQ4_XS(dst []float32, src []byte) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[i*iq4XSBytes : (i+1)*iq4XSBytes]
		d := f16At(b)
		for g := 0; g < QK_K/32; g++ {
			dl := d * float32(iq4XSScale(b, g))
			qs := b[8+16*g:]
			y := dst[i*QK_K+32*g : i*QK_K+32*g+32]
			for j := range y {
				y[j] = dl * float32(iq4Value(qs, j))
			}
		}
	}
}

// dotIQ4_NL is ggml's AVX2 kernel: blocks alternate between two eight-lane accumulators
// (even blocks, odd blocks), added lane-wise before the final sum; a last odd block is
// added to the total as sumf += d·sumi, fused (GCC contracts it in ggml's build, as
// it does RoPE's products: see core/backend/cpu/attention.go).
func dotIQ4_NL(n int, w, x []byte) float32 {
	var acc [2]lanes8
	nb := n / qk
	for b := 0; b < nb&^1; b++ {
		wb, xb := w[b*iq4NLBytes:(b+1)*iq4NLBytes], x[b*q8_0Bytes:(b+1)*q8_0Bytes]
		var l laneInts
		l.addLanes(func(j int) int32 { return iq4Value(wb[2:], j) }, xb[2:], 1)
		acc[b&1].fmaLanes(f16At(xb)*f16At(wb), &l)
	}
	var sum lanes8
	for k := range sum {
		sum[k] = acc[0][k] + acc[1][k]
	}
	s := sum.sum()
	if nb%2 == 1 {
		b := nb - 1
		wb, xb := w[b*iq4NLBytes:(b+1)*iq4NLBytes], x[b*q8_0Bytes:(b+1)*q8_0Bytes]
		var si int32
		for j := 0; j < qk; j++ {
			si += iq4Value(wb[2:], j) * int32(int8(xb[2+j]))
		}
		s = fma32(f16At(xb)*f16At(wb), float32(si), s)
	}
	return s
}

// dotIQ4_XS: per super-block the lanes of its eight groups, each times its scale, then
// one fma with f16(w.d)·x.d (ggml's AVX2 kernel).
func dotIQ4_XS(n int, w, x []byte) float32 {
	var acc lanes8
	for b := 0; b < n/QK_K; b++ {
		wb, xb := w[b*iq4XSBytes:(b+1)*iq4XSBytes], x[b*q8_KBytes:(b+1)*q8_KBytes]
		xq := q8KQs(xb)
		var l laneInts
		for g := 0; g < QK_K/32; g++ {
			qs := wb[8+16*g:]
			l.addLanes(func(j int) int32 { return iq4Value(qs, j) }, xq[32*g:], iq4XSScale(wb, g))
		}
		acc.fmaLanes(f16At(wb)*q8KD(xb), &l)
	}
	return acc.sum()
}
