package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Dot kernels: pure-Go definitions. The SIMD kernels (dot_amd64.go) compute exactly the
// same integers and float operations in the same order, so both paths give identical
// bits. The block formats follow ggml's x86 kernels operation for operation (see
// fma32 below). Float rows (F32/F16/BF16) use 32 lanes, value i in lane i%32, reduced
// lane-wise ((a0+a1)+(a2+a3)) over the four 8-lane groups, then as lanes8.

func init() {
	setDot(F32, F32, dotF32, quantizeF32)
	setDot(F16, F16, dotF16, F32RowToF16)
	setDot(BF16, BF16, dotBF16, quantizeBF16)
	setDot(Q4_0, Q8_0, dotQ4_0, nil)
	setDot(Q4_1, Q8_1, dotQ4_1, nil)
	setDot(Q5_0, Q8_0, dotQ5_0, nil)
	setDot(Q5_1, Q8_1, dotQ5_1, nil)
	setDot(Q8_0, Q8_0, dotQ8_0, fromFloatQ8_0)
	setDot(Q2_K, Q8_K, dotQ2_K, nil)
	setDot(Q3_K, Q8_K, dotQ3_K, nil)
	setDot(Q4_K, Q8_K, dotQ4_K, nil)
	setDot(Q5_K, Q8_K, dotQ5_K, nil)
	setDot(Q6_K, Q8_K, dotQ6_K, nil)
	table[Q8_1].FromFloat = fromFloatQ8_1
	table[Q8_K].FromFloat = quantizeQ8_K
}

func setDot(t, vdt Type, dot func(int, []byte, []byte) float32, fromFloat func([]byte, []float32)) {
	tr := table[t]
	tr.VecDotType = vdt
	tr.VecDot = dot
	if k := simdDot(t); k != nil {
		tr.VecDot = k
	}
	if fromFloat != nil {
		tr.FromFloat = fromFloat
	}
}

// VecDot is the checked form of Traits.VecDot: the dot of n values of weight type t in w
// with n activations of t's VecDotType in x.
func VecDot(t Type, n int, w, x []byte) (float32, error) {
	tr, ok := table[t]
	if !ok || tr.VecDot == nil {
		return 0, fmt.Errorf("quant: no dot kernel for %s", t)
	}
	wn, err := t.RowBytes(n)
	if err != nil {
		return 0, err
	}
	xn, err := tr.VecDotType.RowBytes(n)
	if err != nil {
		return 0, err
	}
	if len(w) < wn || len(x) < xn {
		return 0, fmt.Errorf("quant: dot of %d values of %s·%s needs %d and %d bytes, have %d and %d",
			n, t, tr.VecDotType, wn, xn, len(w), len(x))
	}
	return tr.VecDot(n, w, x), nil
}

// FromFloat converts an activation row to type t as ggml's CPU backend does (see
// Traits.FromFloat); dst must hold RowBytes(len(src)) bytes.
func FromFloat(t Type, dst []byte, src []float32) error {
	tr, ok := table[t]
	if !ok || tr.FromFloat == nil {
		return fmt.Errorf("quant: no activation quantizer for %s", t)
	}
	need, err := t.RowBytes(len(src))
	if err != nil {
		return err
	}
	if len(dst) < need {
		return fmt.Errorf("quant: %d values of %s need %d bytes, have %d", len(src), t, need, len(dst))
	}
	tr.FromFloat(dst[:need], src)
	return nil
}

// lanes8 are the eight float32 accumulator lanes of ggml's kernels; sum is hsum_float_8.
type lanes8 [8]float32

func (l *lanes8) sum() float32 {
	a0, a1 := l[0]+l[4], l[1]+l[5]
	a2, a3 := l[2]+l[6], l[3]+l[7]
	return (a0 + a2) + (a1 + a3)
}

// lanes32 holds the accumulators of the float-row dots.
type lanes32 [32]float32

func (l *lanes32) sum() float32 {
	var r lanes8
	for k := range r {
		r[k] = (l[k] + l[8+k]) + (l[16+k] + l[24+k])
	}
	return r.sum()
}

func dotF32(n int, w, x []byte) float32 {
	var acc lanes32
	w, x = w[:4*n], x[:4*n]
	for i := 0; i < n; i++ {
		a := math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:]))
		b := math.Float32frombits(binary.LittleEndian.Uint32(x[4*i:]))
		acc[i%32] += float32(a * b)
	}
	return acc.sum()
}

func dotF16(n int, w, x []byte) float32 {
	var acc lanes32
	dotF16Go(&acc, n, w, x)
	return acc.sum()
}

func dotF16Go(acc *lanes32, n int, w, x []byte) {
	w, x = w[:2*n], x[:2*n]
	for i := 0; i < n; i++ {
		acc[i%32] += float32(f16At(w[2*i:]) * f16At(x[2*i:]))
	}
}

func dotBF16(n int, w, x []byte) float32 {
	var acc lanes32
	w, x = w[:2*n], x[:2*n]
	for i := 0; i < n; i++ {
		a := BF16ToF32(binary.LittleEndian.Uint16(w[2*i:]))
		b := BF16ToF32(binary.LittleEndian.Uint16(x[2*i:]))
		acc[i%32] += float32(a * b)
	}
	return acc.sum()
}

// fma32 is a·b+c rounded once to float32, as the FMA instructions of ggml's kernels
// compute it. a·b is exact in float64; the float64 sum can round, and rounding that
// again to float32 could land on the wrong side of a float32 midpoint, so that case is
// detected (TwoSum error term) and resolved toward the exact value.
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := p + float64(c)
	f := float32(s)
	if float64(f) == s {
		return f
	}
	// Error of the float64 sum (exact: s + e == p + c).
	bb := s - p
	e := (p - (s - bb)) + (float64(c) - bb)
	if e == 0 {
		return f
	}
	// The float32 neighbour of s on the other side from f.
	g := math.Nextafter32(f, float32(math.Copysign(math.Inf(1), s-float64(f))))
	if s != (float64(f)+float64(g))/2 {
		return f
	}
	// s is exactly halfway: the exact value lies on e's side of it.
	if (e > 0) == (float64(g) > float64(f)) {
		return g
	}
	return f
}

// ggml's x86 dot kernels (AVX2, with AVX512-VNNI for the integer products; the build
// llama.cpp uses on this class of machine) keep eight float32 lanes: lane k of a 32-byte
// chunk is the integer sum over its bytes 4k..4k+3, and each block does
// acc[k] = fma(scale, float32(lane_k), acc[k]); the lanes are reduced at the end as
// ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)). Reproducing that order keeps minfer's logits
// bit-close to llama.cpp's: a one-ulp difference in a matmul output can flip the
// rounding of an activation quantized for the next matmul.

// laneInts are the eight lane sums of one 32-value chunk: lane k = Σ_{j=4k}^{4k+3} w_j·x_j.
type laneInts [8]int32

// addLanes adds the products of 32 weights (values given by wv) with 32 int8 activations.
func (l *laneInts) addLanes(wv func(j int) int32, x []byte, scale int32) {
	for k := 0; k < 8; k++ {
		var s int32
		for j := 4 * k; j < 4*k+4; j++ {
			s += wv(j) * int32(int8(x[j]))
		}
		l[k] += scale * s
	}
}

// fmaLanes does acc[k] = fma(d, float32(l[k]), acc[k]) for the eight lanes.
func (acc *lanes8) fmaLanes(d float32, l *laneInts) {
	for k := range acc {
		acc[k] = fma32(d, float32(l[k]), acc[k])
	}
}

func dotQ8_0(n int, w, x []byte) float32 {
	var acc lanes8
	for b := 0; b < n/qk; b++ {
		wb, xb := w[b*q8_0Bytes:(b+1)*q8_0Bytes], x[b*q8_0Bytes:(b+1)*q8_0Bytes]
		var l laneInts
		l.addLanes(func(j int) int32 { return int32(int8(wb[2+j])) }, xb[2:], 1)
		acc.fmaLanes(f16At(wb)*f16At(xb), &l)
	}
	return acc.sum()
}

// q4Value is value j (0..31) of a Q4_0/Q4_1 block's nibbles qs, minus bias.
func q4Value(qs []byte, j int, bias int32) int32 {
	if j < 16 {
		return int32(qs[j]&0xf) - bias
	}
	return int32(qs[j-16]>>4) - bias
}

// q5Value is value j of a Q5_0/Q5_1 block (nibble plus fifth bit), minus bias.
func q5Value(qh uint32, qs []byte, j int, bias int32) int32 {
	return q4Value(qs, j, 0) | int32(qh>>j&1)<<4 - bias
}

func dotQ4_0(n int, w, x []byte) float32 {
	var acc lanes8
	for b := 0; b < n/qk; b++ {
		wb, xb := w[b*q4_0Bytes:(b+1)*q4_0Bytes], x[b*q8_0Bytes:(b+1)*q8_0Bytes]
		var l laneInts
		l.addLanes(func(j int) int32 { return q4Value(wb[2:], j, 8) }, xb[2:], 1)
		acc.fmaLanes(f16At(wb)*f16At(xb), &l)
	}
	return acc.sum()
}

func dotQ5_0(n int, w, x []byte) float32 {
	var acc lanes8
	for b := 0; b < n/qk; b++ {
		wb, xb := w[b*q5_0Bytes:(b+1)*q5_0Bytes], x[b*q8_0Bytes:(b+1)*q8_0Bytes]
		qh := binary.LittleEndian.Uint32(wb[2:])
		var l laneInts
		l.addLanes(func(j int) int32 { return q5Value(qh, wb[6:], j, 16) }, xb[2:], 1)
		acc.fmaLanes(f16At(wb)*f16At(xb), &l)
	}
	return acc.sum()
}

// dotQ4_1 and dotQ5_1 add Σ m·s in a separate scalar sum, after the lanes (ggml's
// "summs"); each term is fused into that sum, summs = fma(m, s, summs), as GCC compiles
// ggml (-std=gnu11 contracts; the disassembly of ggml_vec_dot_q4_1_q8_1 shows
// vfmadd231ss).
func dotQ4_1(n int, w, x []byte) float32 {
	var acc lanes8
	var summs float32
	for b := 0; b < n/qk; b++ {
		wb, xb := w[b*q4_1Bytes:(b+1)*q4_1Bytes], x[b*q8_1Bytes:(b+1)*q8_1Bytes]
		summs = fma32(f16At(wb[2:]), f16At(xb[2:]), summs)
		var l laneInts
		l.addLanes(func(j int) int32 { return q4Value(wb[4:], j, 0) }, xb[4:], 1)
		acc.fmaLanes(f16At(wb)*f16At(xb), &l)
	}
	return acc.sum() + summs
}

func dotQ5_1(n int, w, x []byte) float32 {
	var acc lanes8
	var summs float32
	for b := 0; b < n/qk; b++ {
		wb, xb := w[b*q5_1Bytes:(b+1)*q5_1Bytes], x[b*q8_1Bytes:(b+1)*q8_1Bytes]
		summs = fma32(f16At(wb[2:]), f16At(xb[2:]), summs)
		qh := binary.LittleEndian.Uint32(wb[4:])
		var l laneInts
		l.addLanes(func(j int) int32 { return q5Value(qh, wb[8:], j, 0) }, xb[4:], 1)
		acc.fmaLanes(f16At(wb)*f16At(xb), &l)
	}
	return acc.sum() + summs
}

func sumI8(x []byte) int32 {
	var s int32
	for _, v := range x {
		s += int32(int8(v))
	}
	return s
}

// fromFloatQ8_0 is ggml's x86 quantize_row_q8_0: d = amax/127, values scaled by
// 127/amax and rounded half to even.
func fromFloatQ8_0(dst []byte, src []float32) {
	for i := 0; i < len(src)/qk; i++ {
		b := dst[i*q8_0Bytes : (i+1)*q8_0Bytes]
		putF16(b, q8Block(b[2:34], src[i*qk:(i+1)*qk]))
	}
}

// fromFloatQ8_1 is ggml's x86 quantize_row_q8_1 (as Q8_0, plus s = d·Σq).
func fromFloatQ8_1(dst []byte, src []float32) {
	for i := 0; i < len(src)/qk; i++ {
		b := dst[i*q8_1Bytes : (i+1)*q8_1Bytes]
		d := q8Block(b[4:36], src[i*qk:(i+1)*qk])
		putF16(b, d)
		putF16(b[2:], d*float32(sumI8(b[4:36])))
	}
}

// q8Block quantizes 32 values into qs the x86 way and returns the block scale d.
func q8Block(qs []byte, x []float32) float32 {
	_, amax := absMax(x)
	d := amax / 127
	id := float32(0)
	if amax != 0 {
		id = 127 / amax
	}
	for j, v := range x {
		qs[j] = byte(int8(math.RoundToEven(float64(v * id))))
	}
	return d
}
