package cpu

// Reference dot products in the exact operation order of ggml-cpu's x86 AVX2 kernels
// (ggml_vec_dot_<t>_q8_<k>), written independently of core/quant as a test oracle: the
// backend's results equal llama.cpp's only if core/quant's kernels give these bits. Integer work is exact in any
// order; what decides the float32 bits is the layout ggml's vectors give the partial
// sums: eight int32 lanes per block, lane k holding the values v with (v mod 32)/4 == k
// (weighted by their sub-block scale for the K-quants), each lane accumulated across
// blocks by one FMA with the block's scale d, then hsum_float_8 =
// ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)). Q4_1/Q5_1 add Σ m·s and Q4_K the mins term
// (four lanes, (m0+m2)+(m1+m3)) after the hsum.
//
// With this order llama.cpp's norepack last-prompt logits of the Q8_0, Q4_0 and Q4_K_M
// golden files are reproduced bit for bit (q4_k_m to 2e-6, from F16/F32 rows).

import (
	"encoding/binary"
	"math"

	"github.com/minfer/minfer/core/quant"
)

func h16(b []byte) float32 { return quant.F16ToF32(binary.LittleEndian.Uint16(b)) }

// legacyDot is the AVX2 loop of the 32-value formats: vals fills the block's integer
// weights q[0..31] (value order); x holds Q8_0 blocks.
func legacyDot(n int, w, x []byte, wb int, vals func(blk []byte, q *[32]int32)) float32 {
	var acc [8]float32
	var q [32]int32
	for b := 0; b < n/32; b++ {
		blk := w[b*wb : (b+1)*wb]
		xb := x[b*34 : (b+1)*34]
		vals(blk, &q)
		d := h16(blk) * h16(xb)
		for k := 0; k < 8; k++ {
			var s int32
			for l := 4 * k; l < 4*k+4; l++ {
				s += q[l] * int32(int8(xb[2+l]))
			}
			acc[k] = fma32(d, float32(s), acc[k])
		}
	}
	return hsum8(&acc)
}

func gQ8_0(n int, w, x []byte) float32 {
	return legacyDot(n, w, x, 34, func(b []byte, q *[32]int32) {
		for j := range 32 {
			q[j] = int32(int8(b[2+j]))
		}
	})
}
func gQ4_0(n int, w, x []byte) float32 {
	return legacyDot(n, w, x, 18, func(b []byte, q *[32]int32) {
		for j := range 16 {
			q[j] = int32(b[2+j]&15) - 8
			q[j+16] = int32(b[2+j]>>4) - 8
		}
	})
}
func gQ5_0(n int, w, x []byte) float32 {
	return legacyDot(n, w, x, 22, func(b []byte, q *[32]int32) {
		qh := binary.LittleEndian.Uint32(b[2:])
		for j := range 16 {
			q[j] = int32(b[6+j]&15|byte((qh>>j)&1)<<4) - 16
			q[j+16] = int32(b[6+j]>>4|byte((qh>>(j+16))&1)<<4) - 16
		}
	})
}

func q8kD(xb []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(xb)) }

// kLanes: lane k = Σ over v with (v%32)/4 == k of sc(v)·q(v)·y(v), one super-block.
func kLanes(q, sc *[256]int32, y []byte) (l [8]int32) {
	for v := range 256 {
		l[(v%32)/4] += sc[v] * q[v] * int32(int8(y[v]))
	}
	return
}

func gQ4_K(n int, w, x []byte) float32 {
	var acc [8]float32
	var accm [4]float32
	var q, sc [256]int32
	for b := 0; b < n/256; b++ {
		blk := w[b*144 : (b+1)*144]
		xb := x[b*292 : (b+1)*292]
		yd := q8kD(xb)
		d := yd * h16(blk)
		dmin := -yd * h16(blk[2:])
		s := blk[4:16]
		var scs, mins [8]int32
		for j := range 8 {
			if j < 4 {
				scs[j] = int32(s[j] & 63)
				mins[j] = int32(s[j+4] & 63)
			} else {
				scs[j] = int32(s[j+4]&0xF | (s[j-4]>>6)<<4)
				mins[j] = int32(s[j+4]>>4 | (s[j]>>6)<<4)
			}
		}
		qs := blk[16:]
		for c := range 4 {
			for l := range 32 {
				q[64*c+l] = int32(qs[32*c+l] & 15)
				q[64*c+32+l] = int32(qs[32*c+l] >> 4)
			}
		}
		for v := range 256 {
			sc[v] = scs[v/32]
		}
		lanes := kLanes(&q, &sc, xb[4:260])
		for k := range 8 {
			acc[k] = fma32(d, float32(lanes[k]), acc[k])
		}
		var bs [16]int32
		for i := range 16 {
			bs[i] = int32(int16(binary.LittleEndian.Uint16(xb[260+2*i:])))
		}
		for k := range 4 {
			p := mins[2*k]*(bs[4*k]+bs[4*k+1]) + mins[2*k+1]*(bs[4*k+2]+bs[4*k+3])
			accm[k] = fma32(dmin, float32(p), accm[k])
		}
	}
	return hsum8(&acc) + ((accm[0] + accm[2]) + (accm[1] + accm[3]))
}

// gQ6_K: ggml's AVX2 Q6_K kernel in its 2026 form (the llama.cpp of the goldens):
// unsigned levels 0..63 into the lanes, then lane k loses 32·(s_2k·bsum_2k +
// s_2k+1·bsum_2k+1), the bias of the 32 values k·32.. as a whole.
func gQ6_K(n int, w, x []byte) float32 {
	var acc [8]float32
	var q, sc [256]int32
	for b := 0; b < n/256; b++ {
		blk := w[b*210 : (b+1)*210]
		xb := x[b*292 : (b+1)*292]
		ql, qh, scales := blk[:128], blk[128:192], blk[192:208]
		d := q8kD(xb) * h16(blk[208:])
		for g := range 2 {
			L, H := ql[64*g:], qh[32*g:]
			for l := range 32 {
				q[128*g+l] = int32(L[l]&15 | ((H[l]>>0)&3)<<4)
				q[128*g+32+l] = int32(L[l+32]&15 | ((H[l]>>2)&3)<<4)
				q[128*g+64+l] = int32(L[l]>>4 | ((H[l]>>4)&3)<<4)
				q[128*g+96+l] = int32(L[l+32]>>4 | ((H[l]>>6)&3)<<4)
			}
		}
		for v := range 256 {
			sc[v] = int32(int8(scales[v/16]))
		}
		lanes := kLanes(&q, &sc, xb[4:260])
		for k := range 8 {
			var bias int32
			for v := 32 * k; v < 32*k+32; v++ {
				bias += sc[v] * int32(int8(xb[4+v]))
			}
			lanes[k] -= 32 * bias
			acc[k] = fma32(d, float32(lanes[k]), acc[k])
		}
	}
	return hsum8(&acc)
}

// legacyDot1 is legacyDot for Q4_1/Q5_1 against Q8_1: unsigned quants, then
// Σ m·s (contracted to FMA in ggml's build) added after the hsum.
func legacyDot1(n int, w, x []byte, wb int, vals func(blk []byte, q *[32]int32)) float32 {
	var acc [8]float32
	var q [32]int32
	var summs float32
	for b := 0; b < n/32; b++ {
		blk := w[b*wb : (b+1)*wb]
		xb := x[b*36 : (b+1)*36]
		vals(blk, &q)
		summs = fma32(h16(blk[2:]), h16(xb[2:]), summs)
		d := h16(blk) * h16(xb)
		for k := 0; k < 8; k++ {
			var s int32
			for l := 4 * k; l < 4*k+4; l++ {
				s += q[l] * int32(int8(xb[4+l]))
			}
			acc[k] = fma32(d, float32(s), acc[k])
		}
	}
	return hsum8(&acc) + summs
}

func gQ4_1(n int, w, x []byte) float32 {
	return legacyDot1(n, w, x, 20, func(b []byte, q *[32]int32) {
		for j := range 16 {
			q[j] = int32(b[4+j] & 15)
			q[j+16] = int32(b[4+j] >> 4)
		}
	})
}

func gQ5_1(n int, w, x []byte) float32 {
	return legacyDot1(n, w, x, 24, func(b []byte, q *[32]int32) {
		qh := binary.LittleEndian.Uint32(b[4:])
		for j := range 16 {
			q[j] = int32(b[8+j]&15 | byte((qh>>j)&1)<<4)
			q[j+16] = int32(b[8+j]>>4 | byte((qh>>(j+16))&1)<<4)
		}
	})
}

// ggmlDots are the reference kernels by weight type.
var ggmlDots = map[quant.Type]func(n int, w, x []byte) float32{
	quant.Q8_0: gQ8_0, quant.Q4_0: gQ4_0, quant.Q5_0: gQ5_0,
	quant.Q4_1: gQ4_1, quant.Q5_1: gQ5_1,
	quant.Q4_K: gQ4_K, quant.Q6_K: gQ6_K,
}
