package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Dot kernels: pure-Go definitions. The SIMD kernels (dot_amd64.go) compute exactly the
// same integers per block and add the float32 block partials in the same order, so both
// paths give identical bits.
//
// Summation order: the float32 partial of block b (one 32-value block, or one 256-value
// super-block for the K-quants) is added to lane b%8 of eight float32 accumulators, which
// are then reduced as ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), the order an 8-wide vector
// register reduces in. Float rows (F32/F16/BF16) use 32 lanes, value i in lane i%32,
// reduced lane-wise ((a0+a1)+(a2+a3)) over the four 8-lane groups, then as above.

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

// lanes8 holds the eight block accumulators of the fixed summation order.
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

// dot32i8 is the integer dot of 32 signed bytes.
func dot32i8(w, x []byte) int32 {
	var s int32
	for j := 0; j < 32; j++ {
		s += int32(int8(w[j])) * int32(int8(x[j]))
	}
	return s
}

func dotQ8_0(n int, w, x []byte) float32 {
	var acc lanes8
	for b := 0; b < n/qk; b++ {
		wb, xb := w[b*q8_0Bytes:(b+1)*q8_0Bytes], x[b*q8_0Bytes:(b+1)*q8_0Bytes]
		isum := dot32i8(wb[2:], xb[2:])
		acc[b%8] += float32(isum) * float32(f16At(wb)*f16At(xb))
	}
	return acc.sum()
}

// q4Ints is Σ (q-8)·x over one Q4_0 block's 32 values.
func q4Ints(qs, x []byte) int32 {
	var s int32
	for j := 0; j < 16; j++ {
		s += (int32(qs[j]&0xf) - 8) * int32(int8(x[j]))
		s += (int32(qs[j]>>4) - 8) * int32(int8(x[j+16]))
	}
	return s
}

func dotQ4_0(n int, w, x []byte) float32 {
	var acc lanes8
	for b := 0; b < n/qk; b++ {
		wb, xb := w[b*q4_0Bytes:(b+1)*q4_0Bytes], x[b*q8_0Bytes:(b+1)*q8_0Bytes]
		acc[b%8] += float32(q4Ints(wb[2:], xb[2:])) * float32(f16At(wb)*f16At(xb))
	}
	return acc.sum()
}

// q5Ints is Σ (q-bias)·x over one Q5 block, q = nibble | fifth bit << 4.
func q5Ints(qh uint32, qs, x []byte, bias int32) int32 {
	var s int32
	for j := 0; j < 16; j++ {
		lo := int32(qs[j]&0xf) | int32(qh>>j&1)<<4
		hi := int32(qs[j]>>4) | int32(qh>>(j+16)&1)<<4
		s += (lo - bias) * int32(int8(x[j]))
		s += (hi - bias) * int32(int8(x[j+16]))
	}
	return s
}

func dotQ5_0(n int, w, x []byte) float32 {
	var acc lanes8
	for b := 0; b < n/qk; b++ {
		wb, xb := w[b*q5_0Bytes:(b+1)*q5_0Bytes], x[b*q8_0Bytes:(b+1)*q8_0Bytes]
		isum := q5Ints(binary.LittleEndian.Uint32(wb[2:]), wb[6:], xb[2:], 16)
		acc[b%8] += float32(isum) * float32(f16At(wb)*f16At(xb))
	}
	return acc.sum()
}

func dotQ4_1(n int, w, x []byte) float32 {
	var acc lanes8
	for b := 0; b < n/qk; b++ {
		wb, xb := w[b*q4_1Bytes:(b+1)*q4_1Bytes], x[b*q8_1Bytes:(b+1)*q8_1Bytes]
		isum := q4Ints(wb[4:], xb[4:]) + 8*sumI8(xb[4:36])
		acc[b%8] += float32(float32(isum)*float32(f16At(wb)*f16At(xb))) + float32(f16At(wb[2:])*f16At(xb[2:]))
	}
	return acc.sum()
}

func dotQ5_1(n int, w, x []byte) float32 {
	var acc lanes8
	for b := 0; b < n/qk; b++ {
		wb, xb := w[b*q5_1Bytes:(b+1)*q5_1Bytes], x[b*q8_1Bytes:(b+1)*q8_1Bytes]
		isum := q5Ints(binary.LittleEndian.Uint32(wb[4:]), wb[8:], xb[4:], 0)
		acc[b%8] += float32(float32(isum)*float32(f16At(wb)*f16At(xb))) + float32(f16At(wb[2:])*f16At(xb[2:]))
	}
	return acc.sum()
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
