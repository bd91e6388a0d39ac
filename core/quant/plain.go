package quant

import (
	"encoding/binary"
	"math"
)

// Plain (non-block) float formats. Rows are little-endian arrays of the element type.

func init() {
	setConv(F32, dequantF32, quantizeF32)
	setConv(F16, F16RowToF32, F32RowToF16)
	setConv(BF16, dequantBF16, quantizeBF16)
}

// setConv fills a table entry's converters; the entry must exist in types.go.
func setConv(t Type, deq func([]float32, []byte), q func([]byte, []float32)) {
	tr, ok := table[t]
	if !ok {
		panic("BUG: quant: no table entry for type " + t.String())
	}
	tr.Dequant = deq
	tr.Quantize = q
}

// checkBlockBytes is the size assertion of a block layout against the committed table,
// like ggml's static_assert(sizeof(block_q4_0) == …).
func checkBlockBytes(t Type, blockSize, bytes int) {
	tr, ok := table[t]
	if !ok || tr.BlockSize != blockSize || tr.BlockBytes != bytes {
		panic("BUG: quant: block layout of " + t.String() + " disagrees with the type table")
	}
}

func dequantF32(dst []float32, src []byte) {
	src = src[:4*len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func quantizeF32(dst []byte, src []float32) {
	dst = dst[:4*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func dequantBF16(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func quantizeBF16(dst []byte, src []float32) {
	dst = dst[:2*len(src)]
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
	}
}

// f16At reads the little-endian binary16 at b[0:2] as float32.
func f16At(b []byte) float32 { return f16Table[uint16(b[0])|uint16(b[1])<<8] }

// putF16 stores F32ToF16(f) little-endian at b[0:2].
func putF16(b []byte, f float32) {
	h := F32ToF16(f)
	b[0] = byte(h)
	b[1] = byte(h >> 8)
}

// f16Round is f after a round trip through binary16 (GGML_FP16_TO_FP32(GGML_FP32_TO_FP16(f))).
func f16Round(f float32) float32 { return f16Table[F32ToF16(f)] }
