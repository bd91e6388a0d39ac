package quant

import "encoding/binary"

// IQ4_NL and IQ4_XS quantizers: ggml's quantize_iq4_nl / quantize_iq4_xs without an
// importance matrix (weights x²), the ones llama-quantize runs; float operations one for
// one as in kquantize.go, so the bytes match llama-quantize's. (ggml's
// quantize_row_iq4_nl_ref skips the scale search below: llama-quantize never calls it.)

// iq4Tries is how many scales either side of the first guess ggml's search tries.
const iq4Tries = 7

// iq4Index is the index of the level of iq4Levels nearest to v (ggml's best_index_int8:
// the lower level on a tie).
func iq4Index(v float32) uint8 {
	if v <= float32(iq4Levels[0]) {
		return 0
	}
	if v >= float32(iq4Levels[15]) {
		return 15
	}
	lo, hi := 0, 15
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if v < float32(iq4Levels[mid]) {
			hi = mid
		} else {
			lo = mid
		}
	}
	if v-float32(iq4Levels[hi-1]) < float32(iq4Levels[hi])-v {
		return uint8(hi - 1)
	}
	return uint8(hi)
}

// iq4Fit picks the scale of one group of 32 values and fills its level indices: the
// group's signed maximum mapped to level 0 (-127), then the 2·iq4Tries+1 scales around
// it, keeping the least-squares scale of the best one (weights x²). A group whose
// |max| is below groupMaxEps gets scale 0 and L untouched.
func iq4Fit(x []float32, L []uint8) float32 {
	var amax, mx float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, mx = a, v
		}
	}
	if amax < groupMaxEps {
		return 0
	}
	l0 := float32(iq4Levels[0])
	d := -mx / l0
	id := 1 / d
	var sumqx, sumq2 float32
	for j, v := range x {
		l := iq4Index(float32(id * v))
		L[j] = l
		q := float32(iq4Levels[l])
		w := float32(v * v)
		sumqx += float32(float32(w*q) * v)
		sumq2 += float32(float32(w*q) * q)
	}
	d = 0
	if sumq2 > 0 {
		d = sumqx / sumq2
	}
	best := float32(d * sumqx)
	for itry := -iq4Tries; itry <= iq4Tries; itry++ {
		id = float32(itry+int(iq4Levels[0])) / mx
		sumqx, sumq2 = 0, 0
		for _, v := range x {
			q := float32(iq4Levels[iq4Index(float32(id*v))])
			w := float32(v * v)
			sumqx += float32(float32(w*q) * v)
			sumq2 += float32(float32(w*q) * q)
		}
		if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
			d = sumqx / sumq2
			best = float32(d * sumqx)
		}
	}
	return d
}

// packIQ4 stores 32 level indices as IQ4 nibbles: byte j holds values j and j+16.
func packIQ4(qs []byte, L []uint8) {
	for j := 0; j < 16; j++ {
		qs[j] = L[j] | L[16+j]<<4
	}
}

func quantizeIQ4_NL(dst []byte, src []float32) {
	var L [qk]uint8
	for i := 0; i < len(src)/qk; i++ {
		b := dst[i*iq4NLBytes : (i+1)*iq4NLBytes]
		x := src[i*qk : (i+1)*qk]
		d := iq4Fit(x, L[:])
		putF16(b, d)
		var id float32
		if d != 0 {
			id = 1 / d
		}
		for j, v := range x {
			L[j] = iq4Index(float32(id * v))
		}
		packIQ4(b[2:], L[:])
	}
}

func quantizeIQ4_XS(dst []byte, src []float32) {
	var L [QK_K]uint8
	var scales [QK_K / 32]float32
	for i := 0; i < len(src)/QK_K; i++ {
		b := dst[i*iq4XSBytes : (i+1)*iq4XSBytes]
		x := src[i*QK_K : (i+1)*QK_K]
		var maxScale, amaxScale float32
		for g := range scales {
			scales[g] = iq4Fit(x[32*g:32*g+32], L[32*g:32*g+32])
			if a := abs32(scales[g]); a > amaxScale {
				amaxScale, maxScale = a, scales[g]
			}
		}
		// The super-block scale maps the largest group scale to -32; the groups' 6-bit
		// scales are found with the unrounded d (as ggml does), stored as ls+32.
		d := -maxScale / 32
		putF16(b, d)
		var id float32
		if d != 0 {
			id = 1 / d
		}
		var sh uint16
		for g := range scales {
			l := max(-32, min(31, nearestInt(float32(id*scales[g]))))
			dl := float32(d * float32(l))
			var idl float32
			if dl != 0 {
				idl = 1 / dl
			}
			for j := 32 * g; j < 32*g+32; j++ {
				L[j] = iq4Index(float32(idl * x[j]))
			}
			l += 32
			if g%2 == 0 {
				b[4+g/2] = byte(l & 0xf)
			} else {
				b[4+g/2] |= byte(l&0xf) << 4
			}
			sh |= uint16(l>>4) << (2 * g)
		}
		binary.LittleEndian.PutUint16(b[2:], sh)
		for g := 0; g < QK_K/32; g++ {
			packIQ4(b[8+16*g:], L[32*g:])
		}
	}
}
