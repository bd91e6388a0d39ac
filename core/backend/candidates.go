package backend

import (
	"math"
	"slices"
)

// The candidate order and the normaliser of a logits row, written once for every host
// side use: the CPU backend's TopK and RowStats, the CUDA backend's host fallbacks, the
// engine's judge, and the conformance tests that hold both backends to them. The CUDA
// kernels' ranks_before (cuda/kernels/common.cuh) is the device's copy, tested against
// RanksBefore by core/backend/cuda's TestCandidateOrder.
//
// The order: the larger value first, the lower column id on equal values (+0 and −0
// are equal), and every number, −Inf included, ahead of NaN; NaNs among themselves by
// id. It is a strict total order on (value, id) pairs with distinct ids.

// RanksBefore reports whether value v at column i comes before value w at column j in
// the candidate order.
func RanksBefore(v float32, i int32, w float32, j int32) bool {
	if vn, wn := v != v, w != w; vn || wn {
		if vn != wn {
			return wn
		}
		return i < j
	}
	return v > w || (v == w && i < j)
}

// valueAbove reports whether v ranks above w whatever their ids (a number above NaN,
// the larger number above the smaller); equal values, and two NaNs, are decided by id.
func valueAbove(v, w float32) bool { return v > w || (w != w && v == v) }

// TopKRow fills ids and vals (len k, 1 ≤ k ≤ len(row)) with the k first columns of row
// in the candidate order and their values.
func TopKRow(row []float32, ids []int32, vals []float32) {
	k := len(ids)
	if k > 64 {
		idx := make([]int32, len(row))
		SortCandidates(row, idx)
		for j := range k {
			ids[j], vals[j] = idx[j], row[idx[j]]
		}
		return
	}
	// Insertion into a sorted list of the best k so far; scanning ids in increasing
	// order means an equal value never displaces an earlier (lower) id.
	m := 0
	for i, v := range row {
		if m == k && !valueAbove(v, vals[k-1]) {
			continue
		}
		j := m
		if m < k {
			m++
		} else {
			j = k - 1
		}
		for j > 0 && valueAbove(v, vals[j-1]) {
			ids[j], vals[j] = ids[j-1], vals[j-1]
			j--
		}
		ids[j], vals[j] = int32(i), v
	}
}

// SortCandidates fills idx (len(row) values) with every column of row in the candidate
// order.
func SortCandidates(row []float32, idx []int32) {
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(x, y int32) int {
		switch {
		case RanksBefore(row[x], x, row[y], y):
			return -1
		case RanksBefore(row[y], y, row[x], x):
			return 1
		}
		return 0
	})
}

// Argmax is the first column of row in the candidate order (TopKRow with k = 1); 0 for
// an empty row.
func Argmax(row []float32) int {
	best := 0
	for i, v := range row {
		if valueAbove(v, row[best]) {
			best = i
		}
	}
	return best
}

// RowMax returns the largest number of row, NaN ignored (−Inf when the row holds no
// number), and whether the row holds a NaN.
func RowMax(row []float32) (m float32, nan bool) {
	m = float32(math.Inf(-1))
	for _, v := range row {
		if v > m {
			m = v
		} else if v != v {
			nan = true
		}
	}
	return m, nan
}

// SpecialLSE is log Σ exp of a row whose max (RowMax) is m where the row's special
// values alone decide it: NaN when the row holds a NaN, m itself when m is ±Inf (the row
// holds +Inf, or every value is −Inf). ok is false for every other row, whose sum of
// exp(x − m) decides (each term in [0, 1], the largest 1).
func SpecialLSE(m float32, nan bool) (lse float32, ok bool) {
	switch {
	case nan:
		return float32(math.NaN()), true
	case math.IsInf(float64(m), 0):
		return m, true
	}
	return 0, false
}

// MaxLSE is a row's max (RowMax) and log Σ exp(row), the sum in float64: the reference
// of RowStats' max and lse (backends accumulate in float32 and are held to it within a
// tolerance) and the host fallback's value.
func MaxLSE(row []float32) (float32, float64) {
	m, nan := RowMax(row)
	if lse, ok := SpecialLSE(m, nan); ok {
		return m, float64(lse)
	}
	var s float64
	for _, x := range row {
		s += math.Exp(float64(x) - float64(m))
	}
	return m, float64(m) + math.Log(s)
}
