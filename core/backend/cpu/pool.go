package cpu

import (
	"sync/atomic"
	"time"
)

// pool runs one function on n goroutines at once: the caller is worker 0 and n-1
// long-lived goroutines are the others. A pool is used by one goroutine at a time.
//
// Hand-off: the caller publishes the task and bumps seq; a worker that finished its last
// task less than spinFor ago is still polling seq and starts at once; one that has
// parked (blocked on its channel) is woken through the channel. Decode runs ≈ 150
// parallel ops per token tens of microseconds apart, and waking a parked goroutine costs
// about that much, so the second worker used to join late. The caller waits for the
// workers the same way: polling first, then parked on done.
type pool struct {
	n       int
	fn      func(w int)   // the current task, written before seq is bumped
	seq     atomic.Uint64 // task number; bumped once per run
	pending atomic.Int32  // workers that have not finished the current task
	stop    atomic.Bool
	workers []poolWorker
	// waiting is set while the caller is parked on done.
	waiting atomic.Bool
	done    chan struct{}
}

type poolWorker struct {
	parked atomic.Bool // blocked on wake (or about to be); cleared by whoever wakes it
	wake   chan struct{}
	_      [48]byte // keep workers' flags on separate cache lines
}

// spinFor is how long a worker polls for the next task, and the caller for the
// workers, before blocking. Measured (docs/perf-cpu.md, Qwen2.5-0.5B, -t 2): on a quiet
// machine 50 µs raised decode from 31 to 38 t/s (Q8_0) and 43 to 59 t/s (Q4_0), 15 µs
// only to 49 (Q4_0), 200 µs 4 % more than 50 µs; with the two cores busy with other
// processes, 50 µs cost ≈ 17 % (the polling spends the process's share).
var spinFor = 50 * time.Microsecond

func newPool(n int) *pool {
	p := &pool{n: n, workers: make([]poolWorker, n), done: make(chan struct{}, 1)}
	for i := 1; i < n; i++ {
		p.workers[i].wake = make(chan struct{}, 1)
		go p.worker(i)
	}
	return p
}

// spin polls cond for up to spinFor; it reports whether cond became true.
func spin(cond func() bool) bool {
	var start time.Time
	for i := 0; ; i++ {
		if cond() {
			return true
		}
		if i&63 == 63 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > spinFor {
				return false
			}
		}
	}
}

func (p *pool) worker(id int) {
	me := &p.workers[id]
	var seen uint64 // the pool starts at seq 0; a task may come before this goroutine runs
	for {
		if !spin(func() bool { return p.seq.Load() != seen }) {
			me.parked.Store(true)
			if p.seq.Load() != seen && me.parked.CompareAndSwap(true, false) {
				// A task came while parking and nobody is sending: run it.
			} else {
				<-me.wake
			}
		}
		if p.stop.Load() {
			return
		}
		seen = p.seq.Load()
		p.fn(id)
		if p.pending.Add(-1) == 0 && p.waiting.CompareAndSwap(true, false) {
			p.done <- struct{}{}
		}
	}
}

// run calls fn(w) for w = 0..n-1 concurrently and waits for all of them.
func (p *pool) run(fn func(w int)) {
	if p.n == 1 {
		fn(0)
		return
	}
	p.fn = fn
	p.pending.Store(int32(p.n - 1))
	p.seq.Add(1)
	for i := 1; i < p.n; i++ {
		if w := &p.workers[i]; w.parked.CompareAndSwap(true, false) {
			w.wake <- struct{}{}
		}
	}
	fn(0)
	if !spin(func() bool { return p.pending.Load() == 0 }) {
		p.waiting.Store(true)
		if p.pending.Load() == 0 && p.waiting.CompareAndSwap(true, false) {
			// The last worker finished while we were parking.
		} else {
			<-p.done
		}
	}
	p.fn = nil
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
	if p.n == 1 {
		return
	}
	p.stop.Store(true)
	p.seq.Add(1)
	for i := 1; i < p.n; i++ {
		if w := &p.workers[i]; w.parked.CompareAndSwap(true, false) {
			w.wake <- struct{}{}
		}
	}
	p.n = 1
}
