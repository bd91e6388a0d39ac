package cpu

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolHandOff runs ops back to back (workers still polling) and after pauses
// longer than spinFor (workers parked), with chunk counts from 2 to 40, and checks
// every item of every op runs exactly once, on a worker id in range that is not running
// another chunk at the same time, and that chunks returns only after all of them
// finished. Workers that wake late over-claim on a later op: the counts catch any chunk
// run twice or skipped.
func TestPoolHandOff(t *testing.T) {
	for _, threads := range []int{2, 3} {
		p := newPool(threads)
		busy := make([]atomic.Bool, threads)
		for i := 0; i < 300; i++ {
			if i%25 == 0 {
				time.Sleep(3 * spinFor)
			}
			total, chunk := 2+i%40, 1+i%3
			hits := make([]atomic.Int32, total)
			var done atomic.Int32
			p.chunks(total, chunk, func(w, lo, hi int) {
				if w < 0 || w >= threads {
					t.Errorf("threads=%d op %d: worker %d out of range", threads, i, w)
					return
				}
				if !busy[w].CompareAndSwap(false, true) {
					t.Errorf("threads=%d op %d: worker %d runs two chunks at once", threads, i, w)
				}
				for j := lo; j < hi; j++ {
					hits[j].Add(1)
				}
				done.Add(int32(hi - lo))
				busy[w].Store(false)
			})
			if got := done.Load(); got != int32(total) {
				t.Fatalf("threads=%d op %d: chunks returned after %d of %d items", threads, i, got, total)
			}
			for j := range hits {
				if got := hits[j].Load(); got != 1 {
					t.Fatalf("threads=%d op %d: item %d ran %d times, want 1", threads, i, j, got)
				}
			}
		}
		p.close()
	}
}

// TestPoolWorkersJoin: the caller's first chunk blocks until another worker has run a
// chunk, so every op needs a worker to receive it, whether it is polling (back to back),
// parked (after a pause) or not started yet (a new pool). A lost wake-up fails the op
// after 10 s instead of hanging.
func TestPoolWorkersJoin(t *testing.T) {
	for i := 0; i < 60; i++ {
		p := newPool(2)
		for op := 0; op < 3; op++ {
			if op == 2 {
				time.Sleep(3 * spinFor)
			}
			var helped atomic.Bool
			p.chunks(2, 1, func(w, lo, hi int) {
				if w != 0 {
					helped.Store(true)
					return
				}
				deadline := time.Now().Add(10 * time.Second)
				for !helped.Load() {
					if time.Now().After(deadline) {
						t.Errorf("pool %d op %d: no worker took the second chunk in 10 s", i, op)
						return
					}
				}
			})
			if !helped.Load() {
				p.close()
				t.FailNow()
			}
		}
		p.close()
	}
}
