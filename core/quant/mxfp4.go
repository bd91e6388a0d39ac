package quant

import "math"

// MXFP4 (OCP microscaling FP4, ggml-common.h), 32 values per block:
//
//	block_mxfp4 { u8 e; u8 qs[16] }   nibble j: value j (low), j+16 (high); x = fp4Levels[q]·2^(e-128)
//
// The levels are the E2M1 values doubled (so they are integers) and the E8M0 scale is
// halved to match: 2^(e-127)/2. The dot runs against Q8_0 activations.
const mxfp4Bytes = 1 + qk/2

// fp4Levels are the sixteen E2M1 codes times two (ggml's kvalues_mxfp4): sign bit 3.
var fp4Levels = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

func init() {
	checkBlockBytes(MXFP4, qk, mxfp4Bytes)
	setConv(MXFP4, dequantMXFP4, quantizeMXFP4)
	setDot(MXFP4, Q8_0, dotMXFP4, nil)
}

// e8m0Half is 2^(e-128), the E8M0 scale halved (ggml's GGML_E8M0_TO_FP32_HALF); e 0 and 1
// give the subnormals 2^-128 and 2^-127.
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// fp4Value is the level of value j (0..31) of a 16-byte nibble group.
func fp4Value(qs []byte, j int) int32 {
	if j < 16 {
		return int32(fp4Levels[qs[j]&0xf])
	}
	return int32(fp4Levels[qs[j-16]>>4])
}

func dequantMXFP4(dst []float32, src []byte) {
	for i := 0; i < len(dst)/qk; i++ {
		b := src[i*mxfp4Bytes : (i+1)*mxfp4Bytes]
		d := e8m0Half(b[0])
		y := dst[i*qk : (i+1)*qk]
		for j := range y {
			y[j] = float32(fp4Value(b[1:], j)) * d
		}
	}
}

// quantizeMXFP4 is ggml's quantize_row_mxfp4_ref: the exponent puts the block's largest
// magnitude in the top octave of the levels (floor(log2 amax) - 2), then each value takes
// the nearest level (the first on a tie).
func quantizeMXFP4(dst []byte, src []float32) {
	for i := 0; i < len(src)/qk; i++ {
		b := dst[i*mxfp4Bytes : (i+1)*mxfp4Bytes]
		x := src[i*qk : (i+1)*qk]
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		var e uint8
		if amax > 0 {
			// log2f rounded to float32 before the floor, as C computes floorf(log2f(amax)).
			// (ggml's cast of a negative exponent, for |x| < 2^-125, is undefined: 0 here.)
			l := float32(math.Log2(float64(amax)))
			e = uint8(max(0, int(math.Floor(float64(l)))-2+127))
		}
		b[0] = e
		d := e8m0Half(e)
		for j := 0; j < 16; j++ {
			b[1+j] = fp4Index(x[j], d) | fp4Index(x[16+j], d)<<4
		}
	}
}

func fp4Index(v, d float32) uint8 {
	best, bestErr := 0, abs32(float32(float32(fp4Levels[0])*d)-v)
	for i := 1; i < 16; i++ {
		if err := abs32(float32(float32(fp4Levels[i])*d) - v); err < bestErr {
			best, bestErr = i, err
		}
	}
	return uint8(best)
}

// dotMXFP4 is ggml's AVX2 kernel, as dotIQ4_NL with the FP4 levels and the block scale
// f16(x.d)·2^(e-128).
func dotMXFP4(n int, w, x []byte) float32 {
	var acc [2]lanes8
	nb := n / qk
	for b := 0; b < nb&^1; b++ {
		wb, xb := w[b*mxfp4Bytes:(b+1)*mxfp4Bytes], x[b*q8_0Bytes:(b+1)*q8_0Bytes]
		var l laneInts
		l.addLanes(func(j int) int32 { return fp4Value(wb[1:], j) }, xb[2:], 1)
		acc[b&1].fmaLanes(f16At(xb)*e8m0Half(wb[0]), &l)
	}
	var sum lanes8
	for k := range sum {
		sum[k] = acc[0][k] + acc[1][k]
	}
	s := sum.sum()
	if nb%2 == 1 {
		b := nb - 1
		wb, xb := w[b*mxfp4Bytes:(b+1)*mxfp4Bytes], x[b*q8_0Bytes:(b+1)*q8_0Bytes]
		var si int32
		for j := 0; j < qk; j++ {
			si += fp4Value(wb[1:], j) * int32(int8(xb[2+j]))
		}
		s = fma32(f16At(xb)*e8m0Half(wb[0]), float32(si), s)
	}
	return s
}
