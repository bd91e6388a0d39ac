package quant

import (
	"encoding/binary"
	"math"
)

// K-quant · Q8_K dots. Each super-block contributes d·isum − dmin·summs (float32, in that
// order), where isum is the exact integer Σ scale_g·Σ q·x over its groups, summs the
// exact Σ min_g·(Q8_K group sums), d = f16(w.d)·x.d and dmin = f16(w.dmin)·x.d.

// q8KD is the float32 scale of a Q8_K block.
func q8KD(xb []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(xb)) }

// q8KBsum is the sum of Q8_K group g (16 values).
func q8KBsum(xb []byte, g int) int32 {
	return int32(int16(binary.LittleEndian.Uint16(xb[4+QK_K+2*g:])))
}

// kDotFunc computes the integer parts of one super-block.
type kDotFunc func(wb, xb []byte) (isum, summs int32)

func kDot(n int, w, x []byte, wBytes int, ints kDotFunc, dmin bool, dOff int) float32 {
	var acc lanes8
	for b := 0; b < n/QK_K; b++ {
		wb, xb := w[b*wBytes:(b+1)*wBytes], x[b*q8_KBytes:(b+1)*q8_KBytes]
		isum, summs := ints(wb, xb)
		acc[b%8] += kBlockValue(wb, xb, isum, summs, dmin, dOff)
	}
	return acc.sum()
}

// kBlockValue is a super-block's float32 partial from its integer parts. dOff is the
// offset of the f16 d in the weight block; dmin (if the format has one) follows it.
func kBlockValue(wb, xb []byte, isum, summs int32, hasMin bool, dOff int) float32 {
	xd := q8KD(xb)
	d := float32(f16At(wb[dOff:]) * xd)
	if !hasMin {
		return float32(d * float32(isum))
	}
	dm := float32(f16At(wb[dOff+2:]) * xd)
	return float32(d*float32(isum)) - float32(dm*float32(summs))
}

func q8KQs(xb []byte) []byte { return xb[4 : 4+QK_K] }

func q2KInts(wb, xb []byte) (isum, summs int32) {
	sc, q := wb[:16], wb[16:80]
	xq := q8KQs(xb)
	for g := 0; g < 16; g++ {
		summs += q8KBsum(xb, g) * int32(sc[g]>>4)
	}
	for e0 := 0; e0 < QK_K; e0 += 16 {
		k, j, l0 := e0/128, (e0%128)/32, e0%32
		var s int32
		for l := l0; l < l0+16; l++ {
			s += int32((q[32*k+l]>>(2*j))&3) * int32(int8(xq[128*k+32*j+l]))
		}
		isum += s * int32(sc[e0/16]&0xf)
	}
	return isum, summs
}

func q3KInts(wb, xb []byte) (isum, summs int32) {
	hm, q := wb[:32], wb[32:96]
	scales := q3Scales(wb[96:108])
	xq := q8KQs(xb)
	for e0 := 0; e0 < QK_K; e0 += 16 {
		k, j, l0 := e0/128, (e0%128)/32, e0%32
		mask := byte(1) << (4*k + j)
		var s int32
		for l := l0; l < l0+16; l++ {
			v := int32((q[32*k+l] >> (2 * j)) & 3)
			if hm[l]&mask == 0 {
				v -= 4
			}
			s += v * int32(int8(xq[128*k+32*j+l]))
		}
		isum += s * (int32(scales[e0/16]) - 32)
	}
	return isum, 0
}

// k4Mins is Σ min_g·(bsum_2g + bsum_2g+1) for the Q4_K/Q5_K 6-bit mins.
func k4Mins(scales, xb []byte) int32 {
	var summs int32
	for g := 0; g < 8; g++ {
		_, m := scaleMinK4(g, scales)
		summs += int32(m) * (q8KBsum(xb, 2*g) + q8KBsum(xb, 2*g+1))
	}
	return summs
}

func q4KInts(wb, xb []byte) (isum, summs int32) {
	scales, q := wb[4:16], wb[16:144]
	xq := q8KQs(xb)
	for j := 0; j < 4; j++ {
		sc1, _ := scaleMinK4(2*j, scales)
		sc2, _ := scaleMinK4(2*j+1, scales)
		var s1, s2 int32
		for l := 0; l < 32; l++ {
			s1 += int32(q[32*j+l]&0xf) * int32(int8(xq[64*j+l]))
			s2 += int32(q[32*j+l]>>4) * int32(int8(xq[64*j+32+l]))
		}
		isum += int32(sc1)*s1 + int32(sc2)*s2
	}
	return isum, k4Mins(scales, xb)
}

func q5KInts(wb, xb []byte) (isum, summs int32) {
	scales, qh, q := wb[4:16], wb[16:48], wb[48:176]
	xq := q8KQs(xb)
	for j := 0; j < 4; j++ {
		sc1, _ := scaleMinK4(2*j, scales)
		sc2, _ := scaleMinK4(2*j+1, scales)
		var s1, s2 int32
		for l := 0; l < 32; l++ {
			lo := int32(q[32*j+l]&0xf) | int32(qh[l]>>(2*j)&1)<<4
			hi := int32(q[32*j+l]>>4) | int32(qh[l]>>(2*j+1)&1)<<4
			s1 += lo * int32(int8(xq[64*j+l]))
			s2 += hi * int32(int8(xq[64*j+32+l]))
		}
		isum += int32(sc1)*s1 + int32(sc2)*s2
	}
	return isum, k4Mins(scales, xb)
}

func q6KInts(wb, xb []byte) (isum, summs int32) {
	ql, qh, sc := wb[:128], wb[128:192], wb[192:208]
	xq := q8KQs(xb)
	var g [16]int32
	for n := 0; n < 2; n++ {
		for l := 0; l < 32; l++ {
			h := qh[32*n+l]
			a, c := ql[64*n+l], ql[64*n+l+32]
			q1 := int32(a&0xf|(h&3)<<4) - 32
			q2 := int32(c&0xf|(h>>2&3)<<4) - 32
			q3 := int32(a>>4|(h>>4&3)<<4) - 32
			q4 := int32(c>>4|(h>>6&3)<<4) - 32
			base := 128*n + l
			g[(base)/16] += q1 * int32(int8(xq[base]))
			g[(base+32)/16] += q2 * int32(int8(xq[base+32]))
			g[(base+64)/16] += q3 * int32(int8(xq[base+64]))
			g[(base+96)/16] += q4 * int32(int8(xq[base+96]))
		}
	}
	for k, s := range g {
		isum += s * int32(int8(sc[k]))
	}
	return isum, 0
}

func dotQ2_K(n int, w, x []byte) float32 { return kDot(n, w, x, q2_KBytes, q2KInts, true, 80) }
func dotQ3_K(n int, w, x []byte) float32 { return kDot(n, w, x, q3_KBytes, q3KInts, false, 108) }
func dotQ4_K(n int, w, x []byte) float32 { return kDot(n, w, x, q4_KBytes, q4KIntsFn, true, 0) }
func dotQ5_K(n int, w, x []byte) float32 { return kDot(n, w, x, q5_KBytes, q5KInts, true, 0) }
func dotQ6_K(n int, w, x []byte) float32 { return kDot(n, w, x, q6_KBytes, q6KIntsFn, false, 208) }

// The kernels the SIMD code may replace at init.
var (
	q4KIntsFn kDotFunc = q4KInts
	q6KIntsFn kDotFunc = q6KInts
)
