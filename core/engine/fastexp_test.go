package engine

import (
	"math"
	"testing"
)

func TestExpNeg(t *testing.T) {
	worst := 0.0
	for i := 0; i <= 2_000_000; i++ {
		x := -87 * float32(i) / 2_000_000
		got, want := float64(expNeg(x)), math.Exp(float64(x))
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	if worst > 3e-7 {
		t.Fatalf("max relative error %.3g, want ≤ 3e-7", worst)
	}
	if expNeg(-100) != 0 || expNeg(0) != 1 {
		t.Fatalf("expNeg(-100) = %v, expNeg(0) = %v; want 0 and 1", expNeg(-100), expNeg(0))
	}
}

func TestMaxLSELargeRow(t *testing.T) {
	row := make([]float32, 151936)
	for i := range row {
		row[i] = float32(int64(mix(7, uint64(i))%20000)-12000) / 1000 // [-12, 8)
	}
	row[123456] = 9.5
	var sum float64
	for _, x := range row {
		sum += math.Exp(float64(x) - 9.5)
	}
	want := 9.5 + math.Log(sum)
	m, lse := maxLSE(row)
	if m != 9.5 || math.Abs(float64(lse)-want) > 1e-5*math.Abs(want) {
		t.Fatalf("got max %v lse %v, want 9.5 %v", m, lse, want)
	}
}
