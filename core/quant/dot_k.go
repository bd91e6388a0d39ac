package quant

import (
	"encoding/binary"
	"math"
)

// K-quant · Q8_K dots in the operation order of ggml's AVX2 kernels (see dot.go): per
// super-block an eight-lane integer vector sumi (lane k sums bytes 4k..4k+3 of every
// 32-value chunk, each chunk's 16-value halves times their scales), then
// acc[k] = fma(d, float32(sumi_k), acc[k]) with d = x.d·f16(w.d). The mins enter as in
// ggml: Q2_K fmas −x.d·f16(w.dmin)·(min·bsum pairs) into the same lanes first; Q4_K keeps
// a four-lane acc_m added at the end; Q5_K a scalar sum added at the end.

// q8KD is the float32 scale of a Q8_K block.
func q8KD(xb []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(xb)) }

// q8KBsum is the sum of Q8_K group g (16 values).
func q8KBsum(xb []byte, g int) int32 {
	return int32(int16(binary.LittleEndian.Uint16(xb[4+QK_K+2*g:])))
}

func q8KQs(xb []byte) []byte { return xb[4 : 4+QK_K] }

// chunkLanes adds to l the lanes of one 32-value chunk whose first 16 values have scale
// s0 and last 16 scale s1: lane k (bytes 4k..4k+3) uses s0 for k < 4, s1 otherwise.
func (l *laneInts) chunkLanes(wv func(j int) int32, x []byte, s0, s1 int32) {
	for k := 0; k < 8; k++ {
		var s int32
		for j := 4 * k; j < 4*k+4; j++ {
			s += wv(j) * int32(int8(x[j]))
		}
		if k < 4 {
			l[k] += s0 * s
		} else {
			l[k] += s1 * s
		}
	}
}

func dotQ2_K(n int, w, x []byte) float32 {
	var acc lanes8
	for b := 0; b < n/QK_K; b++ {
		wb, xb := w[b*q2_KBytes:(b+1)*q2_KBytes], x[b*q8_KBytes:(b+1)*q8_KBytes]
		sc, q := wb[:16], wb[16:80]
		xd := q8KD(xb)
		d := xd * f16At(wb[80:])
		dmin := -xd * f16At(wb[82:])
		var prod laneInts
		for k := 0; k < 8; k++ {
			prod[k] = int32(sc[2*k]>>4)*q8KBsum(xb, 2*k) + int32(sc[2*k+1]>>4)*q8KBsum(xb, 2*k+1)
		}
		acc.fmaLanes(dmin, &prod)
		var sumi laneInts
		xq := q8KQs(xb)
		for j := 0; j < 2; j++ {
			for k := 0; k < 4; k++ {
				g := 8*j + 2*k
				sumi.chunkLanes(func(i int) int32 { return int32(q[32*j+i]>>(2*k)) & 3 },
					xq[128*j+32*k:], int32(sc[g]&0xf), int32(sc[g+1]&0xf))
			}
		}
		acc.fmaLanes(d, &sumi)
	}
	return acc.sum()
}

func dotQ3_K(n int, w, x []byte) float32 {
	var acc lanes8
	for b := 0; b < n/QK_K; b++ {
		wb, xb := w[b*q3_KBytes:(b+1)*q3_KBytes], x[b*q8_KBytes:(b+1)*q8_KBytes]
		hm, q := wb[:32], wb[32:96]
		sc := q3Scales(wb[96:108])
		d := q8KD(xb) * f16At(wb[108:])
		xq := q8KQs(xb)
		var sumi laneInts
		for j := 0; j < 2; j++ {
			for k := 0; k < 4; k++ {
				g := 8*j + 2*k
				mask := byte(1) << (4*j + k)
				sumi.chunkLanes(func(i int) int32 {
					v := int32(q[32*j+i]>>(2*k)) & 3
					if hm[i]&mask == 0 {
						v -= 4
					}
					return v
				}, xq[128*j+32*k:], int32(sc[g])-32, int32(sc[g+1])-32)
			}
		}
		acc.fmaLanes(d, &sumi)
	}
	return acc.sum()
}

// k4Scales unpacks the eight 6-bit scales and mins of a Q4_K/Q5_K block.
func k4Scales(s []byte) (sc, mn [8]int32) {
	for g := 0; g < 8; g++ {
		a, m := scaleMinK4(g, s)
		sc[g], mn[g] = int32(a), int32(m)
	}
	return sc, mn
}

// k4MinProd are ggml's four min lanes: lane i = m_2i·(bsum pair 2i) + m_2i+1·(pair 2i+1).
func k4MinProd(mn *[8]int32, xb []byte) [4]int32 {
	var p [4]int32
	for i := 0; i < 4; i++ {
		for h := 0; h < 2; h++ {
			g := 2*i + h
			p[i] += mn[g] * (q8KBsum(xb, 2*g) + q8KBsum(xb, 2*g+1))
		}
	}
	return p
}

// q4KLanes are the eight sumi lanes of a Q4_K super-block.
func q4KLanes(wb, xb []byte, sc *[8]int32) laneInts {
	q, xq := wb[16:144], q8KQs(xb)
	var l laneInts
	for j := 0; j < 4; j++ {
		l.chunkLanes(func(i int) int32 { return int32(q[32*j+i] & 0xf) }, xq[64*j:], sc[2*j], sc[2*j])
		l.chunkLanes(func(i int) int32 { return int32(q[32*j+i] >> 4) }, xq[64*j+32:], sc[2*j+1], sc[2*j+1])
	}
	return l
}

func dotQ4_K(n int, w, x []byte) float32 {
	var acc lanes8
	var accM [4]float32
	for b := 0; b < n/QK_K; b++ {
		wb, xb := w[b*q4_KBytes:(b+1)*q4_KBytes], x[b*q8_KBytes:(b+1)*q8_KBytes]
		xd := q8KD(xb)
		d := xd * f16At(wb)
		dmin := -xd * f16At(wb[2:])
		sc, mn := k4Scales(wb[4:16])
		prod := k4MinProd(&mn, xb)
		for i := range accM {
			accM[i] = fma32(dmin, float32(prod[i]), accM[i])
		}
		l := q4KLanes(wb, xb, &sc)
		acc.fmaLanes(d, &l)
	}
	return acc.sum() + ((accM[0] + accM[2]) + (accM[1] + accM[3]))
}

// dotQ5_K adds dmin·Σ(min·bsums) to a scalar sum (ggml's summs), fused as GCC
// contracts summs += dmin*x in ggml's build (vfmadd231ss).
func dotQ5_K(n int, w, x []byte) float32 {
	var acc lanes8
	var summs float32
	for b := 0; b < n/QK_K; b++ {
		wb, xb := w[b*q5_KBytes:(b+1)*q5_KBytes], x[b*q8_KBytes:(b+1)*q8_KBytes]
		xd := q8KD(xb)
		d := xd * f16At(wb)
		dmin := -xd * f16At(wb[2:])
		sc, mn := k4Scales(wb[4:16])
		p := k4MinProd(&mn, xb)
		summs = fma32(dmin, float32((p[0]+p[1])+(p[2]+p[3])), summs)
		qh, q, xq := wb[16:48], wb[48:176], q8KQs(xb)
		var l laneInts
		for j := 0; j < 4; j++ {
			l.chunkLanes(func(i int) int32 { return int32(q[32*j+i]&0xf) | int32(qh[i]>>(2*j)&1)<<4 },
				xq[64*j:], sc[2*j], sc[2*j])
			l.chunkLanes(func(i int) int32 { return int32(q[32*j+i]>>4) | int32(qh[i]>>(2*j+1)&1)<<4 },
				xq[64*j+32:], sc[2*j+1], sc[2*j+1])
		}
		acc.fmaLanes(d, &l)
	}
	return acc.sum() + summs
}

// q6KLanes are the eight sumi lanes of a Q6_K super-block as ggml's AVX2 kernel (since
// 2026) forms them: the unsigned levels 0..63 times the activations, lane k holding bytes
// 4k..4k+3 of every chunk, then the level bias subtracted once per super-block, lane k
// taking 32·(s_2k·bsum_2k + s_2k+1·bsum_2k+1) (the groups of chunk k). The total is that
// of Σ (q−32)·x, but its split over the lanes (and so the float rounding) differs from
// subtracting 32·x chunk by chunk; llama.cpp's Q6_K goldens need this split.
func q6KLanes(wb, xb []byte) laneInts {
	ql, qh, sc := wb[:128], wb[128:192], wb[192:208]
	xq := q8KQs(xb)
	var l laneInts
	for j := 0; j < 2; j++ {
		for k := 0; k < 4; k++ {
			g := 8*j + 2*k
			l.chunkLanes(func(i int) int32 {
				lo := ql[64*j+32*(k&1)+i]
				if k >= 2 {
					lo >>= 4
				}
				return int32(lo&0xf | (qh[32*j+i]>>(2*k)&3)<<4)
			}, xq[128*j+32*k:], int32(int8(sc[g])), int32(int8(sc[g+1])))
		}
	}
	for k := 0; k < 8; k++ {
		l[k] -= 32 * (int32(int8(sc[2*k]))*q8KBsum(xb, 2*k) + int32(int8(sc[2*k+1]))*q8KBsum(xb, 2*k+1))
	}
	return l
}

func dotQ6_K(n int, w, x []byte) float32 {
	var acc lanes8
	for b := 0; b < n/QK_K; b++ {
		wb, xb := w[b*q6_KBytes:(b+1)*q6_KBytes], x[b*q8_KBytes:(b+1)*q8_KBytes]
		l := q6KLanes(wb, xb)
		acc.fmaLanes(q8KD(xb)*f16At(wb[208:]), &l)
	}
	return acc.sum()
}
