package cpu

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolHandOff runs tasks back to back (workers still polling) and after pauses
// longer than spinFor (workers parked), and checks every worker runs every task exactly
// once and the caller returns only after all of them finished.
func TestPoolHandOff(t *testing.T) {
	for _, threads := range []int{2, 3} {
		p := newPool(threads)
		runs := make([]atomic.Int32, threads)
		for i := 0; i < 300; i++ {
			if i%25 == 0 {
				time.Sleep(3 * spinFor)
			}
			var done atomic.Int32
			p.run(func(w int) {
				runs[w].Add(1)
				done.Add(1)
			})
			if got := done.Load(); got != int32(threads) {
				t.Fatalf("threads=%d task %d: run returned after %d of %d workers", threads, i, got, threads)
			}
		}
		for w := range runs {
			if got := runs[w].Load(); got != 300 {
				t.Errorf("threads=%d: worker %d ran %d tasks, want 300", threads, w, got)
			}
		}
		p.close()
	}
}

// TestPoolFirstTaskBeforeWorkersStart: a task published before the worker goroutines
// first run must still reach them (they start from sequence 0).
func TestPoolFirstTaskBeforeWorkersStart(t *testing.T) {
	for i := 0; i < 50; i++ {
		p := newPool(4)
		var n atomic.Int32
		p.run(func(int) { n.Add(1) })
		if got := n.Load(); got != 4 {
			t.Fatalf("pool %d: first task ran on %d workers, want 4", i, got)
		}
		p.close()
	}
}
