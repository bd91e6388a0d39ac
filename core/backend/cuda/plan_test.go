package cuda

import (
	"testing"

	"github.com/minfer/minfer/cuda/driver"
)

// TestPlanMatMulPerNT checks the chooser against the Hopper tier's per-nt MMQRows: the
// path at each nt follows the set below 16, mmq from 16 to GEMMMinRows - 1, the GEMM from
// there, and MINFER_MMQ=all / MINFER_NO_MMQ override the set.
func TestPlanMatMulPerNT(t *testing.T) {
	tier, err := driver.TierByName("hopper")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		layout string
		nt     int
		sw     switches
		want   mmPath
		g      int
	}{
		{"q4_k", 1, switches{}, pathMV, 0},
		{"q4_k", 6, switches{}, pathMV, 0},
		{"q4_k", 7, switches{}, pathMMQ, 1},
		{"q4_k", 8, switches{}, pathMV, 0}, // the mat-vec's two rows per warp win at 8
		{"q4_k", 9, switches{}, pathMMQ, 2},
		{"q4_k", 16, switches{}, pathMMQ, 2},
		{"q4_k", 17, switches{}, pathMMQ, 4},
		{"q4_k", 64, switches{}, pathMMQ, 8},
		{"q4_k", 65, switches{}, pathGEMM, 0},
		{"q6_k", 5, switches{}, pathMV, 0},
		{"q6_k", 4, switches{}, pathMMQ, 1},
		{"q4_0", 3, switches{}, pathMV, 0},
		{"q4_0", 4, switches{}, pathMMQ, 1},
		{"q4_k", 2, switches{mmqAll: true}, pathMMQ, 1},
		{"q4_k", 32, switches{noMMQ: true}, pathMV, 0},
		{"f16", 8, switches{}, pathMV, 0}, // no mmq kernel for float weights
	}
	for _, c := range cases {
		p := planMatMul(tier, 90, c.sw, c.layout, 4096, 4096, c.nt)
		if p.path != c.want || (c.want == pathMMQ && p.g != c.g) {
			t.Errorf("%s nt %d %+v: path %v g %d, want %v g %d", c.layout, c.nt, c.sw, p.path, p.g, c.want, c.g)
		}
	}
	// Below sm_80 there is no int8 mma: the mat-vec at every nt below the GEMM.
	if p := planMatMul(tier, 75, switches{}, "q4_k", 4096, 4096, 16); p.path != pathMV {
		t.Errorf("sm_75 nt 16: %v, want the mat-vec", p.path)
	}
}
