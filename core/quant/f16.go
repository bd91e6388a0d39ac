package quant

import "math"

// f16Table maps every IEEE binary16 bit pattern to its exact float32 value. ggml keeps
// the same table (ggml_table_f32_f16); a lookup is cheaper than the bit manipulation in
// the dequantizers' hot loops.
var f16Table [1 << 16]float32

func init() {
	for i := range f16Table {
		f16Table[i] = f16ToF32Slow(uint16(i))
	}
}

// F16ToF32 returns the exact float32 value of the IEEE binary16 bits h (subnormals,
// infinities and NaN payloads included).
func F16ToF32(h uint16) float32 { return f16Table[h] }

// f16ToF32Slow is the exact binary16 → binary32 widening done with integer operations.
func f16ToF32Slow(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f: // Inf or NaN: keep the payload, widened.
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	case man == 0:
		return math.Float32frombits(sign)
	}
	// Subnormal: normalise the mantissa.
	e := uint32(113)
	for man&0x400 == 0 {
		man <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
}

// F32ToF16 rounds f to the nearest IEEE binary16 value, ties to even, exactly as ggml's
// ggml_compute_fp32_to_fp16: overflow gives ±Inf, tiny values become subnormals or ±0,
// and every NaN becomes the quiet NaN 0x7E00 with f's sign.
func F32ToF16(f float32) uint16 {
	// The float arithmetic does the rounding: scaling by 2^112 then 2^-110 moves the
	// value so that adding the bias constant rounds at binary16 precision. The explicit
	// float32 conversions forbid fused multiply-adds, which would round differently.
	const scaleToInf = 0x1.0p+112
	const scaleToZero = 0x1.0p-110
	base := float32(float32(abs32(f)*scaleToInf) * scaleToZero)
	w := math.Float32bits(f)
	shl1w := w + w
	sign := w & 0x80000000
	bias := shl1w & 0xff000000
	if bias < 0x71000000 {
		bias = 0x71000000
	}
	base = float32(math.Float32frombits(bias>>1+0x07800000) + base)
	bits := math.Float32bits(base)
	expBits := (bits >> 13) & 0x00007c00
	manBits := bits & 0x00000fff
	nonsign := expBits + manBits
	if shl1w > 0xff000000 {
		nonsign = 0x7e00
	}
	return uint16(sign>>16) | uint16(nonsign)
}

func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ 0x80000000) }

// BF16ToF32 returns the exact float32 value of the bfloat16 bits h.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds f to bfloat16, ties to even, as ggml_compute_fp32_to_bf16: a NaN is
// truncated and forced quiet; subnormals are kept (not flushed); overflow rounds to Inf.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 64
	}
	return uint16((u + (0x7fff + ((u >> 16) & 1))) >> 16)
}

// F16RowToF32 widens len(dst) binary16 values stored little-endian in src.
func F16RowToF32(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = f16Table[uint16(src[2*i])|uint16(src[2*i+1])<<8]
	}
}

// F32RowToF16 rounds src to binary16 and stores it little-endian in dst (2*len(src) bytes).
func F32RowToF16(dst []byte, src []float32) {
	dst = dst[:2*len(src)]
	for i, v := range src {
		h := F32ToF16(v)
		dst[2*i] = byte(h)
		dst[2*i+1] = byte(h >> 8)
	}
}
