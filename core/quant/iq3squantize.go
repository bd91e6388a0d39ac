package quant

import (
	"math"
	"sync"
)

// The IQ3_S quantizer: ggml's quantize_iq3_s without an importance matrix (weights x²),
// what llama-quantize runs; float operations one for one as in kquantize.go (ggml
// compiles its quantizers without FMA contraction), so the bytes match llama-quantize's.
//
// Each group of 32 values is quantized on its own: magnitudes to the odd levels 1..15
// times a scale, four at a time to a point of the 512-point codebook (a point off the
// codebook goes to its best neighbour on it), trying 19 scales and keeping the
// least-squares best; then the super-block scale d maps the largest group scale to 31
// (stored as d·1.033) and each group's scale to its 4-bit s of d·(1+2s).

// iq3SIndex maps four 3-bit levels (l_i = (mag_i-1)/2, value i in bits 3i..3i+2) to
// their codebook entry, or to -1 when they are not on the codebook; iq3SNeighbours
// lists, for a point off the codebook, the entries at its three smallest squared
// distances in (distance, entry) order (ggml's kmap_q3xs / kneighbors_q3xs).
var (
	iq3SOnce       sync.Once
	iq3SIndex      [4096]int16
	iq3SNeighbours [4096][]uint16
)

func iq3SInit() {
	for i := range iq3SIndex {
		iq3SIndex[i] = -1
	}
	for j, e := range iq3SGrid {
		iq3SIndex[iq3SLevels(e)] = int16(j)
	}
	var d2 [len(iq3SGrid)]int
	for u := range iq3SIndex {
		if iq3SIndex[u] >= 0 {
			continue
		}
		for j, e := range iq3SGrid {
			d2[j] = 0
			for k := 0; k < 4; k++ {
				d := int(e>>(8*k)&0xff) - (2*(u>>(3*k)&7) + 1)
				d2[j] += d * d
			}
		}
		// The three smallest distances, then the entries at each in index order: the
		// (distance, entry) order of ggml's sort.
		var levels []int
		for len(levels) < 3 {
			next := -1
			for _, v := range d2 {
				if (len(levels) == 0 || v > levels[len(levels)-1]) && (next < 0 || v < next) {
					next = v
				}
			}
			if next < 0 {
				break
			}
			levels = append(levels, next)
		}
		var list []uint16
		for _, lv := range levels {
			for j, v := range d2 {
				if v == lv {
					list = append(list, uint16(j))
				}
			}
		}
		iq3SNeighbours[u] = list
	}
}

// iq3SLevels is the 12-bit level index of a codebook entry.
func iq3SLevels(e uint32) int {
	u := 0
	for k := 0; k < 4; k++ {
		u |= int((e>>(8*k)&0xff-1)/2) << (3 * k)
	}
	return u
}

// iq3SNearest puts in L the levels of the neighbour of point u (off the codebook) that is
// nearest to the magnitudes x at this scale, weighted by w, and returns its entry
// (ggml's iq3_find_best_neighbour: the first of equal distances).
func iq3SNearest(u int, x, w []float32, scale float32, L []int8) int {
	best, bestD2 := -1, float32(math.MaxFloat32)
	for _, j := range iq3SNeighbours[u] {
		e := iq3SGrid[j]
		var d2 float32
		for i := 0; i < 4; i++ {
			diff := float32(scale*float32(e>>(8*i)&0xff)) - x[i]
			d2 += float32(float32(w[i]*diff) * diff)
		}
		if d2 < bestD2 {
			best, bestD2 = int(j), d2
		}
	}
	e := iq3SGrid[best]
	for i := 0; i < 4; i++ {
		L[i] = int8((e>>(8*i)&0xff - 1) / 2)
	}
	return best
}

// iq3SPoint rounds four magnitudes at inverse scale id to levels 0..7 and returns their
// codebook entry, or the nearest neighbour's (levels written to L) when they are off it.
func iq3SPoint(x, waux []float32, id, scale float32, L []int8) (entry int, onGrid bool) {
	u := 0
	for i := 0; i < 4; i++ {
		l := nearestInt(float32(0.5 * float32(float32(id*x[i])-1)))
		l = max(0, min(7, l))
		L[i] = int8(l)
		u |= l << (3 * i)
	}
	if g := iq3SIndex[u]; g >= 0 {
		return int(g), true
	}
	return iq3SNearest(u, x, waux, scale, L), false
}

func iq3SSums(x, w []float32, L []int8) (sumqx, sumq2 float32) {
	for i := range x {
		q := float32(2*int(L[i]) + 1)
		sumqx += float32(float32(w[i]*x[i]) * q)
		sumq2 += float32(float32(w[i]*q) * q)
	}
	return sumqx, sumq2
}

func quantizeIQ3_S(dst []byte, src []float32) {
	iq3SOnce.Do(iq3SInit)
	const kMaxQ = 8
	var weight, waux, xval [32]float32
	var L, Laux [32]int8
	var onGrid, onGridAux [8]bool
	var blockSigns [4]byte
	var scales [QK_K / 32]float32
	for ibl := 0; ibl < len(src)/QK_K; ibl++ {
		b := dst[ibl*iq3SBytes : (ibl+1)*iq3SBytes]
		clear(b)
		qs, qh, signs := b[2:66], b[66:74], b[74:106]
		var maxScale float32
		for ib := 0; ib < QK_K/32; ib++ {
			xb := src[ibl*QK_K+32*ib : ibl*QK_K+32*ib+32]
			for i, v := range xb {
				weight[i] = float32(v * v)
				waux[i] = float32(math.Sqrt(float64(weight[i])))
			}
			for k := 0; k < 4; k++ {
				var s byte
				for i := 0; i < 8; i++ {
					if v := xb[8*k+i]; v >= 0 {
						xval[8*k+i] = v
					} else {
						xval[8*k+i] = -v
						s |= 1 << i
					}
				}
				blockSigns[k] = s
			}
			mx := xval[0]
			for _, v := range xval[1:] {
				mx = max(mx, v)
			}
			clear(L[:])
			if mx == 0 {
				// ggml leaves this group's codebook indices and signs unwritten and does
				// not advance past them: the next group's land in their place.
				scales[ib] = 0
				continue
			}
			var best float32
			scale := mx / (2*kMaxQ - 1)
			clear(onGrid[:])
			for is := -9; is <= 9; is++ {
				id := float32(float32(2*kMaxQ-1)+float32(float32(is)*0.2)) / mx
				thisScale := 1 / id
				for k := 0; k < 8; k++ {
					_, onGridAux[k] = iq3SPoint(xval[4*k:4*k+4], waux[4*k:4*k+4], id, thisScale, Laux[4*k:4*k+4])
				}
				sumqx, sumq2 := iq3SSums(xval[:], weight[:], Laux[:])
				if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
					scale = sumqx / sumq2
					best = float32(scale * sumqx)
					L = Laux
					onGrid = onGridAux
				}
			}
			offGrid := false
			for _, on := range onGrid {
				offGrid = offGrid || !on
			}
			if offGrid && scale > 0 {
				id := 1 / scale
				for k := 0; k < 8; k++ {
					iq3SPoint(xval[4*k:4*k+4], waux[4*k:4*k+4], id, scale, L[4*k:4*k+4])
				}
				if sumqx, sumq2 := iq3SSums(xval[:], weight[:], L[:]); sumq2 > 0 {
					scale = sumqx / sumq2
				}
			}
			if scale < 0 { // ggml's guard; the scales above are never negative
				scale = -scale
				for k := range blockSigns {
					blockSigns[k] = ^blockSigns[k]
				}
			}
			for k := 0; k < 8; k++ {
				u := 0
				for i := 0; i < 4; i++ {
					u |= int(L[4*k+i]) << (3 * i)
				}
				g := int(iq3SIndex[u])
				if g < 0 {
					panic("BUG: quant: IQ3_S levels off the codebook")
				}
				qs[k] = byte(g)
				qh[ib] |= byte(g>>8) << k
			}
			qs = qs[8:]
			copy(signs, blockSigns[:])
			signs = signs[4:]
			scales[ib] = scale
			maxScale = max(maxScale, scale)
		}
		if maxScale == 0 {
			continue
		}
		d := maxScale / 31
		putF16(b, float32(d*1.033))
		id := 1 / d
		for ib := 0; ib < QK_K/32; ib += 2 {
			l1 := max(0, min(15, nearestInt(float32(0.5*float32(float32(id*scales[ib])-1)))))
			l2 := max(0, min(15, nearestInt(float32(0.5*float32(float32(id*scales[ib+1])-1)))))
			b[106+ib/2] = byte(l1 | l2<<4)
		}
	}
}
