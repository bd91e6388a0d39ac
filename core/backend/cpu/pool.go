package cpu

import (
	"runtime"
	"sync/atomic"
	"time"
)

// pool runs the chunks of one op on n goroutines: the caller is worker 0 and n-1
// long-lived goroutines are the others. A pool is used by one goroutine at a time.
//
// Hand-off: the caller publishes the op (fn, chunk, total), sets the claim counter and
// bumps seq; every worker, the caller included, claims chunk indices from the counter
// until none are left. The caller waits only for the chunks that were claimed to be
// completed, never for a worker to show up: a worker that wakes late finds nothing to
// claim (or claims chunks of a later op, which are just as valid), so a slow wake-up
// costs the op that worker's help, not the wake-up time. A worker that finished its
// last op less than spinFor ago is still polling seq and starts at once; one that has
// parked (blocked on its channel) is woken through the channel. The caller waits the
// same way: polling first, then parked on done.
type pool struct {
	n int
	// The current op, written by the caller before claim is set and not written again
	// until every chunk of it is completed; read by a worker only after it claimed one
	// of its chunks.
	fn           func(w, lo, hi int)
	chunk, total int
	// claim is chunks<<32 | next: the op's chunk count and the next chunk index to
	// hand out. Claiming is one Add; an index ≥ chunks means nothing is left. Each
	// goroutine over-claims at most twice per op, so next never reaches 1<<32.
	claim     atomic.Uint64
	completed atomic.Int64  // chunks of the current op completed
	seq       atomic.Uint64 // op number; bumped once per op to wake the polling workers
	stop      atomic.Bool
	workers   []poolWorker
	// waiting is set while the caller is parked on done.
	waiting atomic.Bool
	done    chan struct{}
}

type poolWorker struct {
	parked atomic.Bool // blocked on wake (or about to be); cleared by whoever wakes it
	wake   chan struct{}
	_      [48]byte // keep workers' flags on separate cache lines
}

// spinFor is how long a worker polls for the next op, and the caller for the workers,
// before blocking. Measured (docs/perf-cpu.md, Qwen2.5-0.5B, -t 2): on a quiet machine
// 50 µs raised decode from 31 to 38 t/s (Q8_0) and 43 to 59 t/s (Q4_0), 15 µs only to
// 49 (Q4_0), 200 µs 4 % more than 50 µs; with the two cores busy with other processes,
// 50 µs cost ≈ 17 % (the polling spends the process's share).
var spinFor = 50 * time.Microsecond

func newPool(n int) *pool {
	p := &pool{n: n, workers: make([]poolWorker, n), done: make(chan struct{}, 1)}
	for i := 1; i < n; i++ {
		p.workers[i].wake = make(chan struct{}, 1)
		go p.worker(i)
	}
	return p
}

// spin polls cond for up to spinFor; it reports whether cond became true. Every 64
// polls it yields its P (runtime.Gosched) to any other runnable goroutine: with as many
// workers as cores (GOMAXPROCS 2 on a 2-core machine), a polling worker otherwise keeps
// the server's other goroutines (HTTP handlers, sampler calls) off its P for the
// whole spinFor after every op; when nothing else is runnable Gosched returns at once.
func spin(cond func() bool) bool {
	var start time.Time
	for i := 0; ; i++ {
		if cond() {
			return true
		}
		if i&63 == 63 {
			runtime.Gosched()
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
	var seen uint64 // the pool starts at seq 0; an op may come before this goroutine runs
	for {
		if !spin(func() bool { return p.seq.Load() != seen }) {
			me.parked.Store(true)
			if p.seq.Load() != seen && me.parked.CompareAndSwap(true, false) {
				// An op came while parking and nobody is sending: run it.
			} else {
				<-me.wake
			}
		}
		if p.stop.Load() {
			return
		}
		seen = p.seq.Load()
		p.work(id)
	}
}

// work claims and runs chunks of the current op until none are left.
func (p *pool) work(id int) {
	for {
		v := p.claim.Add(1)
		i, chunks := int(uint32(v))-1, int(v>>32)
		if i >= chunks {
			return
		}
		// The op cannot complete before this chunk does: its fields are stable.
		lo := i * p.chunk
		p.fn(id, lo, min(lo+p.chunk, p.total))
		if p.completed.Add(1) == int64(chunks) && p.waiting.CompareAndSwap(true, false) {
			p.done <- struct{}{}
		}
	}
}

// chunks splits [0, total) into pieces of at most chunk items handed out dynamically
// (an atomic counter), calling fn(w, lo, hi) for each on whichever worker claims it; w
// identifies the goroutine (0 is the caller), so no two calls with the same w overlap.
// It returns when every piece is done. Work is split by whole items only, so results
// never depend on the split.
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
	n := (total + chunk - 1) / chunk
	p.fn, p.chunk, p.total = fn, chunk, total
	p.completed.Store(0)
	p.claim.Store(uint64(n) << 32)
	p.seq.Add(1)
	for i := 1; i < p.n; i++ {
		if w := &p.workers[i]; w.parked.CompareAndSwap(true, false) {
			w.wake <- struct{}{}
		}
	}
	p.work(0)
	if !spin(func() bool { return p.completed.Load() == int64(n) }) {
		p.waiting.Store(true)
		if p.completed.Load() == int64(n) && p.waiting.CompareAndSwap(true, false) {
			// The last chunk completed while we were parking.
		} else {
			<-p.done
		}
	}
	p.fn = nil
}

// serialWork is the amount of work (multiply-adds) below which an op runs on the
// calling goroutine alone. Since the caller no longer waits for a worker to wake up
// (see pool), handing an op off costs ≈ a microsecond while the worker is polling, and
// parallel ops close together keep it polling: 2^15 (was 2^18, when a late worker's
// wake-up was on the caller's path) lets the small ops of a small model (a 512→128
// projection, one decode step's attention) run on both workers. Measured
// (docs/perf-cpu.md, -t 2): the 18.9M trained qwen2 one-row forward 1.2 → 0.76 ms,
// Qwen2.5-0.5B Q8_0 decode 38 → 40 t/s; 2^12…2^15 measured the same.
var serialWork = 1 << 15

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
