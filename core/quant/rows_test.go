package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// randomRow fills a row of type t with random valid blocks: random level bytes,
// binary16 scales of random magnitude, Q8 values in [-127, 127] (the range ggml's
// quantizers produce) and consistent Q8_K group sums.
func randomRow(rng *rand.Rand, t Type, n int) []byte {
	nb := n / t.BlockSize()
	bb := t.BlockBytes()
	row := make([]byte, nb*bb)
	for i := range row {
		row[i] = byte(rng.Uint32())
	}
	f16 := func(b []byte) {
		h := F32ToF16(float32(rng.NormFloat64()) * float32(math.Pow(2, float64(rng.IntN(12)-8))))
		b[0], b[1] = byte(h), byte(h>>8)
	}
	for b := 0; b < nb; b++ {
		blk := row[b*bb : (b+1)*bb]
		switch t {
		case F16:
			f16(blk)
		case Q8_0:
			f16(blk)
			for j := 2; j < bb; j++ {
				blk[j] = byte(int8(rng.IntN(255) - 127))
			}
		case Q4_0, Q5_0:
			f16(blk)
		case Q4_1, Q5_1, Q8_1, Q5_K:
			f16(blk)
			f16(blk[2:])
		case Q2_K:
			f16(blk[80:])
			f16(blk[82:])
		case Q3_K:
			f16(blk[108:])
		case F32:
			binary.LittleEndian.PutUint32(blk, math.Float32bits(float32(rng.NormFloat64())))
		case BF16:
			binary.LittleEndian.PutUint16(blk, F32ToBF16(float32(rng.NormFloat64())))
		case Q4_K:
			f16(blk)
			f16(blk[2:])
		case Q6_K:
			f16(blk[208:])
		case IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ4_XS, IQ4_NL:
			f16(blk)
		case MXFP4:
			blk[0] = byte(110 + rng.IntN(24)) // scales 2^-18..2^5
		case IQ1_M: // d is the top nibbles of the four scale words
			var h [2]byte
			f16(h[:])
			u := uint16(h[0]) | uint16(h[1])<<8
			for i := 0; i < 4; i++ {
				blk[49+2*i] = blk[49+2*i]&0x0f | byte(u>>(4*i)&0xf)<<4
			}
		case Q8_K:
			d := float32(rng.NormFloat64())
			copy(blk, []byte{0, 0, 0, 0})
			u := math.Float32bits(d)
			blk[0], blk[1], blk[2], blk[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
			for j := 4; j < 4+QK_K; j++ {
				blk[j] = byte(int8(rng.IntN(255) - 127))
			}
			for g := 0; g < 16; g++ {
				s := int16(sumI8(blk[4+16*g : 4+16*g+16]))
				blk[4+QK_K+2*g], blk[4+QK_K+2*g+1] = byte(s), byte(uint16(s)>>8)
			}
		}
	}
	return row
}

// BenchmarkVecDot measures each kernel on one 4864-value row (Qwen2.5-0.5B's n_ff) whose
// weights (4.9 MB in all) exceed the L2 cache, as in a real matmul; SetBytes counts the
// weight bytes, so MB/s is weight throughput.
func BenchmarkVecDot(b *testing.B) {
	const n, rows = 4864, 1024
	for _, typ := range dotTypes {
		tr, _ := typ.Lookup()
		for _, path := range []string{"simd", "go"} {
			k := tr.VecDot
			if path == "go" {
				if _, ok := simdKernels[typ]; !ok {
					continue
				}
				k = simdKernels[typ][1]
			} else if _, ok := simdKernels[typ]; !ok {
				path = "go"
			}
			b.Run(typ.String()+"/"+path, func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 1))
				rb, _ := typ.RowBytes(n)
				w := randomRow(rng, typ, n*rows)
				x := randomRow(rng, tr.VecDotType, n)
				b.SetBytes(int64(rb))
				b.ResetTimer()
				var s float32
				for i := 0; i < b.N; i++ {
					r := i % rows
					s += k(n, w[r*rb:(r+1)*rb], x)
				}
				sink = s
			})
		}
	}
}

var sink float32

// BenchmarkFromFloat measures the activation quantizers on one 4864-value row; MB/s
// counts the float32 input.
func BenchmarkFromFloat(b *testing.B) {
	x := randNormal(1, 4864, 1)
	for _, t := range []Type{Q8_0, Q8_1, Q8_K, F16} {
		tr, _ := t.Lookup()
		dst := make([]byte, mustRowBytes(b, t, len(x)))
		b.Run(t.String(), func(b *testing.B) {
			b.SetBytes(int64(4 * len(x)))
			for i := 0; i < b.N; i++ {
				tr.FromFloat(dst, x)
			}
		})
	}
}
