package engine

import (
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
)

// Continuous batching. Every session keeps its own round loop — its depth policy,
// drafters, penalty and sampler run on its own rows — and asks its models for forwards
// as before; a batcher per model gathers the forwards that sessions ask for at the same
// time and runs them as one model.ForwardBatch, so the weights are read once for all
// of them. A sequence that finishes simply stops asking; a new request's prefill chunks
// join the next step beside the others' decode and verify rows (chunked prefill: a long
// prompt is split into Config.Batch-token forwards, and a chunk that does not fit
// beside the others' rows is cut to what they leave of the step's rows, so it rides in
// their forward instead of one of its own that they would wait for). With row identity, each sequence's rows have the bits its own
// forward would give: batching changes no output (batch invariance).
//
// A lone forward runs exactly as without batching (model.ForwardNoWait, graphs and
// all), so one session loses nothing.
//
// Speculation stays in step with the batch: a session whose round drafts is due on the
// target until its verify arrives, and the target's step waits for it (expect), so
// its verify rows ride in the others' forward; while it drafts, the draft model's
// steps wait for the other sessions drafting, so their draft steps are one forward
// (lockstep). A session parked at depth 0 sends the draft model nothing and is waited
// for by none of its steps.

// batcher coalesces one model's concurrent forwards.
type batcher struct {
	m *model.Model
	// maxRows bounds the rows of one batched forward (the backend's identity bound
	// lowers it); a forward that alone has more runs alone.
	maxRows int

	mu      sync.Mutex
	arrived chan struct{} // a job was queued (capacity 1: a wake-up, not a count)
	queue   []*job
	running bool
	active  int           // sessions inside Generate on this model
	lastDur time.Duration // the last decode or verify forward's time (a draft model's: any), for the gathering wait
	// turns holds each sequence's turnaround (by cache): the gathering wait (gatherUntil)
	turns map[*kv.Cache]*seqTurn
	// depth is the depth of every round of the sessions generating on the model (a
	// target's) while two or more do: Batching.BatchDepth's, DepthOff or BatchAuto
	depth int
	// auto chooses that depth by the batch's size where depth is BatchAuto (set by
	// Batching.Calibrate; nil: plain decoding)
	auto *autoDepth
	// peak is the most sessions generating at once within autoWindow before peakAt
	// (auto's batch size: see batchDepth)
	peak   int
	peakAt time.Time
	// draft: the model drafts for the sessions' targets. Its steps wait a little only
	// for the sessions likely to draft soon (coming: see seq.owe), for up to half a
	// draft forward; active stays 0.
	draft  atomic.Bool
	coming int
	// due counts the sessions whose next forward every step waits for (a speculative
	// round's verify on the target, a draft phase's forwards on the draft: see
	// expect), dueQueued their jobs in the queue
	due, dueQueued int
	// minGather, when set (tests only), is the least a step waits for the other
	// sessions' forwards, so that whether forwards coincide does not depend on the
	// scheduler of a loaded machine.
	minGather time.Duration

	// splitOK: a last-row job of any length may be split (the backend's rows are
	// bitwise whatever the forward's row count: Caps.IdentityRows is 0)
	splitOK bool

	staging  map[int]backend.Buffer // by row count: a job's rows copied out of the batch
	pick     []int32                // batchStats's picks, one per logits row
	stats    model.RowStats         // batchStats's statistics of every row
	observer *atomic.Pointer[func(m *model.Model, seqs, rows int, d time.Duration)]

	batches, batchedJobs atomic.Int64 // forwards that served several sequences, and their jobs
	forwards, served     atomic.Int64 // every forward, lone or batched, and the sequences they served
}

// job is one sequence's forward.
type job struct {
	c   *kv.Cache
	ids []int32
	out model.Out // which rows get logits; read is nil for OutNone
	// read takes the job's logits rows (valid until the next forward)
	read func(model.Logits) error
	// stats, where read only computes model.RowStats of those rows: what it asks for,
	// so that a batched forward computes every such job's statistics in one call (one
	// wait) instead of one read each
	stats *statsReq
	err   error
	done  chan struct{}
	// due: the job is of a session steps wait for (batcher.expect); settles: queuing
	// it ends that wait (a verify after its draft phase)
	due, settles bool
	// seqs, rows: the sequences and rows of the forward that ran the job
	seqs, rows int
	// start is the cache's length before the job's first rows ran (its first piece,
	// where a step cut it): where a failure puts the cache back; -1 before it ran
	start int
}

// fail ends j with err under the one rule for a failed job, whatever failed — its
// forward, a piece cut from it, the read of its rows — and whether it ran alone or
// batched: its cache goes back to its length before its first rows ran, so a request
// that fails leaves nothing of itself in the cache, as a lone forward does.
func (j *job) fail(err error) {
	if j.start >= 0 && j.c.Len() > j.start {
		err = errors.Join(err, j.c.Truncate(j.start))
	}
	j.err = err
}

// Batching is what the sessions whose forwards are batched together share (a server's
// slots): a batcher per model. Give the same *Batching to each session's Config.
type Batching struct {
	maxRows   int
	depth     int           // see BatchDepth
	minGather time.Duration // see batcher.minGather
	mu        sync.Mutex
	by        map[*model.Model]*batcher
	observer  atomic.Pointer[func(m *model.Model, seqs, rows int, d time.Duration)]
}

// Observe has fn called after every forward the batchers run (lone or batched) with
// its model, the number of sequences and rows it served and its time (the forward and the
// hand-over of each sequence's logits: the time the model was busy with it): a
// server's batch-size and busy-time metrics. fn must be quick and safe for concurrent
// use.
func (bt *Batching) Observe(fn func(m *model.Model, seqs, rows int, d time.Duration)) {
	bt.observer.Store(&fn)
}

// NewBatching batches forwards of up to maxRows rows (at least 2; the backend's
// identity bound, Caps.IdentityRows, lowers it, so batching never changes a bit).
// Rounds take their policies' depths (DepthOff) until BatchDepth says otherwise.
func NewBatching(maxRows int) *Batching {
	return &Batching{maxRows: max(maxRows, 2), depth: DepthOff, by: map[*model.Model]*batcher{}}
}

// DepthOff is Batching.BatchDepth's "each round at its policy's depth".
const DepthOff = -1

// BatchDepth sets the depth every round takes while two or more of the sessions
// generate on a target ([spec] batch_depth): DepthOff, its policy's; n ≥ 0, n draft
// tokens for every sequence (SGLang's and TensorRT-LLM's static schedule). One depth for
// all keeps their draft steps in lockstep (one draft forward a step for all) and their
// rounds ending together, which the policies, each deciding alone, do not: on the H200
// (7B Q4_K_M, 0.5B draft, 4-32 clients) the adaptive policy served 0.74-0.88 of plain
// decoding and batch depth 1 0.80-1.06 (docs/PERFORMANCE.md). A session alone keeps its
// policy. BatchAuto chooses the depth by the batch's size from the costs Calibrate
// measured (autodepth.go). It takes effect for the targets of sessions made after it.
func (bt *Batching) BatchDepth(d int) {
	if d < 0 && d != BatchAuto {
		d = DepthOff
	}
	bt.mu.Lock()
	bt.depth = d
	bt.mu.Unlock()
}

// Stats reports how many batched forwards (of several sequences) ran on m and how
// many sequences' forwards they served.
func (bt *Batching) Stats(m *model.Model) (batches, jobs int64) {
	bt.mu.Lock()
	b := bt.by[m]
	bt.mu.Unlock()
	if b == nil {
		return 0, 0
	}
	return b.batches.Load(), b.batchedJobs.Load()
}

// Served reports how many forwards ran on m, lone or batched, and how many sequences'
// forwards they served: served/forwards is the sequences a forward of m served on
// average (the batch's occupancy).
func (bt *Batching) Served(m *model.Model) (forwards, seqs int64) {
	bt.mu.Lock()
	b := bt.by[m]
	bt.mu.Unlock()
	if b == nil {
		return 0, 0
	}
	return b.forwards.Load(), b.served.Load()
}

// draftBatcher is batcher for a session's draft model.
func (bt *Batching) draftBatcher(m *model.Model) *batcher {
	b := bt.batcher(m)
	b.draft.Store(true)
	return b
}

// batcher returns m's batcher, made on first use.
func (bt *Batching) batcher(m *model.Model) *batcher {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	if b := bt.by[m]; b != nil {
		return b
	}
	rows := bt.maxRows
	if id := m.Backend().Caps().IdentityRows; id > 0 && id < rows {
		rows = id
	}
	b := &batcher{m: m, maxRows: rows, splitOK: m.Backend().Caps().IdentityRows == 0, staging: map[int]backend.Buffer{}, observer: &bt.observer, arrived: make(chan struct{}, 1), minGather: bt.minGather, depth: bt.depth}
	bt.by[m] = b
	return b
}

// comes and came count the sessions likely to send a forward soon (seq.owe).
func (b *batcher) comes() { b.mu.Lock(); b.coming++; b.mu.Unlock() }
func (b *batcher) came()  { b.mu.Lock(); b.coming--; b.mu.Unlock(); b.wake() }

// enter and leave count the sessions generating on the model: the batcher waits a
// little for the others' forwards only while there are others.
func (b *batcher) enter() { b.mu.Lock(); b.active++; b.mu.Unlock() }
func (b *batcher) leave() { b.mu.Lock(); b.active--; b.mu.Unlock(); b.wake() }

// generating is the number of sessions generating on the model (at least 1).
func (b *batcher) generating() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.active, 1)
}

// batchDepth is the depth of every round while two or more sessions generate on the
// model (a target's): DepthOff for each round its policy's. Batch depth "auto" takes it
// for the most sessions that generated at once within the last autoWindow, not for
// those generating now: a server's clients leave a slot idle for a moment between two
// requests, and choosing by the moment's count switched the depth at every such gap
// (on the H200 at 4 and 8 clients, 3-7 sequences for a step or two), each switch to
// drafting costing the draft caches a catch-up on the tokens decoded plainly (0.94-1.01
// of plain served where depth 1 and plain each served 1.00-1.05).
func (b *batcher) batchDepth() int {
	b.mu.Lock()
	d, a := b.depth, b.auto
	if d != BatchAuto {
		b.mu.Unlock()
		return d
	}
	if now := time.Now(); b.active >= b.peak || now.Sub(b.peakAt) > autoWindow {
		b.peak, b.peakAt = b.active, now
	}
	n := b.peak
	b.mu.Unlock()
	if a == nil {
		return 0 // not calibrated: plain decoding is never slower than itself
	}
	return a.depth(n)
}

// autoWindow is how long batch depth "auto" keeps choosing for a batch size after the
// batch last had that many sessions generating (batcher.batchDepth).
const autoWindow = time.Second

// chooser is batch depth "auto"'s chooser of the model (a target's; nil: none), which
// the sessions' rounds and requests report to (rounded, requested, finished).
func (b *batcher) chooser() *autoDepth {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.auto
}

// expect tells the batcher that a session's next forwards are due: every step waits
// for them (up to dueLimit) rather than running without them. A speculative round's
// session is due on the target from its draft phase to its verify (the job that
// settles it), so that its verify rows join the others' decode rows in one forward
// instead of missing their step and running in one of their next (the desync of
// issue 21: a probe took its session out of the batch for a step or more, and its
// draft forwards waited behind the others' steps); on the draft model, the sessions
// drafting are due while they draft, so that their draft steps batch (lockstep). A
// session due must send its forward soon or call unexpect: it never waits on
// something that waits for it (the target waits for the draft phase, never the
// reverse).
func (b *batcher) expect() {
	b.mu.Lock()
	b.due++
	b.mu.Unlock()
}

// unexpect ends an expect without a settling job.
func (b *batcher) unexpect() {
	b.mu.Lock()
	b.due--
	b.mu.Unlock()
	b.wake()
}

func (b *batcher) wake() {
	select {
	case b.arrived <- struct{}{}:
	default:
	}
}

// do runs j, batched with whatever other sessions ask for meanwhile.
func (b *batcher) do(j *job) error {
	j.done = make(chan struct{})
	j.start = -1
	b.mu.Lock()
	switch {
	case j.settles:
		b.due--
	case j.due:
		b.dueQueued++
	}
	b.arrival(j, time.Now())
	b.queue = append(b.queue, j)
	if !b.running {
		b.running = true
		go b.loop()
	}
	b.mu.Unlock()
	b.wake()
	<-j.done
	return j.err
}

// gatherUntil is when a step that gathers from now stops waiting for the other
// generating sessions' forwards: after a small share of a forward, so that a session
// busy elsewhere (a slow plugin) costs the others little — or, where that is later,
// when the sessions whose last forward ended and whose next job has not arrived are
// due: each one's forward end plus twice its turnaround, for the sessions whose
// turnaround is at most half a forward, and no later than half a forward from now. A
// session's host work between its two steps (its logits' hand-over, the sampler, the
// text streamed to its client) is a step's gap in which the others' next jobs arrive;
// a wait shorter than it lets the first arrival's forward run alone, the late one's
// alone after it, and the two alternate from then on (on the H200, 7B Q4_K_M, plain
// decoding: 2 clients served 391 tokens/s, one client's 383, where a forward of both
// costs 3.1 ms against 2.4 alone). A session slower than half a forward (a client that
// reads slowly) is not waited for: it joins the step after.
//
// On a draft model the share is half a forward: while sessions draft, the target's
// step waits for them (expect), so a draft forward that waits for another session's
// draft step idles nothing else, and saves a forward of its own.
func (b *batcher) gatherUntil(now time.Time) time.Time {
	share := time.Duration(20)
	if b.draft.Load() {
		share = 2
	}
	limit := min(b.lastDur/2, 2*time.Millisecond)
	until := now.Add(min(b.lastDur/share, 2*time.Millisecond))
	for _, st := range b.turns {
		if st.pending && st.turn > 0 && st.turn <= b.lastDur/2 {
			if due := st.end.Add(2 * st.turn); due.After(until) {
				until = due
			}
		}
	}
	if cap := now.Add(limit); until.After(cap) {
		until = cap
	}
	if least := now.Add(b.minGather); until.Before(least) {
		until = least
	}
	return until
}

// seqTurn is a sequence's turnaround: a moving mean of the time from the end of its
// forward to its next decode or verify job (0: none measured), and whether its last
// forward's next job is still to come.
type seqTurn struct {
	end     time.Time // its last forward's end
	pending bool
	turn    time.Duration
}

// arrival records, at now, the arrival of j (b.mu held): for a decode or verify job of
// a sequence whose forward ended less than turnMax ago, its turnaround. A verify that
// ends a draft phase is not one (its session was drafting: the step waits for it as
// due), nor a prompt's first chunk (a new request).
func (b *batcher) arrival(j *job, now time.Time) {
	st := b.turns[j.c]
	if st == nil || !st.pending {
		return
	}
	st.pending = false
	if d := now.Sub(st.end); !j.settles && !j.prefill() && d < turnMax {
		if st.turn == 0 {
			st.turn = d
		} else {
			st.turn += (d - st.turn) / 4
		}
	}
}

// turnMax bounds the turnarounds measured: a longer gap is a session waiting on
// something else (its client, a plugin), not a step's host work.
const turnMax = 20 * time.Millisecond

// ran records, at now, the end of a forward of jobs g.
func (b *batcher) ran(g []*job, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.turns == nil {
		b.turns = map[*kv.Cache]*seqTurn{}
	}
	if len(b.turns) > 4*max(b.active, len(g), 16) { // the caches of ended sessions: forgotten
		for c, st := range b.turns {
			if now.Sub(st.end) > turnForget {
				delete(b.turns, c)
			}
		}
	}
	for _, j := range g {
		st := b.turns[j.c]
		if st == nil {
			st = &seqTurn{}
			b.turns[j.c] = st
		}
		st.end, st.pending = now, true
	}
}

// turnForget is how long after its last forward a sequence's turnaround is forgotten
// once the batcher holds many.
const turnForget = 10 * time.Second

// dueLimit bounds how long a step waits for the due sessions' forwards (expect): a few
// steps, and no less than 25 ms (a draft phase of several draft forwards), so that a
// due session that stalls (a slow drafter plugin) holds the others up only that long.
func (b *batcher) dueLimit() time.Duration {
	return max(3*b.lastDur, 25*time.Millisecond)
}

func (b *batcher) loop() {
	b.mu.Lock()
	for len(b.queue) > 0 {
		b.gather()
		jobs := b.queue
		b.queue, b.dueQueued = nil, 0
		b.mu.Unlock()
		rest := b.step(jobs)
		b.mu.Lock()
		for _, j := range rest {
			if j.due {
				b.dueQueued++
			}
		}
		b.queue = append(rest, b.queue...)
	}
	b.running = false
	b.mu.Unlock()
}

// gather waits (b.mu held) for the forwards a step should serve: the due sessions'
// (up to dueLimit), and the other generating sessions' a bounded while (gatherUntil).
func (b *batcher) gather() {
	owed := func() bool { return b.dueQueued < b.due }
	missing := func() bool { return len(b.queue) < b.active || b.coming > 0 }
	if !owed() && !missing() {
		return
	}
	now := time.Now()
	dueBy, othersBy := now.Add(b.dueLimit()), b.gatherUntil(now)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		var until time.Time
		switch now := time.Now(); {
		case owed() && now.Before(dueBy):
			until = dueBy
		case missing() && now.Before(othersBy):
			until = othersBy
		default:
			return
		}
		if timer == nil {
			timer = time.NewTimer(time.Until(until))
		} else {
			timer.Reset(time.Until(until)) // (no stale fire since Go 1.23)
		}
		b.mu.Unlock()
		select {
		case <-b.arrived:
		case <-timer.C:
		}
		b.mu.Lock()
	}
}

// minPiece is the fewest rows of a prefill piece that a step cuts from a job to fill
// what is left of a forward's rows (see step): fewer, and the job waits for a forward
// of its own as before, so that a prompt still progresses by real chunks.
const minPiece = 8

// step runs jobs: each one the model refuses fails alone; the rest run in forwards of
// at most maxRows rows, each sequence's rows with the logits it asks for (every row for
// verify rows, the last for a prompt's end, none for a prompt chunk in its middle).
// The jobs that must not wait (decode steps, verify rows) come first, the shortest
// first; then the prompt chunks, oldest first (a returned job is at the queue's front).
//
// Chunked prefill: a prompt chunk that does not fit beside the others' rows is cut —
// its first rows fill the forward, with no logits, and the job, holding the rest, is
// returned to run in the next step beside the others' next rows, instead of in a
// forward of its own that they would wait for. One that finds too little room left
// beside decode or verify rows waits whole for the next step once an older chunk got
// rows in this one, so the oldest prompt progresses every step and the decoding
// sessions wait for at most one prompt forward a step (a step of prompts alone runs
// them all: nobody waits); and while other sessions generate, a chunk in a forward of
// its own is cut to maxRows rows, so that forward is no longer than a step. With row
// identity a cut changes no bit of the sequence's cache or logits (a job whose lone
// forward is past the backend's identity bound is not cut).
func (b *batcher) step(jobs []*job) (rest []*job) {
	mu := backendLock(b.m.Backend())
	mu.Lock()
	defer mu.Unlock()
	slices.SortStableFunc(jobs, func(x, y *job) int { return x.order() - y.order() })
	var groups [][]*job
	rows := 0          // the last group's
	var pieces []*job  // pieces[i] is cut from rest[i] (nil: rest[i] waits whole)
	prefilled := false // a prompt chunk got rows in this step
	others := b.generating() > 1
	// waiting: the step serves decode or verify rows, whose sessions would wait for a
	// prompt's forward of its own
	waiting := slices.ContainsFunc(jobs, func(j *job) bool { return !j.prefill() })
	for _, j := range jobs {
		if j.start < 0 {
			j.start = j.c.Len()
		}
		if err := b.m.Check(j.ids, j.c); err != nil {
			j.fail(err)
			close(j.done)
			continue
		}
		if len(groups) > 0 && rows+len(j.ids) > b.maxRows {
			if p := b.cut(j, b.maxRows-rows); p != nil {
				groups[len(groups)-1] = append(groups[len(groups)-1], p)
				rows = b.maxRows
				pieces, rest = append(pieces, p), append(rest, j)
				prefilled = true
				continue
			}
			if j.prefill() && prefilled && waiting { // the next step's rows
				pieces, rest = append(pieces, nil), append(rest, j)
				continue
			}
			groups = append(groups, nil)
			rows = 0
		}
		if len(groups) == 0 {
			groups = append(groups, nil)
		}
		if others && len(j.ids) > b.maxRows { // a forward of its own: the others' wait is one of maxRows
			if p := b.cut(j, b.maxRows); p != nil {
				groups[len(groups)-1] = append(groups[len(groups)-1], p)
				rows = b.maxRows
				pieces, rest = append(pieces, p), append(rest, j)
				prefilled = true
				continue
			}
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], j)
		rows += len(j.ids)
		prefilled = prefilled || j.prefill()
	}
	for _, g := range groups {
		b.run(g)
	}
	// a job whose piece failed fails
	kept := rest[:0]
	for i, j := range rest {
		if p := pieces[i]; p != nil && p.err != nil {
			j.fail(p.err)
			close(j.done)
			continue
		}
		kept = append(kept, j)
	}
	return kept
}

// prefill reports whether j is a prompt chunk: several rows of which at most the last
// gets logits, a job a step may cut or leave for the next step.
func (j *job) prefill() bool { return j.out != model.OutAll && len(j.ids) > 1 }

// order is j's place in a step: the jobs that must not wait (decode steps, verify rows)
// by their rows, then the prompt chunks in the order they came.
func (j *job) order() int {
	if j.prefill() {
		return math.MaxInt32
	}
	return len(j.ids)
}

// cut returns j's first left rows as a piece of no logits, j keeping the rest; nil
// where j may not be cut to left rows (it wants every row's logits, the piece would be
// too small, or its lone forward is past the backend's identity bound).
func (b *batcher) cut(j *job, left int) *job {
	if j.out == model.OutAll || left < minPiece || left >= len(j.ids) || !b.splitOK && len(j.ids) > b.maxRows {
		return nil
	}
	p := &job{c: j.c, ids: j.ids[:left], out: model.OutNone, done: make(chan struct{}), start: j.start}
	j.ids = j.ids[left:]
	return p
}

// run runs one group as one forward and hands each job its rows.
func (b *batcher) run(g []*job) {
	rows := 0
	for _, j := range g {
		rows += len(j.ids)
	}
	for _, j := range g {
		j.seqs, j.rows = len(g), rows
	}
	start := time.Now()
	b.forwards.Add(1)
	b.served.Add(int64(len(g)))
	defer func() {
		now := time.Now()
		if fn := b.observer.Load(); fn != nil {
			(*fn)(b.m, len(g), rows, now.Sub(start))
		}
		b.ran(g, now)
		for _, j := range g {
			close(j.done)
		}
	}()
	if len(g) == 1 { // alone: as without batching, graphs and all
		j := g[0]
		if err := forwardRead(b.m, j.c, j.ids, j.out, j.read); err != nil {
			j.fail(err)
		}
		// a target's lone prompt is no step's measure (its decode and verify forwards
		// are: without them two sessions that began out of step never waited for each
		// other, the wait being a share of a batched forward that never ran)
		if b.draft.Load() || !j.prefill() {
			b.lastDur = time.Since(start)
		}
		return
	}
	seqs := make([]model.Seq, len(g))
	for i, j := range g {
		seqs[i] = model.Seq{IDs: j.ids, Cache: j.c, Out: j.out}
	}
	t0 := time.Now()
	l, err := b.m.ForwardBatch(seqs)
	if err != nil {
		for _, j := range g {
			j.fail(err)
		}
		return
	}
	b.lastDur = time.Since(t0)
	b.batches.Add(1)
	b.batchedJobs.Add(int64(len(g)))
	done := b.batchStats(g, l)
	row := 0
	for _, j := range g {
		n := j.out.RowsOut(len(j.ids))
		if n == 0 || done[j] {
			row += n
			continue
		}
		view, err := b.rows(l, row, n)
		if err == nil {
			err = j.read(view)
		}
		if err != nil {
			j.fail(err)
		}
		row += n
	}
}

// rows is rows [row, row+n) of a batched forward's logits as a Logits of their own (a
// copy, where the rows do not start the buffer), valid until the next forward.
func (b *batcher) rows(l model.Logits, row, n int) (model.Logits, error) {
	if row == 0 {
		return model.Logits{Buf: l.Buf, Rows: n, Cols: l.Cols}, nil
	}
	be := b.m.Backend()
	buf := b.staging[n]
	if buf == nil {
		var err error
		if buf, err = be.NewF32(n * l.Cols); err != nil {
			return model.Logits{}, err
		}
		b.staging[n] = buf
	}
	be.CopyRows(buf, 0, l.Buf, row, n, l.Cols)
	return model.Logits{Buf: buf, Rows: n, Cols: l.Cols}, nil
}

// statsReq is a read that computes model.RowStats (k candidates, a pick per row) of the
// job's rows into st.
type statsReq struct {
	k    int
	pick []int32 // nil: no picks
	st   *model.RowStats
}

// batchStats computes, in one model.RowStats call over the batch's logits l, the
// statistics of every job of g that asks for them with the same k as the first such job
// (a server's sessions share their sampler's k), and hands each job its rows' part; it
// reports the jobs it served (nil where fewer than two ask: their own reads are as
// cheap). Each row's statistics do not depend on the other rows, so a job gets the
// numbers its own call would give. A failure fails the jobs it would have served.
func (b *batcher) batchStats(g []*job, l model.Logits) map[*job]bool {
	k, n := -1, 0
	for _, j := range g {
		if j.stats != nil && j.out.RowsOut(len(j.ids)) > 0 && (k < 0 || j.stats.k == k) {
			k = j.stats.k
			n++
		}
	}
	if n < 2 {
		return nil
	}
	served := make(map[*job]bool, n)
	pick := b.pick[:0]
	for _, j := range g {
		rows := j.out.RowsOut(len(j.ids))
		mine := j.stats != nil && rows > 0 && j.stats.k == k
		served[j] = mine
		for r := range rows {
			p := int32(-1)
			if mine && j.stats.pick != nil {
				p = j.stats.pick[r]
			}
			pick = append(pick, p)
		}
	}
	b.pick = pick
	st := &b.stats
	if err := b.m.RowStats(l, k, pick, st); err != nil {
		for j, mine := range served {
			if mine {
				j.fail(err)
			}
		}
		return served
	}
	row := 0
	for _, j := range g {
		rows := j.out.RowsOut(len(j.ids))
		if served[j] {
			d := j.stats.st
			d.K = k
			d.IDs = append(d.IDs[:0], st.IDs[row*k:(row+rows)*k]...)
			d.Vals = append(d.Vals[:0], st.Vals[row*k:(row+rows)*k]...)
			d.Max = append(d.Max[:0], st.Max[row:row+rows]...)
			d.LSE = append(d.LSE[:0], st.LSE[row:row+rows]...)
			d.Picked = append(d.Picked[:0], st.Picked[row:row+rows]...)
		}
		row += rows
	}
	return served
}
