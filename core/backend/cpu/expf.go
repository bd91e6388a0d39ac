package cpu

import "math"

// expf is glibc's expf (ARM optimized-routines' algorithm, in the -mfma build that glibc's
// ifunc selects on x86-64 CPUs with FMA), which ggml-cpu calls in its softmax, flash
// attention and scalar SiLU: x·32/ln2 = k + r, exp(x) = 2^(k/32)·p(r/32) with a 32-entry
// table and a cubic in double precision. GCC contracts x·InvLn2N into both of its uses
// (kd = fma(·, ·, shift), r = fma(·, ·, −kd)) and the polynomial into FMAs. Over every
// float32 input this gives glibc 2.36's bits (checked exhaustively against libm on this
// machine); float32(math.Exp(x)), the correctly rounded value, differs in ≈ 1 of 12 000
// inputs. The special cases follow glibc: −Inf → 0, NaN/+Inf → x+x, overflow → +Inf,
// underflow → 0.
func expf(x float32) float32 {
	const (
		invLn2N = 0x1.71547652b82fep+0 * 32
		shift   = 0x1.8p+52
		c0      = 0x1.c6af84b912394p-5 / 32 / 32 / 32
		c1      = 0x1.ebfce50fac4f3p-3 / 32 / 32
		c2      = 0x1.62e42ff0c52d6p-1 / 32
	)
	bits := math.Float32bits(x)
	if abstop := bits >> 20 & 0x7ff; abstop >= 0x42b { // |x| ≥ 88 or NaN
		switch {
		case bits == 0xff800000:
			return 0
		case abstop >= 0x7f8:
			return x + x
		case x > 0x1.62e42ep6:
			return float32(math.Inf(1))
		case x < -0x1.9fe368p6:
			return 0
		}
	}
	xd := float64(x)
	kd := math.FMA(invLn2N, xd, shift)
	ki := math.Float64bits(kd)
	kd -= shift
	r := math.FMA(invLn2N, xd, -kd)
	s := math.Float64frombits(exp2fTab[ki%32] + ki<<47)
	z := math.FMA(c0, r, c1)
	r2 := float64(r * r)
	y := math.FMA(c2, r, 1)
	y = math.FMA(z, r2, y)
	return float32(float64(y * s))
}

// exp2fTab[i] = bits(2^(i/32)) − i<<47 (glibc's __exp2f_data.tab): adding k<<47 for
// k = 32·e + i gives 2^(k/32).
var exp2fTab = [32]uint64{
	0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
	0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
	0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
	0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
	0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
	0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
	0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
	0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
}

// expfs writes dst[i] = expf(src[i]) (len(dst) ≥ len(src)), eight at a time with
// AVX-512, four with AVX2 (the same bits, TestExpfsMatchesExpf).
func expfs(dst, src []float32) {
	n := len(src)
	dst = dst[:n]
	m := 0
	switch {
	case useAVX512:
		m = n &^ 7
		if m > 0 {
			expfAVX512(&dst[0], &src[0], m)
		}
	case useAVX2:
		m = n &^ 3
		if m > 0 {
			expfAVX2(&dst[0], &src[0], m)
		}
	}
	for i := m; i < n; i++ {
		dst[i] = expf(src[i])
	}
}
