package sdk

// RanksBefore reports whether the candidate of logit v and token id i comes before the
// candidate (w, j) in the order every SampleRow's candidates are in: the larger logit
// first, the lower id on equal logits (+0 and −0 are equal), every number (−Inf
// included) ahead of NaN, NaNs among themselves by id. It is a strict total order on
// candidates of distinct ids; the host's top-K (core/backend, and the CUDA kernels'
// ranks_before) and the built-in samplers use it.
func RanksBefore(v float32, i int32, w float32, j int32) bool {
	if vn, wn := v != v, w != w; vn || wn {
		if vn != wn {
			return wn
		}
		return i < j
	}
	return v > w || (v == w && i < j)
}
