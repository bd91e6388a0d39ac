package backend

import (
	"math"
	"slices"

	"github.com/minfer/minfer/sdk"
)

// The candidate order (sdk.RanksBefore, the order of the sampler's candidates) and the
// normaliser of a logits row, written once for every host side use: the CPU backend's
// TopK and RowStats, the CUDA backend's host fallbacks, the engine's judge, and the
// conformance tests that hold both backends to them. The CUDA kernels' ranks_before
// (cuda/kernels/common.cuh) is the device's copy, tested against TopKRow by
// core/backend/cuda's TestCandidateOrder.

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
	// Insertion into a sorted list of the best k so far, scanning ids in increasing
	// order.
	m := 0
	for i, v := range row {
		if m == k && !sdk.RanksBefore(v, int32(i), vals[k-1], ids[k-1]) {
			continue
		}
		j := m
		if m < k {
			m++
		} else {
			j = k - 1
		}
		for j > 0 && sdk.RanksBefore(v, int32(i), vals[j-1], ids[j-1]) {
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
		case sdk.RanksBefore(row[x], x, row[y], y):
			return -1
		case sdk.RanksBefore(row[y], y, row[x], x):
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
		if sdk.RanksBefore(v, int32(i), row[best], int32(best)) {
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
