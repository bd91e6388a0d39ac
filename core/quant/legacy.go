package quant

import (
	"encoding/binary"
	"math"
)

// The 32-value block formats of ggml-common.h. Every layout is little-endian and packed:
//
//	block_q4_0 { f16 d; u8 qs[16] }            nibble j: value j (low) and j+16 (high); x = (q-8)*d
//	block_q4_1 { f16 d, m; u8 qs[16] }         x = q*d + m
//	block_q5_0 { f16 d; u8 qh[4]; u8 qs[16] }  bit j of qh is bit 4 of value j; x = (q-16)*d
//	block_q5_1 { f16 d, m; u8 qh[4]; u8 qs[16] } x = q*d + m
//	block_q8_0 { f16 d; i8 qs[32] }            x = q*d
//	block_q8_1 { f16 d, s; i8 qs[32] }         s = d*sum(qs), used by the Q4_1/Q5_1 dots
const (
	qk = 32

	q4_0Bytes = 2 + qk/2
	q4_1Bytes = 4 + qk/2
	q5_0Bytes = 2 + 4 + qk/2
	q5_1Bytes = 4 + 4 + qk/2
	q8_0Bytes = 2 + qk
	q8_1Bytes = 4 + qk
)

func init() {
	checkBlockBytes(Q4_0, qk, q4_0Bytes)
	checkBlockBytes(Q4_1, qk, q4_1Bytes)
	checkBlockBytes(Q5_0, qk, q5_0Bytes)
	checkBlockBytes(Q5_1, qk, q5_1Bytes)
	checkBlockBytes(Q8_0, qk, q8_0Bytes)
	checkBlockBytes(Q8_1, qk, q8_1Bytes)
	setConv(Q4_0, dequantQ4_0, quantizeQ4_0)
	setConv(Q4_1, dequantQ4_1, quantizeQ4_1)
	setConv(Q5_0, dequantQ5_0, quantizeQ5_0)
	setConv(Q5_1, dequantQ5_1, quantizeQ5_1)
	setConv(Q8_0, dequantQ8_0, quantizeQ8_0)
	setConv(Q8_1, dequantQ8_1, quantizeQ8_1)
}

func dequantQ4_0(dst []float32, src []byte) {
	for i := 0; i < len(dst)/qk; i++ {
		b := src[i*q4_0Bytes : (i+1)*q4_0Bytes]
		d := f16At(b)
		y := dst[i*qk : (i+1)*qk]
		for j := 0; j < qk/2; j++ {
			y[j] = float32(int(b[2+j]&0x0f)-8) * d
			y[j+qk/2] = float32(int(b[2+j]>>4)-8) * d
		}
	}
}

func dequantQ4_1(dst []float32, src []byte) {
	for i := 0; i < len(dst)/qk; i++ {
		b := src[i*q4_1Bytes : (i+1)*q4_1Bytes]
		d, m := f16At(b), f16At(b[2:])
		y := dst[i*qk : (i+1)*qk]
		for j := 0; j < qk/2; j++ {
			y[j] = float32(float32(b[4+j]&0x0f)*d) + m
			y[j+qk/2] = float32(float32(b[4+j]>>4)*d) + m
		}
	}
}

func dequantQ5_0(dst []float32, src []byte) {
	for i := 0; i < len(dst)/qk; i++ {
		b := src[i*q5_0Bytes : (i+1)*q5_0Bytes]
		d := f16At(b)
		qh := binary.LittleEndian.Uint32(b[2:])
		qs := b[6:]
		y := dst[i*qk : (i+1)*qk]
		for j := 0; j < qk/2; j++ {
			h0 := byte(qh>>j<<4) & 0x10
			h1 := byte(qh>>(j+12)) & 0x10
			y[j] = float32(int(qs[j]&0x0f|h0)-16) * d
			y[j+qk/2] = float32(int(qs[j]>>4|h1)-16) * d
		}
	}
}

func dequantQ5_1(dst []float32, src []byte) {
	for i := 0; i < len(dst)/qk; i++ {
		b := src[i*q5_1Bytes : (i+1)*q5_1Bytes]
		d, m := f16At(b), f16At(b[2:])
		qh := binary.LittleEndian.Uint32(b[4:])
		qs := b[8:]
		y := dst[i*qk : (i+1)*qk]
		for j := 0; j < qk/2; j++ {
			h0 := byte(qh>>j<<4) & 0x10
			h1 := byte(qh>>(j+12)) & 0x10
			y[j] = float32(float32(qs[j]&0x0f|h0)*d) + m
			y[j+qk/2] = float32(float32(qs[j]>>4|h1)*d) + m
		}
	}
}

func dequantQ8_0(dst []float32, src []byte) {
	for i := 0; i < len(dst)/qk; i++ {
		b := src[i*q8_0Bytes : (i+1)*q8_0Bytes]
		d := f16At(b)
		y := dst[i*qk : (i+1)*qk]
		for j := range y {
			y[j] = float32(int8(b[2+j])) * d
		}
	}
}

func dequantQ8_1(dst []float32, src []byte) {
	for i := 0; i < len(dst)/qk; i++ {
		b := src[i*q8_1Bytes : (i+1)*q8_1Bytes]
		d := f16At(b)
		y := dst[i*qk : (i+1)*qk]
		for j := range y {
			y[j] = float32(int8(b[4+j])) * d
		}
	}
}

// absMax returns the first value of largest magnitude in x (signed), and that magnitude.
func absMax(x []float32) (max, amax float32) {
	for _, v := range x {
		if a := abs32(v); amax < a {
			amax, max = a, v
		}
	}
	return max, amax
}

func minMax(x []float32) (min, max float32) {
	min, max = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < min {
			min = v
		}
		if v > max {
			max = v
		}
	}
	return min, max
}

// inv is ggml's `d ? 1.0f/d : 0.0f`.
func inv(d float32) float32 {
	if d == 0 {
		return 0
	}
	return 1 / d
}

// truncI8 is C's (int8_t)(float) conversion for the values the quantizers produce
// (non-negative, below 128 after clamping in the callers' arithmetic).
func truncI8(f float32) int { return int(int8(int32(f))) }

func quantizeQ4_0(dst []byte, src []float32) {
	for i := 0; i < len(src)/qk; i++ {
		x := src[i*qk : (i+1)*qk]
		b := dst[i*q4_0Bytes : (i+1)*q4_0Bytes]
		max, _ := absMax(x)
		d := max / -8
		id := inv(d)
		putF16(b, d)
		for j := 0; j < qk/2; j++ {
			x0 := float32(x[j] * id)
			x1 := float32(x[j+qk/2] * id)
			xi0 := min(15, truncI8(x0+8.5))
			xi1 := min(15, truncI8(x1+8.5))
			b[2+j] = byte(xi0) | byte(xi1)<<4
		}
	}
}

func quantizeQ4_1(dst []byte, src []float32) {
	for i := 0; i < len(src)/qk; i++ {
		x := src[i*qk : (i+1)*qk]
		b := dst[i*q4_1Bytes : (i+1)*q4_1Bytes]
		mn, mx := minMax(x)
		d := (mx - mn) / 15
		id := inv(d)
		putF16(b, d)
		putF16(b[2:], mn)
		for j := 0; j < qk/2; j++ {
			x0 := float32((x[j] - mn) * id)
			x1 := float32((x[j+qk/2] - mn) * id)
			xi0 := min(15, truncI8(x0+0.5))
			xi1 := min(15, truncI8(x1+0.5))
			b[4+j] = byte(xi0) | byte(xi1)<<4
		}
	}
}

func quantizeQ5_0(dst []byte, src []float32) {
	for i := 0; i < len(src)/qk; i++ {
		x := src[i*qk : (i+1)*qk]
		b := dst[i*q5_0Bytes : (i+1)*q5_0Bytes]
		max, _ := absMax(x)
		d := max / -16
		id := inv(d)
		putF16(b, d)
		var qh uint32
		for j := 0; j < qk/2; j++ {
			x0 := float32(x[j] * id)
			x1 := float32(x[j+qk/2] * id)
			xi0 := uint32(min(31, truncI8(x0+16.5)))
			xi1 := uint32(min(31, truncI8(x1+16.5)))
			b[6+j] = byte(xi0&0x0f) | byte(xi1&0x0f)<<4
			qh |= (xi0 & 0x10) >> 4 << j
			qh |= (xi1 & 0x10) >> 4 << (j + qk/2)
		}
		binary.LittleEndian.PutUint32(b[2:], qh)
	}
}

func quantizeQ5_1(dst []byte, src []float32) {
	for i := 0; i < len(src)/qk; i++ {
		x := src[i*qk : (i+1)*qk]
		b := dst[i*q5_1Bytes : (i+1)*q5_1Bytes]
		mn, mx := minMax(x)
		d := (mx - mn) / 31
		id := inv(d)
		putF16(b, d)
		putF16(b[2:], mn)
		var qh uint32
		for j := 0; j < qk/2; j++ {
			x0 := float32((x[j] - mn) * id)
			x1 := float32((x[j+qk/2] - mn) * id)
			xi0 := uint32(uint8(int32(x0 + 0.5)))
			xi1 := uint32(uint8(int32(x1 + 0.5)))
			b[8+j] = byte(xi0&0x0f) | byte(xi1&0x0f)<<4
			qh |= (xi0 & 0x10) >> 4 << j
			qh |= (xi1 & 0x10) >> 4 << (j + qk/2)
		}
		binary.LittleEndian.PutUint32(b[4:], qh)
	}
}

// roundAway is C's roundf: to nearest, ties away from zero.
func roundAway(f float32) float32 { return float32(math.Round(float64(f))) }

func quantizeQ8_0(dst []byte, src []float32) {
	for i := 0; i < len(src)/qk; i++ {
		x := src[i*qk : (i+1)*qk]
		b := dst[i*q8_0Bytes : (i+1)*q8_0Bytes]
		_, amax := absMax(x)
		d := amax / 127
		id := inv(d)
		putF16(b, d)
		for j, v := range x {
			b[2+j] = byte(int8(roundAway(v * id)))
		}
	}
}

func quantizeQ8_1(dst []byte, src []float32) {
	for i := 0; i < len(src)/qk; i++ {
		x := src[i*qk : (i+1)*qk]
		b := dst[i*q8_1Bytes : (i+1)*q8_1Bytes]
		_, amax := absMax(x)
		d := amax / 127
		id := inv(d)
		putF16(b, d)
		sum := 0
		for j, v := range x {
			q := int8(roundAway(v * id))
			b[4+j] = byte(q)
			sum += int(q)
		}
		putF16(b[2:], float32(sum)*d)
	}
}
