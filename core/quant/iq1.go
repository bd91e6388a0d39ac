package quant

import "encoding/binary"

// The 1-bit codebook formats of ggml-common.h (llama-quantize needs an importance matrix
// for them; minfer has no quantizer): 256 values in 8 groups of 32, runs of 8 levels
// -1/0/+1 from iq1SGrid, each run shifted by ±δ (δ = 1/8), times a group scale.
//
//	block_iq1_s { f16 d; u8 qs[32]; u16 qh[8] }          run r of group g: iq1SGrid[qs[4g+r] | (bits 3r..3r+2 of qh[g])<<8];
//	                                                      bits 12-14 of qh[g] the scale s, bit 15 the sign of δ;
//	                                                      x = d·(2s+1)·(level ± δ)
//	block_iq1_m { u8 qs[32]; u8 qh[16]; u8 scales[8] }   run r of group g: iq1SGrid[qs[4g+r] | (3 bits of qh[2g+r/2],
//	                                                      low nibble for even r, high for odd)<<8], bit 3 of that
//	                                                      nibble the sign of δ; the 3-bit scales of half groups in
//	                                                      the four u16 of scales (bits 6(g%2)..+2 of the u16 g/2 for
//	                                                      the first half, the next 3 bits for the second); d an f16
//	                                                      assembled from their top nibbles
const (
	iq1SBytes = 2 + QK_K/8 + QK_K/16
	iq1MBytes = QK_K/8 + QK_K/16 + QK_K/32

	iq1Delta = 0.125
)

func init() {
	checkBlockBytes(IQ1_S, QK_K, iq1SBytes)
	checkBlockBytes(IQ1_M, QK_K, iq1MBytes)
	setConv(IQ1_S, dequantIQ1_S, nil)
	setConv(IQ1_M, dequantIQ1_M, nil)
	setDot(IQ1_S, Q8_K, dotIQ1_S, nil)
	setDot(IQ1_M, Q8_K, dotIQ1_M, nil)
}

// iq1Values are one unpacked IQ1 super-block: the levels, the sign of each run's δ
// (true = -δ), and the odd scale 2s+1 of each half group.
type iq1Values struct {
	level [QK_K]int8
	negD  [QK_K / 8]bool
	scale [QK_K / 16]int32
}

func (v *iq1Values) run(r int, idx uint32) {
	e := iq1SGrid[idx]
	for j := 0; j < 8; j++ {
		v.level[8*r+j] = int8(e >> (8 * j))
	}
}

func unpackIQ1_S(b []byte, v *iq1Values) {
	for g := 0; g < 8; g++ {
		qh := uint32(binary.LittleEndian.Uint16(b[34+2*g:]))
		for r := 0; r < 4; r++ {
			v.run(4*g+r, uint32(b[2+4*g+r])|(qh>>(3*r)&7)<<8)
			v.negD[4*g+r] = qh&0x8000 != 0
		}
		s := 2*int32(qh>>12&7) + 1
		v.scale[2*g], v.scale[2*g+1] = s, s
	}
}

// iq1MD is the f16 super-block scale of an IQ1_M block, from the top nibbles of its
// four scale words.
func iq1MD(b []byte) float32 {
	var u uint16
	for i := 0; i < 4; i++ {
		u |= binary.LittleEndian.Uint16(b[48+2*i:]) >> 12 << (4 * i)
	}
	return F16ToF32(u)
}

func unpackIQ1_M(b []byte, v *iq1Values) {
	for g := 0; g < 8; g++ {
		for r := 0; r < 4; r++ {
			h := uint32(b[32+2*g+r/2]) >> (4 * (r % 2))
			v.run(4*g+r, uint32(b[4*g+r])|(h&7)<<8)
			v.negD[4*g+r] = h&8 != 0
		}
		sc := uint32(binary.LittleEndian.Uint16(b[48+2*(g/2):])) >> (6 * (g % 2))
		v.scale[2*g], v.scale[2*g+1] = 2*int32(sc&7)+1, 2*int32(sc>>3&7)+1
	}
}

func dequantIQ1(dst []float32, src []byte, bytes int, unpack func([]byte, *iq1Values), d func([]byte) float32) {
	var v iq1Values
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[i*bytes : (i+1)*bytes]
		unpack(b, &v)
		db := d(b)
		y := dst[i*QK_K : (i+1)*QK_K]
		for j := range y {
			delta := float32(iq1Delta)
			if v.negD[j/8] {
				delta = -delta
			}
			y[j] = float32(db*float32(v.scale[j/16])) * float32(float32(v.level[j])+delta)
		}
	}
}

func dequantIQ1_S(dst []float32, src []byte) { dequantIQ1(dst, src, iq1SBytes, unpackIQ1_S, f16At) }
func dequantIQ1_M(dst []float32, src []byte) { dequantIQ1(dst, src, iq1MBytes, unpackIQ1_M, iq1MD) }

// iq1Lanes are the level lanes of a super-block (lane k: Σ over groups of the half
// group's scale times Σ level·x over bytes 4k..4k+3, the level's sign applied to x as an
// int8 negation) and the δ lanes (the same with ±1 for ±δ in place of the level).
func iq1Lanes(v *iq1Values, xq []byte) (lv, dl laneInts) {
	neg := func(q int8, n bool) int32 {
		if n {
			q = -q
		}
		return int32(q)
	}
	for g := 0; g < 8; g++ {
		for k := 0; k < 8; k++ {
			var s, sd int32
			for j := 32*g + 4*k; j < 32*g+4*k+4; j++ {
				q := int8(xq[j])
				if lvl := v.level[j]; lvl != 0 {
					s += neg(q, lvl < 0)
				}
				sd += neg(q, v.negD[j/8])
			}
			sc := v.scale[2*g+k/4]
			lv[k] += sc * s
			dl[k] += sc * sd
		}
	}
	return lv, dl
}

// dotIQ1_S is ggml's AVX2 kernel: the level lanes fma'd per super-block with
// x.d·f16(w.d); the δ term as a scalar integer from the Q8_K group sums, Σ ±(2s+1)·bsums,
// added per super-block as acc1 += d·sumi (fused: compilers contract it on FMA targets)
// and δ·acc1 added to the lanes' sum at the end.
func dotIQ1_S(n int, w, x []byte) float32 {
	var acc lanes8
	var acc1 float32
	var v iq1Values
	for b := 0; b < n/QK_K; b++ {
		wb, xb := w[b*iq1SBytes:(b+1)*iq1SBytes], x[b*q8_KBytes:(b+1)*q8_KBytes]
		unpackIQ1_S(wb, &v)
		lv, _ := iq1Lanes(&v, q8KQs(xb))
		var sumi int32
		for g := 0; g < 8; g++ {
			s := (q8KBsum(xb, 2*g) + q8KBsum(xb, 2*g+1)) * v.scale[2*g]
			if v.negD[4*g] {
				s = -s
			}
			sumi += s
		}
		d := q8KD(xb) * f16At(wb)
		acc.fmaLanes(d, &lv)
		acc1 = fma32(d, float32(sumi), acc1)
	}
	return acc.sum() + iq1Delta*acc1
}

// dotIQ1_M is ggml's AVX2 kernel: level lanes and δ lanes in two accumulators, each fma'd
// per super-block with x.d·d, then sum(levels) + δ·sum(δ lanes).
func dotIQ1_M(n int, w, x []byte) float32 {
	var acc1, acc2 lanes8
	var v iq1Values
	for b := 0; b < n/QK_K; b++ {
		wb, xb := w[b*iq1MBytes:(b+1)*iq1MBytes], x[b*q8_KBytes:(b+1)*q8_KBytes]
		unpackIQ1_M(wb, &v)
		lv, dl := iq1Lanes(&v, q8KQs(xb))
		d := q8KD(xb) * iq1MD(wb)
		acc1.fmaLanes(d, &lv)
		acc2.fmaLanes(d, &dl)
	}
	return acc1.sum() + iq1Delta*acc2.sum()
}
