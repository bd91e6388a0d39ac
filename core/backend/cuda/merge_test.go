package cuda

import (
	"strconv"
	"strings"
	"testing"

	"github.com/minfer/minfer/cuda/driver"
)

// mv is a held-back one-row-per-warp mat-vec launch (4 warps per block) named
// mmvq_KERNEL_NT, which the tier lets take two rows per warp.
func mv(name string, x driver.DevicePtr, cols, rows int, dst driver.DevicePtr) launchSpec {
	i, j := strings.Index(name, "_"), strings.LastIndex(name, "_")
	nt, _ := strconv.Atoi(name[j+1:])
	return launchSpec{name: name, grid: driver.Dim3{X: ceilDiv(rows, 4)}, bias: true,
		mv: &mvSpec{xq: x, xd: x + 1, cols: cols, rowsPerBlock: 4, kernel: name[i+1 : j], nt: nt, pair: true,
			sets: []mvSet{{q: dst + 100, dst: dst, rows: rows}}}}
}

// TestMergeMV checks which held-back mat-vec launches share one kernel launch: the same
// kernel, x and width, at most mvMaxSets weights; other launches keep their order.
func TestMergeMV(t *testing.T) {
	other := launchSpec{name: "gemm_f16w", grid: driver.Dim3{X: 7}}
	ls := []launchSpec{
		mv("mmvq_q8_0_1", 1000, 896, 896, 1), // q
		mv("mmvq_q8_0_1", 1000, 896, 128, 2), // k: joins q
		other,
		mv("mmvq_q6_k_1", 1000, 896, 128, 3), // v: another kernel
		mv("mmvq_q8_0_1", 1000, 896, 128, 4), // joins q, k (three sets)
		mv("mmvq_q8_0_1", 1000, 896, 64, 5),  // q+k+… is full: a new launch
		mv("mmvq_q8_0_1", 2000, 896, 64, 6),  // another x
		mv("mmvq_f16v_3", 3000, 896, 896, 7),
		mv("mmvq_f16v_3", 3000, 896, 128, 8),
	}
	got := mergeMV(ls)
	want := []struct {
		name  string
		dsts  []driver.DevicePtr
		gridX int
	}{
		{"mmvq_q8_0_1", []driver.DevicePtr{1, 2, 4}, 224 + 32 + 32},
		{"gemm_f16w", nil, 7},
		{"mmvq_q6_k_1", []driver.DevicePtr{3}, 32},
		{"mmvq_q8_0_1", []driver.DevicePtr{5}, 16},
		{"mmvq_q8_0_1", []driver.DevicePtr{6}, 16},
		{"mmvq_f16v_3", []driver.DevicePtr{7, 8}, 224 + 32},
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
		if n := len(g.mv.args()); n != 4+7*mvMaxSets {
			t.Errorf("launch %d: %d kernel arguments, want %d", i, n, 4+7*mvMaxSets)
		}
	}
	// The inputs' specs are not modified (a pending matmul may still fold a bias).
	if len(ls[0].mv.sets) != 1 {
		t.Errorf("merging changed the first input launch: %d sets", len(ls[0].mv.sets))
	}
}

// TestPairUp: a launch the tier lets take two weight rows per warp does when the pairs
// still give every SM a block (here 132), judged on a merged launch's rows together;
// MINFER_PAIR_ROWS=all pairs it whatever its size; a launch the tier does not allow
// keeps one row per warp.
func TestPairUp(t *testing.T) {
	merged := mergeMV([]launchSpec{mv("mmvq_q4_k_1", 1, 3584, 3584, 1), mv("mmvq_q4_k_1", 1, 3584, 512, 2), mv("mmvq_q4_k_1", 1, 3584, 512, 3)})
	small := mv("mmvq_q8_0_2", 2, 896, 896, 4)
	barred := mv("mmvq_q4_0_1", 3, 4096, 14336, 5)
	barred.mv.pair = false
	for _, tc := range []struct {
		force     bool
		want      []string
		grid, rpw []int
	}{
		{false, []string{"mmvq_q4_kw_1", "mmvq_q8_0_2", "mmvq_q4_0_1"}, []int{448 + 64 + 64, 224, 3584}, []int{2, 1, 1}},
		{true, []string{"mmvq_q4_kw_1", "mmvq_q8_0w_2", "mmvq_q4_0_1"}, []int{448 + 64 + 64, 112, 3584}, []int{2, 2, 1}},
	} {
		ls := []launchSpec{merged[0], small, barred}
		pairUp(ls, pairRule{warps: 4, minBlocks: 132, force: tc.force})
		for i, l := range ls {
			if rpw := l.mv.rowsPerBlock / 4; l.name != tc.want[i] || l.grid.X != tc.grid[i] || rpw != tc.rpw[i] {
				t.Errorf("force %v, launch %d: %s grid %d, %d rows per warp; want %s grid %d, %d", tc.force, i, l.name, l.grid.X, rpw,
					tc.want[i], tc.grid[i], tc.rpw[i])
			}
		}
		if merged[0].name != "mmvq_q4_k_1" || merged[0].mv.rowsPerBlock != 4 {
			t.Errorf("pairUp modified its input's spec: %s, %d rows per block", merged[0].name, merged[0].mv.rowsPerBlock)
		}
	}
}
