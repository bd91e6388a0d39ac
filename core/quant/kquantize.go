package quant

import (
	"encoding/binary"
	"math"
)

// Reference K-quant quantizers, ggml's quantize_row_q{2..6,8}_K_ref without an importance
// matrix. They follow ggml's float operations one for one (no fused multiply-adds; each
// product is rounded to float32 before it is added) so the bytes match llama-quantize.

const groupMaxEps = 1e-15

// nearestInt is ggml's nearest_int: round to nearest, ties to even, via the 1.5·2^23
// trick. Valid for |f| ≤ 4194303, as in ggml.
func nearestInt(f float32) int {
	v := float32(f + 12582912)
	return int(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// makeQxQuants is make_qx_quants(n, nmax, x, L, rmse_type, NULL) for rmse_type 1
// (weights x²): symmetric levels L in [0, 2·nmax) and the scale.
func makeQxQuants(nmax int, x []float32, L []int8) float32 {
	xmax, amax := absMax(x)
	if amax < groupMaxEps {
		for i := range L[:len(x)] {
			L[i] = 0
		}
		return 0
	}
	iscale := float32(-float32(nmax) / xmax)
	var sumlx, suml2 float32
	for i, v := range x {
		l := nearestInt(float32(iscale * v))
		l = max(-nmax, min(nmax-1, l))
		L[i] = int8(l + nmax)
		w := float32(v * v)
		sumlx += float32(float32(w*v) * float32(l))
		suml2 += float32(float32(w*float32(l)) * float32(l))
	}
	scale := float32(0)
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := float32(scale * sumlx)
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(float32(nmax) + float32(0.1*float32(is))) / xmax
		sumlx, suml2 = 0, 0
		for _, v := range x {
			l := nearestInt(float32(iscale * v))
			l = max(-nmax, min(nmax-1, l))
			w := float32(v * v)
			sumlx += float32(float32(w*v) * float32(l))
			suml2 += float32(float32(w*float32(l)) * float32(l))
		}
		if suml2 > 0 && float32(sumlx*sumlx) > float32(best*suml2) {
			for i, v := range x {
				l := nearestInt(float32(iscale * v))
				L[i] = int8(nmax + max(-nmax, min(nmax-1, l)))
			}
			scale = sumlx / suml2
			best = float32(scale * sumlx)
		}
	}
	return scale
}

// makeQ3Quants is make_q3_quants(n, nmax, x, L, do_rmse=true).
func makeQ3Quants(nmax int, x []float32, L []int8) float32 {
	xmax, amax := absMax(x)
	if amax < groupMaxEps {
		for i := range L[:len(x)] {
			L[i] = 0
		}
		return 0
	}
	iscale := float32(-float32(nmax) / xmax)
	var sumlx, suml2 float32
	for i, v := range x {
		l := nearestInt(float32(iscale * v))
		l = max(-nmax, min(nmax-1, l))
		L[i] = int8(l)
		w := float32(v * v)
		sumlx += float32(float32(w*v) * float32(l))
		suml2 += float32(float32(w*float32(l)) * float32(l))
	}
	for itry := 0; itry < 5; itry++ {
		changed := 0
		for i, v := range x {
			w := float32(v * v)
			li := float32(L[i])
			slx := sumlx - float32(float32(w*v)*li)
			if slx > 0 {
				sl2 := suml2 - float32(float32(w*li)*li)
				newL := nearestInt(float32(float32(v*sl2) / slx))
				newL = max(-nmax, min(nmax-1, newL))
				if newL != int(L[i]) {
					slx += float32(float32(w*v) * float32(newL))
					sl2 += float32(float32(w*float32(newL)) * float32(newL))
					if sl2 > 0 && float32(float32(slx*slx)*suml2) > float32(float32(sumlx*sumlx)*sl2) {
						L[i] = int8(newL)
						sumlx, suml2 = slx, sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := range x {
		L[i] += int8(nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

// qkx2Params are make_qkx2_quants' search parameters.
type qkx2Params struct {
	rmin, rdelta float32
	nstep        int
	useMAD       bool
}

// makeQkx2Quants is make_qkx2_quants: asymmetric levels L in [0, nmax] with a scale and
// a min (returned negated, as ggml's the_min) chosen by a weighted search.
func makeQkx2Quants(nmax int, x, weights []float32, L, Laux []uint8, p qkx2Params) (scale, theMin float32) {
	n := len(x)
	mn, mx := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		if x[i] < mn {
			mn = x[i]
		}
		if x[i] > mx {
			mx = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if mn > 0 {
		mn = 0
	}
	if mx == mn {
		for i := range L[:n] {
			L[i] = 0
		}
		return 0, -mn
	}
	errOf := func(diff float32) float32 {
		if p.useMAD {
			return abs32(diff)
		}
		return float32(diff * diff)
	}
	iscale := float32(float32(nmax) / (mx - mn))
	scale = 1 / iscale
	bestError := float32(0)
	for i, v := range x {
		l := nearestInt(float32(iscale * (v - mn)))
		L[i] = uint8(max(0, min(nmax, l)))
		diff := float32(float32(scale*float32(L[i]))+mn) - v
		bestError += float32(weights[i] * errOf(diff))
	}
	if p.nstep < 1 {
		return scale, -mn
	}
	for is := 0; is <= p.nstep; is++ {
		iscale = (float32(p.rmin+float32(p.rdelta*float32(is))) + float32(nmax)) / (mx - mn)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := nearestInt(float32(iscale * (v - mn)))
			l = max(0, min(nmax, l))
			Laux[i] = uint8(l)
			w := weights[i]
			fl := float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(float32(w*fl) * fl)
			sumXL += float32(float32(w*fl) * v)
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			curError := float32(0)
			for i, v := range x {
				diff := float32(float32(thisScale*float32(Laux[i]))+thisMin) - v
				curError += float32(weights[i] * errOf(diff))
			}
			if curError < bestError {
				copy(L[:n], Laux[:n])
				bestError = curError
				scale = thisScale
				mn = thisMin
			}
		}
	}
	return scale, -mn
}

// packQ2Bits stores 256 2-bit levels as ggml does: byte l of each 32-byte run holds the
// levels j+l, j+l+32, j+l+64, j+l+96 of its 128-value half.
func packQ2Bits(qs []byte, L []uint8) {
	for j := 0; j < QK_K; j += 128 {
		for l := 0; l < 32; l++ {
			qs[j/4+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
		}
	}
}

func quantizeQ2_K(dst []byte, src []float32) {
	var L [QK_K]uint8
	var Laux [16]uint8
	var weights [16]float32
	var mins, scales [QK_K / 16]float32
	const q4scale = 15
	p := qkx2Params{rmin: -0.5, rdelta: 0.1, nstep: 15, useMAD: true}
	for i := 0; i < len(src)/QK_K; i++ {
		x := src[i*QK_K : (i+1)*QK_K]
		b := dst[i*q2_KBytes : (i+1)*q2_KBytes]
		sc := b[:16]
		var maxScale, maxMin float32
		for j := 0; j < QK_K/16; j++ {
			for l := 0; l < 16; l++ {
				weights[l] = abs32(x[16*j+l])
			}
			scales[j], mins[j] = makeQkx2Quants(3, x[16*j:16*j+16], weights[:], L[16*j:], Laux[:], p)
			maxScale = max(maxScale, scales[j])
			maxMin = max(maxMin, mins[j])
		}
		if maxScale > 0 {
			iscale := float32(q4scale / maxScale)
			for j := range scales {
				sc[j] = uint8(nearestInt(float32(iscale * scales[j])))
			}
			putF16(b[80:], maxScale/q4scale)
		} else {
			clear(sc)
			putF16(b[80:], 0)
		}
		if maxMin > 0 {
			iscale := float32(q4scale / maxMin)
			for j := range mins {
				sc[j] |= uint8(nearestInt(float32(iscale*mins[j])) << 4)
			}
			putF16(b[82:], maxMin/q4scale)
		} else {
			putF16(b[82:], 0)
		}
		d, dmin := f16At(b[80:]), f16At(b[82:])
		for j := 0; j < QK_K/16; j++ {
			dj := float32(d * float32(sc[j]&0xf))
			if dj == 0 {
				continue
			}
			dm := float32(dmin * float32(sc[j]>>4))
			for ii := 0; ii < 16; ii++ {
				l := nearestInt((x[16*j+ii] + dm) / dj)
				L[16*j+ii] = uint8(max(0, min(3, l)))
			}
		}
		packQ2Bits(b[16:80], L[:])
	}
}

func quantizeQ3_K(dst []byte, src []float32) {
	var L [QK_K]int8
	var scales [QK_K / 16]float32
	for i := 0; i < len(src)/QK_K; i++ {
		x := src[i*QK_K : (i+1)*QK_K]
		b := dst[i*q3_KBytes : (i+1)*q3_KBytes]
		hmask, qs, sc := b[:32], b[32:96], b[96:108]
		var maxScale, amax float32
		for j := 0; j < QK_K/16; j++ {
			scales[j] = makeQ3Quants(4, x[16*j:16*j+16], L[16*j:])
			if s := abs32(scales[j]); s > amax {
				amax, maxScale = s, scales[j]
			}
		}
		clear(sc)
		if maxScale != 0 {
			iscale := float32(-32 / maxScale)
			for j := 0; j < QK_K/16; j++ {
				l := int8(nearestInt(float32(iscale * scales[j])))
				l = max(-32, min(31, l)) + 32
				if j < 8 {
					sc[j] = uint8(l) & 0xf
				} else {
					sc[j-8] |= (uint8(l) & 0xf) << 4
				}
				l >>= 4
				sc[j%4+8] |= uint8(l) << (2 * (j / 4))
			}
			putF16(b[108:], 1/iscale)
		} else {
			putF16(b[108:], 0)
		}
		d := f16At(b[108:])
		for j := 0; j < QK_K/16; j++ {
			var s uint8
			if j < 8 {
				s = sc[j] & 0xf
			} else {
				s = sc[j-8] >> 4
			}
			s |= ((sc[8+j%4] >> (2 * (j / 4))) & 3) << 4
			dj := float32(d * float32(int(s)-32))
			if dj == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				l := nearestInt(x[16*j+ii] / dj)
				L[16*j+ii] = int8(max(-4, min(3, l)) + 4)
			}
		}
		clear(hmask)
		m, hm := 0, uint8(1)
		var U [QK_K]uint8
		for j := 0; j < QK_K; j++ {
			if L[j] > 3 {
				hmask[m] |= hm
				L[j] -= 4
			}
			U[j] = uint8(L[j])
			if m++; m == QK_K/8 {
				m, hm = 0, hm<<1
			}
		}
		packQ2Bits(qs, U[:])
	}
}

// packScalesK4 stores eight 6-bit scales and mins in the 12-byte Q4_K/Q5_K layout.
func packScalesK4(s []byte, ls, lm *[8]uint8) {
	for j := 0; j < 8; j++ {
		if j < 4 {
			s[j] = ls[j]
			s[j+4] = lm[j]
		} else {
			s[j+4] = ls[j]&0xf | (lm[j]&0xf)<<4
			s[j-4] |= (ls[j] >> 4) << 6
			s[j] |= (lm[j] >> 4) << 6
		}
	}
}

// quantizeK4Levels is the part shared by the Q4_K and Q5_K reference quantizers: the
// per-group search, the packed scales, d and dmin in b[0:16], and the final levels.
func quantizeK4Levels(b []byte, x []float32, nmax int, p qkx2Params, L *[QK_K]uint8) {
	var Laux [32]uint8
	var weights [32]float32
	var mins, scales [8]float32
	var maxScale, maxMin float32
	for j := 0; j < QK_K/32; j++ {
		xs := x[32*j : 32*j+32]
		sumX2 := float32(0)
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := float32(math.Sqrt(float64(sumX2 / 32)))
		for l, v := range xs {
			weights[l] = avX + abs32(v)
		}
		scales[j], mins[j] = makeQkx2Quants(nmax, xs, weights[:], L[32*j:], Laux[:], p)
		maxScale = max(maxScale, scales[j])
		maxMin = max(maxMin, mins[j])
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	var ls, lm [8]uint8
	for j := range ls {
		ls[j] = min(63, uint8(nearestInt(float32(invScale*scales[j]))))
		lm[j] = min(63, uint8(nearestInt(float32(invMin*mins[j]))))
	}
	packScalesK4(b[4:16], &ls, &lm)
	putF16(b, maxScale/63)
	putF16(b[2:], maxMin/63)
	d, dmin := f16At(b), f16At(b[2:])
	for j := 0; j < QK_K/32; j++ {
		sc, m := scaleMinK4(j, b[4:16])
		dj := float32(d * float32(sc))
		if dj == 0 {
			continue
		}
		dm := float32(dmin * float32(m))
		for ii := 0; ii < 32; ii++ {
			l := nearestInt((x[32*j+ii] + dm) / dj)
			L[32*j+ii] = uint8(max(0, min(nmax, l)))
		}
	}
}

func quantizeQ4_K(dst []byte, src []float32) {
	var L [QK_K]uint8
	p := qkx2Params{rmin: -1, rdelta: 0.1, nstep: 20}
	for i := 0; i < len(src)/QK_K; i++ {
		b := dst[i*q4_KBytes : (i+1)*q4_KBytes]
		quantizeK4Levels(b, src[i*QK_K:(i+1)*QK_K], 15, p, &L)
		q := b[16:]
		for j := 0; j < QK_K; j += 64 {
			for l := 0; l < 32; l++ {
				q[l] = L[j+l] | L[j+l+32]<<4
			}
			q = q[32:]
		}
	}
}

func quantizeQ5_K(dst []byte, src []float32) {
	var L [QK_K]uint8
	p := qkx2Params{rmin: -0.5, rdelta: 0.1, nstep: 15}
	for i := 0; i < len(src)/QK_K; i++ {
		b := dst[i*q5_KBytes : (i+1)*q5_KBytes]
		quantizeK4Levels(b, src[i*QK_K:(i+1)*QK_K], 31, p, &L)
		qh, ql := b[16:48], b[48:]
		clear(qh)
		m1, m2 := uint8(1), uint8(2)
		for n := 0; n < QK_K; n += 64 {
			for j := 0; j < 32; j++ {
				l1, l2 := L[n+j], L[n+j+32]
				if l1 > 15 {
					l1 -= 16
					qh[j] |= m1
				}
				if l2 > 15 {
					l2 -= 16
					qh[j] |= m2
				}
				ql[j] = l1 | l2<<4
			}
			m1 <<= 2
			m2 <<= 2
			ql = ql[32:]
		}
	}
}

func quantizeQ6_K(dst []byte, src []float32) {
	var L [QK_K]int8
	var scales [QK_K / 16]float32
	for i := 0; i < len(src)/QK_K; i++ {
		x := src[i*QK_K : (i+1)*QK_K]
		b := dst[i*q6_KBytes : (i+1)*q6_KBytes]
		var maxScale, maxAbsScale float32
		for ib := 0; ib < QK_K/16; ib++ {
			scales[ib] = makeQxQuants(32, x[16*ib:16*ib+16], L[16*ib:])
			if a := abs32(scales[ib]); a > maxAbsScale {
				maxAbsScale, maxScale = a, scales[ib]
			}
		}
		if maxAbsScale < groupMaxEps {
			clear(b)
			continue
		}
		iscale := float32(-128 / maxScale)
		putF16(b[208:], 1/iscale)
		sc := b[192:208]
		for ib := range scales {
			sc[ib] = byte(int8(min(127, nearestInt(float32(iscale*scales[ib])))))
		}
		d := f16At(b[208:])
		for j := 0; j < QK_K/16; j++ {
			dj := float32(d * float32(int8(sc[j])))
			if dj == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				l := nearestInt(x[16*j+ii] / dj)
				L[16*j+ii] = int8(max(-32, min(31, l)) + 32)
			}
		}
		ql, qh := b[:128], b[128:192]
		for j := 0; j < QK_K; j += 128 {
			for l := 0; l < 32; l++ {
				q1 := uint8(L[j+l]) & 0xf
				q2 := uint8(L[j+l+32]) & 0xf
				q3 := uint8(L[j+l+64]) & 0xf
				q4 := uint8(L[j+l+96]) & 0xf
				ql[l] = q1 | q3<<4
				ql[l+32] = q2 | q4<<4
				qh[l] = uint8(L[j+l])>>4 | (uint8(L[j+l+32])>>4)<<2 | (uint8(L[j+l+64])>>4)<<4 | (uint8(L[j+l+96])>>4)<<6
			}
			ql, qh = ql[64:], qh[32:]
		}
	}
}

func quantizeQ8_K(dst []byte, src []float32) {
	for i := 0; i < len(src)/QK_K; i++ {
		x := src[i*QK_K : (i+1)*QK_K]
		b := dst[i*q8_KBytes : (i+1)*q8_KBytes]
		xmax, amax := absMax(x)
		if amax == 0 {
			clear(b) // ggml leaves bsums unset here; zero is what they would sum to.
			continue
		}
		iscale := float32(-127 / xmax)
		qs := b[4 : 4+QK_K]
		for j, v := range x {
			qs[j] = byte(int8(min(127, nearestInt(float32(iscale*v)))))
		}
		q8KBsums(b)
		binary.LittleEndian.PutUint32(b, math.Float32bits(1/iscale))
	}
}

// q8KBsums fills the sixteen group sums of a Q8_K block from its levels, eight bytes at
// a time: Σ int8 = Σ (byte XOR 0x80) − 128·8, the unsigned bytes summed in 16-bit lanes.
func q8KBsums(b []byte) {
	qs := b[4 : 4+QK_K]
	for g := 0; g < QK_K/16; g++ {
		s := int32(0)
		for h := 0; h < 2; h++ {
			v := binary.LittleEndian.Uint64(qs[16*g+8*h:]) ^ 0x8080808080808080
			v = v&0x00ff00ff00ff00ff + v>>8&0x00ff00ff00ff00ff
			s += int32(v*0x0001000100010001>>48) - 128*8
		}
		binary.LittleEndian.PutUint16(b[4+QK_K+2*g:], uint16(int16(s)))
	}
}
