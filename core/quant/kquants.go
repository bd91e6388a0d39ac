package quant

import (
	"encoding/binary"
	"math"
)

// The K-quant super-block formats of ggml-common.h (QK_K = 256 values per block):
//
//	block_q2_K { u8 scales[16]; u8 qs[64]; f16 d, dmin }              16 groups of 16; 4-bit scale | 4-bit min
//	block_q3_K { u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d }      16 groups of 16; 6-bit signed scales
//	block_q4_K { f16 d, dmin; u8 scales[12]; u8 qs[128] }             8 groups of 32; 6-bit scale and min
//	block_q5_K { f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128] }  as Q4_K plus a fifth bit
//	block_q6_K { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }        16 groups of 16; x = d*sc*(q-32)
//	block_q8_K { f32 d; i8 qs[256]; i16 bsums[16] }                   the activation format of K-quant dots
const (
	q2_KBytes = QK_K/16 + QK_K/4 + 4
	q3_KBytes = QK_K/8 + QK_K/4 + 12 + 2
	q4_KBytes = 4 + 12 + QK_K/2
	q5_KBytes = 4 + 12 + QK_K/8 + QK_K/2
	q6_KBytes = QK_K/2 + QK_K/4 + QK_K/16 + 2
	q8_KBytes = 4 + QK_K + 2*QK_K/16
)

func init() {
	checkBlockBytes(Q2_K, QK_K, q2_KBytes)
	checkBlockBytes(Q3_K, QK_K, q3_KBytes)
	checkBlockBytes(Q4_K, QK_K, q4_KBytes)
	checkBlockBytes(Q5_K, QK_K, q5_KBytes)
	checkBlockBytes(Q6_K, QK_K, q6_KBytes)
	checkBlockBytes(Q8_K, QK_K, q8_KBytes)
	setConv(Q2_K, dequantQ2_K, quantizeQ2_K)
	setConv(Q3_K, dequantQ3_K, quantizeQ3_K)
	setConv(Q4_K, dequantQ4_K, quantizeQ4_K)
	setConv(Q5_K, dequantQ5_K, quantizeQ5_K)
	setConv(Q6_K, dequantQ6_K, quantizeQ6_K)
	setConv(Q8_K, dequantQ8_K, quantizeQ8_K)
}

// scaleMinK4 unpacks the 6-bit scale and min of group j (0..7) from the 12 packed
// scale bytes of a Q4_K/Q5_K block (ggml's get_scale_min_k4).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

func dequantQ2_K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[i*q2_KBytes : (i+1)*q2_KBytes]
		scales, q := b[:16], b[16:80]
		d, dmin := f16At(b[80:]), f16At(b[82:])
		y := dst[i*QK_K : (i+1)*QK_K]
		is := 0
		for n := 0; n < QK_K; n += 128 {
			for shift := 0; shift < 8; shift += 2 {
				for half := 0; half < 2; half++ {
					sc := scales[is]
					is++
					dl, ml := d*float32(sc&0xf), dmin*float32(sc>>4)
					qq := q[16*half : 16*half+16]
					for l := 0; l < 16; l++ {
						y[l] = dl*float32((qq[l]>>shift)&3) - ml
					}
					y = y[16:]
				}
			}
			q = q[32:]
		}
	}
}

// q3Scales unpacks the sixteen 6-bit Q3_K scales (still biased by 32).
func q3Scales(s []byte) [16]int8 {
	const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
	a0 := binary.LittleEndian.Uint32(s)
	a1 := binary.LittleEndian.Uint32(s[4:])
	tmp := binary.LittleEndian.Uint32(s[8:])
	var aux [4]uint32
	aux[2] = (a0>>4)&kmask2 | ((tmp>>4)&kmask1)<<4
	aux[3] = (a1>>4)&kmask2 | ((tmp>>6)&kmask1)<<4
	aux[0] = a0&kmask2 | ((tmp>>0)&kmask1)<<4
	aux[1] = a1&kmask2 | ((tmp>>2)&kmask1)<<4
	var out [16]int8
	for k, a := range aux {
		for j := 0; j < 4; j++ {
			out[4*k+j] = int8(a >> (8 * j))
		}
	}
	return out
}

func dequantQ3_K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[i*q3_KBytes : (i+1)*q3_KBytes]
		hm, q := b[:32], b[32:96]
		scales := q3Scales(b[96:108])
		dAll := f16At(b[108:])
		y := dst[i*QK_K : (i+1)*QK_K]
		is := 0
		m := byte(1)
		for n := 0; n < QK_K; n += 128 {
			for shift := 0; shift < 8; shift += 2 {
				for half := 0; half < 2; half++ {
					dl := dAll * float32(int(scales[is])-32)
					is++
					for l := 16 * half; l < 16*half+16; l++ {
						v := int((q[l] >> shift) & 3)
						if hm[l]&m == 0 {
							v -= 4
						}
						y[l-16*half] = dl * float32(v)
					}
					y = y[16:]
				}
				m <<= 1
			}
			q = q[32:]
		}
	}
}

func dequantQ4_K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[i*q4_KBytes : (i+1)*q4_KBytes]
		d, dmin := f16At(b), f16At(b[2:])
		scales, q := b[4:16], b[16:]
		y := dst[i*QK_K : (i+1)*QK_K]
		for is := 0; is < 8; is += 2 {
			sc, m := scaleMinK4(is, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			for l := 0; l < 32; l++ {
				y[l] = d1*float32(q[l]&0xf) - m1
				y[l+32] = d2*float32(q[l]>>4) - m2
			}
			y, q = y[64:], q[32:]
		}
	}
}

func dequantQ5_K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[i*q5_KBytes : (i+1)*q5_KBytes]
		d, dmin := f16At(b), f16At(b[2:])
		scales, qh, ql := b[4:16], b[16:48], b[48:]
		y := dst[i*QK_K : (i+1)*QK_K]
		u1, u2 := byte(1), byte(2)
		for is := 0; is < 8; is += 2 {
			sc, m := scaleMinK4(is, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			for l := 0; l < 32; l++ {
				lo, hi := ql[l]&0xf, ql[l]>>4
				if qh[l]&u1 != 0 {
					lo += 16
				}
				if qh[l]&u2 != 0 {
					hi += 16
				}
				y[l] = d1*float32(lo) - m1
				y[l+32] = d2*float32(hi) - m2
			}
			y, ql = y[64:], ql[32:]
			u1 <<= 2
			u2 <<= 2
		}
	}
}

func dequantQ6_K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[i*q6_KBytes : (i+1)*q6_KBytes]
		ql, qh, sc := b[:128], b[128:192], b[192:208]
		d := f16At(b[208:])
		y := dst[i*QK_K : (i+1)*QK_K]
		for n := 0; n < QK_K; n += 128 {
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := int(ql[l]&0xf|((qh[l]>>0)&3)<<4) - 32
				q2 := int(ql[l+32]&0xf|((qh[l]>>2)&3)<<4) - 32
				q3 := int(ql[l]>>4|((qh[l]>>4)&3)<<4) - 32
				q4 := int(ql[l+32]>>4|((qh[l]>>6)&3)<<4) - 32
				y[l] = d * float32(int8(sc[is])) * float32(q1)
				y[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				y[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				y[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
			y, ql, qh, sc = y[128:], ql[64:], qh[32:], sc[8:]
		}
	}
}

func dequantQ8_K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[i*q8_KBytes : (i+1)*q8_KBytes]
		d := math.Float32frombits(binary.LittleEndian.Uint32(b))
		y := dst[i*QK_K : (i+1)*QK_K]
		for j := range y {
			y[j] = d * float32(int8(b[4+j]))
		}
	}
}
