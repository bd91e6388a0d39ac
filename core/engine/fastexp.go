package engine

import "math"

// expNeg is exp(x) for x ≤ 0 in float32 precision (relative error below 3e-7, a few float32 ulps), about
// five times faster than math.Exp: the log-sum-exp of every verify row runs over the
// whole vocabulary (150k values for Qwen), where math.Exp alone costs ~1 ms per row.
// exp(x) = 2^n · e^r with n = round(x/ln2) and |r| ≤ ln2/2, e^r by a degree-6
// polynomial (Taylor terms; the truncation error at |r| = 0.347 is 2.3e-8).
func expNeg(x float32) float32 {
	if x < -87 {
		return 0
	}
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693145751953125 // ln2 split so n·ln2hi is exact in float32
		ln2lo = 1.428606765330187e-06
	)
	n := float32(int32(x*log2e - 0.5)) // round to nearest (x ≤ 0: truncation is toward zero)
	r := x - n*ln2hi - n*ln2lo
	r2 := r * r // Estrin's scheme: three short chains instead of one long one
	p := (1 + r) + r2*((1.0/2+r*(1.0/6))+r2*((1.0/24+r*(1.0/120))+r2*(1.0/720)))
	return math.Float32frombits(math.Float32bits(p) + uint32(int32(n))<<23)
}
