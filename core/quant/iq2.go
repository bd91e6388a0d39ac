package quant

import (
	"encoding/binary"
	"math/bits"
)

// The codebook formats of ggml-common.h whose llama-quantize needs an importance matrix
// (so minfer has no quantizer for them): 256 values in 8 groups of 32, each group's
// values in runs whose magnitudes come from a codebook entry, with per-value signs and a
// scale per group (or half group). The dots run against Q8_K activations.
//
//	block_iq2_xxs { f16 d; u16 qs[32] }                          group g: bytes 8g..8g+3 index iq2XXSGrid for its 4 runs
//	                                                              of 8; the u32 at 8g+4 holds 4×7 sign bits and the scale s
//	                                                              (top 4 bits); x = d·(0.5+s)/4·mag·sign
//	block_iq2_xs  { f16 d; u16 qs[32]; u8 scales[8] }           run r of group g: u16 q = qs[4g+r], iq2XSGrid[q&511],
//	                                                              signs q>>9 (7 bits); scale nibble (r/2) of scales[g]
//	block_iq2_s   { f16 d; u8 qs[32]; u8 signs[32]; u8 qh[8]; u8 scales[8] }
//	                                                              run r: iq2SGrid[qs[4g+r] | (bits 2r,2r+1 of qh[g])<<8],
//	                                                              8 sign bits signs[4g+r]; scales as IQ2_XS
//	block_iq3_xxs { f16 d; u8 qs[64]; u32 scales_signs[8] }     runs of 4: iq3XXSGrid[qs[8g+r]]; the u32 of group g holds
//	                                                              4×7 sign bits (one 7-bit field per 8 values) and s;
//	                                                              x = d·(0.5+s)/2·mag·sign
//
// A 7-bit sign field stands for 8 sign bits whose count is even: bit 7 is the parity of
// the other seven (ggml's ksigns_iq2xs).
const (
	iq2XXSBytes = 2 + QK_K/4
	iq2XSBytes  = 2 + QK_K/4 + QK_K/32
	iq2SBytes   = 2 + QK_K/4 + QK_K/16
	iq3XXSBytes = 2 + 3*QK_K/8
)

func init() {
	checkBlockBytes(IQ2_XXS, QK_K, iq2XXSBytes)
	checkBlockBytes(IQ2_XS, QK_K, iq2XSBytes)
	checkBlockBytes(IQ2_S, QK_K, iq2SBytes)
	checkBlockBytes(IQ3_XXS, QK_K, iq3XXSBytes)
	for _, f := range []struct {
		t   Type
		deq func(dst []float32, src []byte)
		dot func(n int, w, x []byte) float32
	}{
		{IQ2_XXS, dequantIQ2_XXS, dotIQ2_XXS},
		{IQ2_XS, dequantIQ2_XS, dotIQ2_XS},
		{IQ2_S, dequantIQ2_S, dotIQ2_S},
		{IQ3_XXS, dequantIQ3_XXS, dotIQ3_XXS},
	} {
		setConv(f.t, f.deq, nil)
		setDot(f.t, Q8_K, f.dot, nil)
	}
}

// evenSigns expands a 7-bit sign field to its 8 sign bits (bit 7 the parity).
func evenSigns(v uint32) uint8 {
	v &= 127
	return uint8(v) | uint8(bits.OnesCount32(v)&1)<<7
}

// iqValues are one unpacked super-block of a codebook format: each value's magnitude and
// sign, and the 4-bit scale s of each half group (16 values).
type iqValues struct {
	mag   [QK_K]int32
	neg   [QK_K]bool
	scale [QK_K / 16]int32
}

// iqKind is one of the codebook formats: how to unpack a block, the float factor of
// its group scale (dequant: d·(0.5+s)·fscale; dot: the lanes use 2s+1 and the total is
// scaled by fscale/2 at the end).
type iqKind struct {
	bytes  int
	fscale float32
	unpack func(b []byte, v *iqValues)
}

var (
	iq2XXSKind = iqKind{iq2XXSBytes, 0.25, unpackIQ2_XXS}
	iq2XSKind  = iqKind{iq2XSBytes, 0.25, unpackIQ2_XS}
	iq2SKind   = iqKind{iq2SBytes, 0.25, unpackIQ2_S}
	iq3XXSKind = iqKind{iq3XXSBytes, 0.5, unpackIQ3_XXS}
)

// runs8 fills 8 values from a codebook entry of 8 byte magnitudes and 8 sign bits.
func (v *iqValues) runs8(at int, entry uint64, signs uint8) {
	for j := 0; j < 8; j++ {
		v.mag[at+j] = int32(entry >> (8 * j) & 0xff)
		v.neg[at+j] = signs>>j&1 != 0
	}
}

func unpackIQ2_XXS(b []byte, v *iqValues) {
	for g := 0; g < 8; g++ {
		q := b[2+8*g:]
		aux := binary.LittleEndian.Uint32(q[4:])
		for r := 0; r < 4; r++ {
			v.runs8(32*g+8*r, iq2XXSGrid[q[r]], evenSigns(aux>>(7*r)))
		}
		v.scale[2*g], v.scale[2*g+1] = int32(aux>>28), int32(aux>>28)
	}
}

func unpackIQ2_XS(b []byte, v *iqValues) {
	for g := 0; g < 8; g++ {
		for r := 0; r < 4; r++ {
			q := uint32(binary.LittleEndian.Uint16(b[2+2*(4*g+r):]))
			v.runs8(32*g+8*r, iq2XSGrid[q&511], evenSigns(q>>9))
		}
		s := b[66+g]
		v.scale[2*g], v.scale[2*g+1] = int32(s&0xf), int32(s>>4)
	}
}

func unpackIQ2_S(b []byte, v *iqValues) {
	for g := 0; g < 8; g++ {
		qh := uint32(b[66+g])
		for r := 0; r < 4; r++ {
			idx := uint32(b[2+4*g+r]) | (qh>>(2*r)&3)<<8
			v.runs8(32*g+8*r, iq2SGrid[idx], b[34+4*g+r])
		}
		s := b[74+g]
		v.scale[2*g], v.scale[2*g+1] = int32(s&0xf), int32(s>>4)
	}
}

func unpackIQ3_XXS(b []byte, v *iqValues) {
	for g := 0; g < 8; g++ {
		aux := binary.LittleEndian.Uint32(b[66+4*g:])
		for r := 0; r < 8; r++ {
			e := iq3XXSGrid[b[2+8*g+r]]
			signs := evenSigns(aux >> (7 * (r / 2)))
			for j := 0; j < 4; j++ {
				i := 32*g + 4*r + j
				v.mag[i] = int32(e >> (8 * j) & 0xff)
				v.neg[i] = signs>>(4*(r%2)+j)&1 != 0
			}
		}
		v.scale[2*g], v.scale[2*g+1] = int32(aux>>28), int32(aux>>28)
	}
}

func (k iqKind) dequant(dst []float32, src []byte) {
	var v iqValues
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[i*k.bytes : (i+1)*k.bytes]
		k.unpack(b, &v)
		d := f16At(b)
		y := dst[i*QK_K : (i+1)*QK_K]
		for j := range y {
			db := float32(d*(0.5+float32(v.scale[j/16]))) * k.fscale
			y[j] = db * float32(v.mag[j])
			if v.neg[j] {
				y[j] = -y[j]
			}
		}
	}
}

// dot is ggml's AVX2 kernel for these formats: the signs applied to the activations (an
// int8 negation: -128 stays -128), the lanes of each 32-value group summed with the odd
// scale 2s+1 of its half groups, one fma per super-block with f16(w.d)·x.d, and the total
// times fscale/2 (0.125 for IQ2, 0.25 for IQ3_XXS: exact).
func (k iqKind) dot(n int, w, x []byte) float32 {
	var acc lanes8
	var v iqValues
	for b := 0; b < n/QK_K; b++ {
		wb, xb := w[b*k.bytes:(b+1)*k.bytes], x[b*q8_KBytes:(b+1)*q8_KBytes]
		k.unpack(wb, &v)
		l := signedLanes(&v, q8KQs(xb))
		acc.fmaLanes(f16At(wb)*q8KD(xb), &l)
	}
	return k.fscale / 2 * acc.sum()
}

// signedLanes are the eight lanes of a super-block: lane k sums, over the groups, the
// odd scale of the half group times Σ mag·(±x) over bytes 4k..4k+3 of the group.
func signedLanes(v *iqValues, xq []byte) laneInts {
	var l laneInts
	for g := 0; g < 8; g++ {
		for k := 0; k < 8; k++ {
			var s int32
			for j := 32*g + 4*k; j < 32*g+4*k+4; j++ {
				q := int8(xq[j])
				if v.neg[j] {
					q = -q
				}
				s += v.mag[j] * int32(q)
			}
			l[k] += (2*v.scale[2*g+k/4] + 1) * s
		}
	}
	return l
}

func dequantIQ2_XXS(dst []float32, src []byte) { iq2XXSKind.dequant(dst, src) }
func dequantIQ2_XS(dst []float32, src []byte)  { iq2XSKind.dequant(dst, src) }
func dequantIQ2_S(dst []float32, src []byte)   { iq2SKind.dequant(dst, src) }
func dequantIQ3_XXS(dst []float32, src []byte) { iq3XXSKind.dequant(dst, src) }

func dotIQ2_XXS(n int, w, x []byte) float32 { return iq2XXSKind.dot(n, w, x) }
func dotIQ2_XS(n int, w, x []byte) float32  { return iq2XSKind.dot(n, w, x) }
func dotIQ2_S(n int, w, x []byte) float32   { return iq2SKind.dot(n, w, x) }
func dotIQ3_XXS(n int, w, x []byte) float32 { return iq3XXSKind.dot(n, w, x) }
