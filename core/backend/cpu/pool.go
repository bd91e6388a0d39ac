package cpu

import (
	"sync"
	"sync/atomic"
)

// pool runs one function on n goroutines at once: the caller is worker 0 and n-1
// long-lived goroutines are the others. A pool is used by one goroutine at a time.
type pool struct {
	n    int
	wake []chan task
	wg   sync.WaitGroup
}

// task is what a worker runs: fn(w) with w its worker index.
type task struct {
	fn func(w int)
}

func newPool(n int) *pool {
	p := &pool{n: n}
	for i := 1; i < n; i++ {
		ch := make(chan task, 1)
		p.wake = append(p.wake, ch)
		go p.worker(i, ch)
	}
	return p
}

func (p *pool) worker(id int, ch chan task) {
	for t := range ch {
		t.fn(id)
		p.wg.Done()
	}
}

// run calls fn(w) for w = 0..n-1 concurrently and waits for all of them.
func (p *pool) run(fn func(w int)) {
	if p.n == 1 {
		fn(0)
		return
	}
	p.wg.Add(p.n - 1)
	for _, ch := range p.wake {
		ch <- task{fn}
	}
	fn(0)
	p.wg.Wait()
}

// chunks splits [0, total) into pieces of at most chunk items handed out dynamically
// (an atomic counter), calling fn(w, lo, hi) for each on whichever worker is free.
// Work is split by whole items only, so results never depend on the split.
func (p *pool) chunks(total, chunk int, fn func(w, lo, hi int)) {
	if total <= 0 {
		return
	}
	if chunk < 1 {
		chunk = 1
	}
	if p.n == 1 || total <= chunk {
		for lo := 0; lo < total; lo += chunk {
			fn(0, lo, min(lo+chunk, total))
		}
		return
	}
	var next atomic.Int64
	p.run(func(w int) {
		for {
			lo := int(next.Add(int64(chunk))) - chunk
			if lo >= total {
				return
			}
			fn(w, lo, min(lo+chunk, total))
		}
	})
}

// serialWork is the amount of work (multiply-adds) below which an op runs on the
// calling goroutine alone: waking a parked worker and waiting for it costs tens of
// microseconds on a busy machine, more than ~250 k multiply-adds take (a k/v projection
// of a 0.5B model, one decode step's attention).
var serialWork = 1 << 18

// chunksWork is chunks, run serially when work < serialWork.
func (p *pool) chunksWork(work, total, chunk int, fn func(w, lo, hi int)) {
	if work < serialWork {
		if total > 0 {
			fn(0, 0, total)
		}
		return
	}
	p.chunks(total, chunk, fn)
}

// close stops the worker goroutines.
func (p *pool) close() {
	for _, ch := range p.wake {
		close(ch)
	}
	p.wake = nil
	p.n = 1
}
