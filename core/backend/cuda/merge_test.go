package cuda

import (
	"strings"
	"testing"

	"github.com/minfer/minfer/cuda"
)

// TestMergeMV checks which held-back mat-vec launches share one kernel launch: the same
// kernel, x and width, at most mvMaxSets weights; other launches keep their order.
func TestMergeMV(t *testing.T) {
	mv := func(name string, x cuda.DevicePtr, cols, rows int, dst cuda.DevicePtr) launchSpec {
		rpb := 4 * mmvqRowsPerWarp(strings.Split(name, "_")[1])
		return launchSpec{name: name, grid: cuda.Dim3{X: ceilDiv(rows, rpb)}, bias: true,
			mv: &mvSpec{xq: x, xd: x + 1, cols: cols, rowsPerBlock: rpb, sets: []mvSet{{q: dst + 100, dst: dst, rows: rows}}}}
	}
	other := launchSpec{name: "gemm_f16w", grid: cuda.Dim3{X: 7}}
	ls := []launchSpec{
		mv("mmvq_q8_0_1", 1000, 896, 896, 1), // q
		mv("mmvq_q8_0_1", 1000, 896, 128, 2), // k: joins q
		other,
		mv("mmvq_q6_k_1", 1000, 896, 128, 3), // v: another kernel
		mv("mmvq_q8_0_1", 1000, 896, 128, 4), // joins q, k (three sets)
		mv("mmvq_q8_0_1", 1000, 896, 64, 5),  // q+k+… is full: a new launch
		mv("mmvq_q8_0_1", 2000, 896, 64, 6),  // another x
		mv("mmvq_f16w_3", 3000, 896, 896, 7), // two weight rows per warp
		mv("mmvq_f16w_3", 3000, 896, 128, 8),
	}
	got := mergeMV(ls)
	want := []struct {
		name  string
		dsts  []cuda.DevicePtr
		gridX int
	}{
		{"mmvq_q8_0_1", []cuda.DevicePtr{1, 2, 4}, 224 + 32 + 32},
		{"gemm_f16w", nil, 7},
		{"mmvq_q6_k_1", []cuda.DevicePtr{3}, 32},
		{"mmvq_q8_0_1", []cuda.DevicePtr{5}, 16},
		{"mmvq_q8_0_1", []cuda.DevicePtr{6}, 16},
		{"mmvq_f16w_3", []cuda.DevicePtr{7, 8}, 112 + 16},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d launches, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.name != w.name || g.grid.X != w.gridX {
			t.Errorf("launch %d: %s grid %d, want %s grid %d", i, g.name, g.grid.X, w.name, w.gridX)
		}
		if w.dsts == nil {
			if g.mv != nil {
				t.Errorf("launch %d: became a mat-vec launch", i)
			}
			continue
		}
		if len(g.mv.sets) != len(w.dsts) {
			t.Fatalf("launch %d: %d sets, want %d", i, len(g.mv.sets), len(w.dsts))
		}
		for j, d := range w.dsts {
			if g.mv.sets[j].dst != d {
				t.Errorf("launch %d set %d: dst %d, want %d", i, j, g.mv.sets[j].dst, d)
			}
		}
		if n := len(g.mv.args()); n != 4+6*mvMaxSets {
			t.Errorf("launch %d: %d kernel arguments, want %d", i, n, 4+6*mvMaxSets)
		}
	}
	// The inputs' specs are not modified (a pending matmul may still fold a bias).
	if len(ls[0].mv.sets) != 1 {
		t.Errorf("merging changed the first input launch: %d sets", len(ls[0].mv.sets))
	}
}
