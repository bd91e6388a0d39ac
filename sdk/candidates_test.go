package sdk

import (
	"math"
	"testing"
)

func TestRanksBefore(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negZ := float32(math.Copysign(0, -1))
	for _, tc := range []struct {
		v    float32
		i    int32
		w    float32
		j    int32
		want bool
	}{
		{2, 5, 1, 0, true},       // the larger logit
		{1, 0, 1, 5, true},       // equal: the lower id
		{1, 5, 1, 0, false},      //
		{0, 3, negZ, 1, false},   // +0 and -0 are equal
		{-inf, 9, nan, 0, true},  // every number ahead of NaN
		{nan, 0, -inf, 9, false}, //
		{nan, 1, nan, 2, true},   // NaNs by id
		{inf, 4, inf, 4, false},  // not before itself
	} {
		if got := RanksBefore(tc.v, tc.i, tc.w, tc.j); got != tc.want {
			t.Errorf("RanksBefore(%v, %d, %v, %d): got %v, want %v", tc.v, tc.i, tc.w, tc.j, got, tc.want)
		}
	}
}
