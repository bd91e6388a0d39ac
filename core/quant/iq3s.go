package quant

// IQ3_S (ggml-common.h), 256 values in 8 groups of 32, 3.44 bits per value:
//
//	block_iq3_s { f16 d; u8 qs[64]; u8 qh[8]; u8 signs[32]; u8 scales[4] }
//
// Group g's values come in eight runs of four: run r takes its four magnitudes from
// iq3SGrid[qs[8g+r] | (bit r of qh[g])<<8]; value j of the group is negative when bit
// j%8 of signs[4g+j/8] is set; the group's scale is d·(1+2·s) with s the nibble g%2 of
// scales[g/2]. The dot runs against Q8_K activations; the quantizer is in
// iq3squantize.go.
const iq3SBytes = 2 + QK_K/4 + QK_K/32 + QK_K/8 + QK_K/64

func init() {
	checkBlockBytes(IQ3_S, QK_K, iq3SBytes)
	setConv(IQ3_S, dequantIQ3_S, quantizeIQ3_S)
	setDot(IQ3_S, Q8_K, dotIQ3_S, nil)
}

// iq3SMag is the magnitude (1..15) and sign of value j of group g of block b.
func iq3SMag(b []byte, g, j int) (mag int32, neg bool) {
	r := j / 4
	idx := int(b[2+8*g+r]) | int(b[66+g]>>r&1)<<8
	mag = int32(iq3SGrid[idx] >> (8 * (j % 4)) & 0xff)
	neg = b[74+4*g+j/8]>>(j%8)&1 != 0
	return mag, neg
}

// iq3SScale is the odd scale 1+2s of group g of block b.
func iq3SScale(b []byte, g int) int32 {
	return 1 + 2*int32(b[106+g/2]>>(4*(g%2))&0xf)
}

func dequantIQ3_S(dst []float32, src []byte) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[i*iq3SBytes : (i+1)*iq3SBytes]
		d := f16At(b)
		for g := 0; g < QK_K/32; g++ {
			db := d * float32(iq3SScale(b, g))
			y := dst[i*QK_K+32*g : i*QK_K+32*g+32]
			for j := range y {
				mag, neg := iq3SMag(b, g, j)
				y[j] = db * float32(mag)
				if neg {
					y[j] = -y[j]
				}
			}
		}
	}
}

// dotIQ3_S is ggml's AVX2 kernel: the signs are applied to the activations (an int8
// negation, which wraps -128 to itself), the magnitudes times those summed in the eight
// lanes of each group, times the group's odd scale, then one fma per super-block with
// f16(w.d)·x.d.
func dotIQ3_S(n int, w, x []byte) float32 {
	var acc lanes8
	for b := 0; b < n/QK_K; b++ {
		wb, xb := w[b*iq3SBytes:(b+1)*iq3SBytes], x[b*q8_KBytes:(b+1)*q8_KBytes]
		xq := q8KQs(xb)
		var l laneInts
		for g := 0; g < QK_K/32; g++ {
			xg := xq[32*g : 32*g+32]
			sc := iq3SScale(wb, g)
			for k := 0; k < 8; k++ {
				var s int32
				for j := 4 * k; j < 4*k+4; j++ {
					mag, neg := iq3SMag(wb, g, j)
					q := int8(xg[j])
					if neg {
						q = -q
					}
					s += mag * int32(q)
				}
				l[k] += sc * s
			}
		}
		acc.fmaLanes(f16At(wb)*q8KD(xb), &l)
	}
	return acc.sum()
}
