package cpu

import "math"

// sinf and cosf are glibc's (sysdeps/ieee754/flt-32 s_sinf.c / s_cosf.c, glibc ≥ 2.28,
// the FMA build x86-64 CPUs with FMA run): double-precision range reduction and
// polynomials, the multiply-adds fused as GCC contracts them. ggml's RoPE cache calls
// libm's cosf/sinf, and they are not correctly rounded: about 1% of the RoPE values of
// a typical model differ by one ulp from float32(math.Cos(x)), which moves llama.cpp's
// logits by up to ~0.03 once an activation quantization rounds the other way.

// sincosfTable is __sincosf_table: {sign[4], hpi_inv·2^24, hpi, c0..c4, s1..s3}; the
// second entry has the cosine polynomial negated.
var sincosfTable = [2]struct {
	sign               [4]float64
	hpiInv, hpi        float64
	c0, c1, c2, c3, c4 float64
	s1, s2, s3         float64
}{
	{[4]float64{1, -1, -1, 1}, 0x1.45F306DC9C883p+23, 0x1.921FB54442D18p0,
		0x1p0, -0x1.ffffffd0c621cp-2, 0x1.55553e1068f19p-5, -0x1.6c087e89a359dp-10, 0x1.99343027bf8c3p-16,
		-0x1.555545995a603p-3, 0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13},
	{[4]float64{1, -1, -1, 1}, 0x1.45F306DC9C883p+23, 0x1.921FB54442D18p0,
		-0x1p0, 0x1.ffffffd0c621cp-2, -0x1.55553e1068f19p-5, 0x1.6c087e89a359dp-10, -0x1.99343027bf8c3p-16,
		-0x1.555545995a603p-3, 0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13},
}

// invPio4 is __inv_pio4: 4/π to 192 bits, 8 new bits per entry.
var invPio4 = [24]uint32{
	0xa2, 0xa2f9, 0xa2f983, 0xa2f9836e,
	0xf9836e4e, 0x836e4e44, 0x6e4e4415, 0x4e441529,
	0x441529fc, 0x1529fc27, 0x29fc2757, 0xfc2757d1,
	0x2757d1f5, 0x57d1f534, 0xd1f534dd, 0xf534ddc0,
	0x34ddc0db, 0xddc0db62, 0xc0db6295, 0xdb629599,
	0x6295993c, 0x95993c43, 0x993c4390, 0x3c439041,
}

const (
	pi63 = 0x1.921FB54442D18p-62 // 2π·2^-64
	pio4 = 0x1.921FB54442D18p-1  // π/4
)

// abstop12 is the top 12 bits of x's representation without the sign.
func abstop12(x float32) uint32 { return math.Float32bits(x) >> 20 & 0x7ff }

// sinfPoly is sinf_poly: the sine polynomial for even n, the cosine one for odd n.
func sinfPoly(x, x2 float64, t int, n int) float32 {
	p := &sincosfTable[t]
	if n&1 == 0 {
		x3 := x * x2
		s1 := math.FMA(x2, p.s3, p.s2)
		x7 := x3 * x2
		s := math.FMA(x3, p.s1, x)
		return float32(math.FMA(x7, s1, s))
	}
	x4 := x2 * x2
	c2 := math.FMA(x2, p.c4, p.c3)
	c1 := math.FMA(x2, p.c1, p.c0)
	x6 := x4 * x2
	c := math.FMA(x4, p.c2, c1)
	return float32(math.FMA(x6, c2, c))
}

// reduceFast is reduce_fast without TOINT_INTRINSICS: x mod π/2 in [-π/4, π/4] and the
// quadrant, for |x| < 120.
func reduceFast(x float64) (float64, int) {
	r := x * sincosfTable[0].hpiInv
	n := (int32(r) + 0x800000) >> 24
	return math.FMA(-float64(n), sincosfTable[0].hpi, x), int(n)
}

// reduceLarge is reduce_large: the same for the bits xi of a float ≥ 120 in magnitude
// (the sign is ignored), by a 32×96-bit product with 4/π.
func reduceLarge(xi uint32) (float64, int) {
	arr := invPio4[(xi>>26)&15:]
	shift := (xi >> 23) & 7
	xi = (xi & 0xffffff) | 0x800000
	xi <<= shift
	res0 := uint64(xi * arr[0])
	res1 := uint64(xi) * uint64(arr[4])
	res2 := uint64(xi) * uint64(arr[8])
	res0 = (res2 >> 32) | (res0 << 32)
	res0 += res1
	n := (res0 + 1<<61) >> 62
	res0 -= n << 62
	return float64(int64(res0)) * pi63, int(n)
}

// sinf is glibc's sinf (NaN for ±Inf and NaN).
func sinf(y float32) float32 {
	x := float64(y)
	switch top := abstop12(y); {
	case top < abstop12(pio4):
		if top < abstop12(0x1p-12) {
			return y
		}
		return sinfPoly(x, x*x, 0, 0)
	case top < abstop12(120):
		r, n := reduceFast(x)
		s := sincosfTable[0].sign[n&3]
		return sinfPoly(r*s, r*r, n>>1&1, n)
	case top < abstop12(float32(math.Inf(1))):
		xi := math.Float32bits(y)
		sign := int(xi >> 31)
		r, n := reduceLarge(xi)
		s := sincosfTable[0].sign[(n+sign)&3]
		return sinfPoly(r*s, r*r, (n+sign)>>1&1, n)
	}
	return float32(math.NaN())
}

// cosf is glibc's cosf (NaN for ±Inf and NaN).
func cosf(y float32) float32 {
	x := float64(y)
	switch top := abstop12(y); {
	case top < abstop12(pio4):
		if top < abstop12(0x1p-12) {
			return 1
		}
		return sinfPoly(x, x*x, 0, 1)
	case top < abstop12(120):
		r, n := reduceFast(x)
		s := sincosfTable[0].sign[n&3]
		return sinfPoly(r*s, r*r, n>>1&1, n^1)
	case top < abstop12(float32(math.Inf(1))):
		xi := math.Float32bits(y)
		sign := int(xi >> 31)
		r, n := reduceLarge(xi)
		s := sincosfTable[0].sign[(n+sign)&3]
		return sinfPoly(r*s, r*r, (n+sign)>>1&1, n^1)
	}
	return float32(math.NaN())
}
