package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/enginetest"
	"github.com/minfer/minfer/internal/golden"
	"github.com/minfer/minfer/sdk"
)

// TestBatchInvariance: sessions sharing a Batching, generating at the same time —
// plain, speculative at a fixed depth, and a mix, with prompts of different lengths —
// each produce exactly the tokens the same request gives alone, and their forwards
// were in fact batched.
func TestBatchInvariance(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	target := golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q8_0.gguf", "target")
	draft := golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q4_0.gguf", "draft")
	v := target.Params.Vocab
	prompt := func(i int) []int32 {
		p := make([]int32, 3+5*i)
		for k := range p {
			p[k] = int32((i*104729 + k*7919 + 13) % v)
		}
		return p
	}
	const n, seqs = 24, 5
	for _, tc := range []struct {
		name  string
		draft *model.Model
		depth func(i int) int
		batch int // Batching.BatchDepth
	}{
		{"plain", nil, func(int) int { return 0 }, DepthOff},
		{"speculative", draft, func(int) int { return 3 }, DepthOff},
		{"mixed depths", draft, func(i int) int { return i % 3 }, DepthOff},
		{"speculative, batch depth 2", draft, func(int) int { return 3 }, 2},
		{"speculative, batch depth auto", draft, func(int) int { return 3 }, BatchAuto},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := func(i int) Request {
				r := Request{Prompt: prompt(i), NPredict: n, Sampler: enginetest.Greedy{}}
				if tc.draft != nil && tc.depth(i) > 0 {
					r.Policy = FixedDepth(tc.depth(i))
				}
				return r
			}
			seen := make([]*outcomes, seqs)
			batchedReq := func(i int) Request {
				r := req(i)
				if r.Policy != nil {
					seen[i] = &outcomes{DepthPolicy: r.Policy}
					r.Policy = seen[i]
				}
				return r
			}
			newSession := func(bt *Batching) *Session {
				s, err := NewSession(Config{Target: target, Draft: tc.draft, Vocab: fakeVocab{}, Ctx: 128, Batch: 8, Batching: bt})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(s.Close)
				return s
			}
			want := make([][]int32, seqs)
			for i := range want {
				res, err := newSession(nil).Generate(bg, req(i))
				if err != nil {
					t.Fatal(err)
				}
				want[i] = res.Tokens
			}
			bt := NewBatching(64)
			bt.BatchDepth(tc.batch)
			// every step waits for the other sessions' forwards, a bounded while: on a
			// loaded machine the default wait (a share of the last forward's time, none
			// before the first) can let every forward run alone
			bt.minGather = 50 * time.Millisecond
			if tc.batch == BatchAuto { // a chooser under which the batch drafts (TestBatchDepthAuto)
				bt.batcher(target).auto = newAutoDepth(payingCosts())
			}
			sessions := make([]*Session, seqs)
			for i := range sessions {
				sessions[i] = newSession(bt)
			}
			got := make([][]int32, seqs)
			errs := make([]error, seqs)
			var wg sync.WaitGroup
			for i := range sessions {
				wg.Go(func() {
					res, err := sessions[i].Generate(bg, batchedReq(i))
					if err == nil {
						got[i] = res.Tokens
					}
					errs[i] = err
				})
			}
			wg.Wait()
			for i := range got {
				if errs[i] != nil {
					t.Fatalf("sequence %d: %v", i, errs[i])
				}
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("sequence %d: batched %v, alone %v", i, got[i], want[i])
				}
			}
			batches, jobs := bt.Stats(target)
			t.Logf("%d batched target forwards served %d sequence forwards", batches, jobs)
			if batches == 0 {
				t.Errorf("no target forward was batched")
			}
			// Each policy is told the batch its verify forward served: never less than
			// its own rows, never more sequences than there are.
			shared := 0
			for i, o := range seen {
				if o == nil {
					continue
				}
				for _, out := range o.got[1:] {
					if out.BatchSeqs < 1 || out.BatchSeqs > seqs || out.BatchRows < out.Drafted+1 || out.BatchRows < out.BatchSeqs {
						t.Fatalf("sequence %d round %d: told %d sequences and %d rows for %d drafted tokens", i, out.Round, out.BatchSeqs, out.BatchRows, out.Drafted)
					}
					if out.BatchSeqs > 1 {
						shared++
					}
				}
			}
			// (whether verify forwards coincided depends on the scheduler: logged, not
			// asserted; TestBatchedRefusal pins what a batched job is told)
			t.Logf("%d rounds were told of a verify forward shared with other sequences", shared)
		})
	}
}

// TestBatchedRefusal: a forward the model refuses (an id outside the vocabulary, a
// full cache) fails alone; the others in the same step run and get their own rows.
func TestBatchedRefusal(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	m := golden.LoadModel(t, b, "models/synthetic/synth-llama-q8_0.gguf", "target")
	bt := NewBatching(64)
	bb := bt.batcher(m)
	newCache := func(ctx int) *kv.Cache {
		c, err := m.NewKV(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	alone := newCache(16)
	l, err := m.Forward([]int32{7, 8, 9}, alone, false)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, l.Cols)
	if err := m.ReadLogits(l, want); err != nil {
		t.Fatal(err)
	}
	var got []float32
	good := &job{c: newCache(16), ids: []int32{7, 8, 9}, read: func(l model.Logits) error {
		got = make([]float32, l.Rows*l.Cols)
		return m.ReadLogits(l, got)
	}, done: make(chan struct{})}
	other := &job{c: newCache(16), ids: []int32{1, 2}, read: func(model.Logits) error { return nil }, done: make(chan struct{})}
	badID := &job{c: newCache(16), ids: []int32{1, -4}, read: func(model.Logits) error { return nil }, done: make(chan struct{})}
	full := &job{c: newCache(2), ids: []int32{1, 2, 3}, read: func(model.Logits) error { return nil }, done: make(chan struct{})}
	type observed struct {
		seqs, rows int
		d          time.Duration
	}
	var obs []observed
	bt.Observe(func(_ *model.Model, seqs, rows int, d time.Duration) { obs = append(obs, observed{seqs, rows, d}) })
	bb.step([]*job{other, badID, good, full})
	// The observer is told of the one forward that ran (not of the refused jobs), after
	// it ran: with its time.
	if len(obs) != 1 || obs[0].seqs != 2 || obs[0].rows != 5 || obs[0].d <= 0 {
		t.Errorf("observed forwards %+v, want one of 2 sequences, 5 rows and a measured time", obs)
	}
	if badID.err == nil || full.err == nil {
		t.Fatalf("refused jobs: id %v, full %v; want errors", badID.err, full.err)
	}
	if good.err != nil || other.err != nil || good.c.Len() != 3 || other.c.Len() != 2 {
		t.Fatalf("good jobs: %v, %v, cache lengths %d, %d", good.err, other.err, good.c.Len(), other.c.Len())
	}
	if !slices.Equal(got, want) {
		t.Errorf("the good job's last row differs from its forward alone")
	}
	if batches, jobs := bt.Stats(m); batches != 1 || jobs != 2 {
		t.Errorf("stats: %d batches of %d jobs, want 1 of 2", batches, jobs)
	}
	if good.seqs != 2 || good.rows != 5 || other.seqs != 2 || other.rows != 5 {
		t.Errorf("served: good %d sequences %d rows, other %d, %d; want 2 and 5 each", good.seqs, good.rows, other.seqs, other.rows)
	}
}

// outcomes is a depth policy that records the outcomes it is told; with barriers,
// its first calls wait at barrier[i] for the other sequences' (so that they overlap).
type outcomes struct {
	sdk.DepthPolicy
	mu       sync.Mutex
	got      []sdk.RoundOutcome
	barriers []*sync.WaitGroup
}

func (o *outcomes) NextDepth(ctx context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	o.mu.Lock()
	o.got = append(o.got, last)
	n := len(o.got)
	o.mu.Unlock()
	if n <= len(o.barriers) {
		o.barriers[n-1].Done()
		o.barriers[n-1].Wait()
	}
	return o.DepthPolicy.NextDepth(ctx, last)
}

// TestMaxBatchRows: with [spec] max_batch_rows = 8, a round's depth bound is
// 8/n − 1 while n sequences generate together (7 alone, 0 at five), every policy is
// told that bound, and the output is still each request's own greedy output.
func TestMaxBatchRows(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	target := golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q8_0.gguf", "target")
	draft := golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q4_0.gguf", "draft")
	const n, seqs, maxRows = 16, 5, 8
	bt := NewBatching(64)
	run := func(i int, bt *Batching, o *outcomes) []int32 {
		s, err := NewSession(Config{Target: target, Draft: draft, Vocab: fakeVocab{}, Ctx: 128, Batch: 8, Batching: bt, MaxBatchRows: maxRows})
		if err != nil {
			t.Error(err)
			return nil
		}
		defer s.Close()
		res, err := s.Generate(bg, Request{Prompt: []int32{int32(3 + i), 17, 29, int32(40 + 7*i)}, NPredict: n, Sampler: enginetest.Greedy{}, Policy: o})
		if err != nil {
			t.Error(err)
			return nil
		}
		return res.Tokens
	}
	alone := &outcomes{DepthPolicy: FixedDepth(6)}
	want0 := run(0, nil, alone)
	if alone.got[1].MaxDepth != maxRows-1 {
		t.Errorf("alone: max depth %d, want %d", alone.got[1].MaxDepth, maxRows-1)
	}
	seen := make([]*outcomes, seqs)
	got := make([][]int32, seqs)
	// every sequence's first two policy calls wait for all the others': the second
	// call's bound is then computed while all five generate
	barriers := []*sync.WaitGroup{{}, {}}
	for _, b := range barriers {
		b.Add(seqs)
	}
	var wg sync.WaitGroup
	for i := range seqs {
		seen[i] = &outcomes{DepthPolicy: FixedDepth(6), barriers: barriers}
		wg.Go(func() { got[i] = run(i, bt, seen[i]) })
	}
	wg.Wait()
	if !slices.Equal(got[0], want0) {
		t.Errorf("sequence 0: batched %v, alone %v", got[0], want0)
	}
	for i, o := range seen {
		for _, out := range o.got {
			if out.MaxDepth > maxRows-1 || out.Depth > maxRows-1 {
				t.Fatalf("sequence %d round %d: max depth %d, depth %d: want at most %d", i, out.Round, out.MaxDepth, out.Depth, maxRows-1)
			}
		}
		if want := maxRows/seqs - 1; o.got[1].MaxDepth != want {
			t.Errorf("sequence %d: bound %d while %d sequences generated, want %d", i, o.got[1].MaxDepth, seqs, want)
		}
	}
}

// TestPrefillJoinsDecoding: while sessions decode, a new session's prompt chunk does
// not run in a forward of its own (which the decoding sessions would wait for): the
// batcher cuts it to what the decode rows leave of the step, and the new session's
// tokens are still those it gives alone.
func TestPrefillJoinsDecoding(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	target := golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q8_0.gguf", "target")
	v := target.Params.Vocab
	prompt := func(i, n int) []int32 {
		p := make([]int32, n)
		for k := range p {
			p[k] = int32((i*104729 + k*7919 + 13) % v)
		}
		return p
	}
	newSession := func(bt *Batching) *Session {
		s, err := NewSession(Config{Target: target, Vocab: fakeVocab{}, Ctx: 128, Batch: 64, Batching: bt})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	late := Request{Prompt: prompt(9, 30), NPredict: 2, Sampler: enginetest.Greedy{}}
	want, err := newSession(nil).Generate(bg, late)
	if err != nil {
		t.Fatal(err)
	}
	bt := NewBatching(16)
	// A step waits up to this long for the generating sessions' forwards (less when all
	// have arrived): 50 ms let a decoder descheduled on a loaded 2-core machine miss the
	// late prompt's step, which then ran alone (seen once at load 13).
	bt.minGather = 300 * time.Millisecond
	var mu sync.Mutex
	var lone []int // rows of forwards that served one sequence
	bt.Observe(func(_ *model.Model, seqs, rows int, _ time.Duration) {
		if seqs == 1 {
			mu.Lock()
			lone = append(lone, rows)
			mu.Unlock()
		}
	})
	const decoders = 3
	var wg sync.WaitGroup
	errs := make([]error, decoders+1)
	stop, cancel := context.WithCancel(bg)
	defer cancel()
	// each decoder waits at its first token until the prompt is about to arrive
	arrived, gate := make(chan struct{}, decoders), make(chan struct{})
	for i := range decoders {
		s := newSession(bt)
		wg.Go(func() {
			smp := &gatedSampler{arrived: arrived, gate: gate}
			_, errs[i] = s.Generate(stop, Request{Prompt: prompt(i, 2), NPredict: 100, Sampler: smp})
		})
	}
	for range decoders {
		<-arrived
	}
	close(gate)
	got, err := newSession(bt).Generate(bg, late)
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Tokens, want.Tokens) {
		t.Errorf("late session: batched %v, alone %v", got.Tokens, want.Tokens)
	}
	for _, r := range lone {
		if r > 1 {
			t.Errorf("a forward of %d rows ran alone (forwards alone: %v)", r, lone)
			break
		}
	}
}

// gatedSampler is greedy; its first Sample tells arrived and waits for gate.
type gatedSampler struct {
	enginetest.Greedy
	arrived chan<- struct{}
	gate    <-chan struct{}
	once    sync.Once
}

func (g *gatedSampler) Sample(ctx context.Context, r *sdk.SampleRound) (sdk.SampleResult, error) {
	g.once.Do(func() { g.arrived <- struct{}{}; <-g.gate })
	return g.Greedy.Sample(ctx, r)
}

// TestFailedJobRollsBack: a prefill job cut into pieces that fails later — its read
// alone or in a batch, its forward in a batch, or a later piece of it — leaves its
// cache as before its first piece ran (one rule, job.fail), and ends.
func TestFailedJobRollsBack(t *testing.T) {
	m, newCache, ids := jobFixture(t)
	readOK := func(model.Logits) error { return nil }
	readBad := func(model.Logits) error { return errors.New("read refused") }
	newJob := func(c *kv.Cache, n, seed int, read func(model.Logits) error) *job {
		return &job{c: c, ids: ids(n, seed), read: read, done: make(chan struct{}), start: -1}
	}
	for _, tc := range []struct {
		name string
		long int // the prefill job's rows (the first step runs 12 of them beside 4 others)
		read func(model.Logits) error
		// then returns the second step's jobs beside the rest of the prefill job
		then func(other *kv.Cache) []*job
	}{
		{"read alone", 30, readBad, func(*kv.Cache) []*job { return nil }},
		{"read batched", 20, readBad, func(o *kv.Cache) []*job { return []*job{newJob(o, 4, 2, readOK)} }},
		{"forward batched", 20, readOK, func(o *kv.Cache) []*job {
			return []*job{newJob(o, 4, 2, readOK), newJob(o, 4, 3, readOK)} // one cache twice: the forward fails
		}},
		{"later piece", 30, readOK, func(o *kv.Cache) []*job {
			return []*job{newJob(o, 4, 2, readOK), newJob(o, 4, 3, readOK)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bb := NewBatching(16).batcher(m)
			long := newJob(newCache(), tc.long, 1, tc.read)
			rest := bb.step([]*job{newJob(newCache(), 4, 0, readOK), long})
			if len(rest) != 1 || rest[0] != long || long.c.Len() != 12 {
				t.Fatalf("first step: rest %d jobs, cache %d; want the prefill job back with 12 rows run", len(rest), long.c.Len())
			}
			if rest = bb.step(append(tc.then(newCache()), long)); len(rest) != 0 {
				t.Fatalf("second step returned %d jobs, want none", len(rest))
			}
			select {
			case <-long.done:
			default:
				t.Fatal("the failed job did not end")
			}
			if long.err == nil {
				t.Fatal("the job did not fail")
			}
			if got := long.c.Len(); got != 0 {
				t.Errorf("cache holds %d positions after the failure, want 0 (as before its first piece)", got)
			}
		})
	}
}

// TestPromptWaitsForNextStep: a prompt chunk that finds no room beside the decode rows
// and an older chunk waits whole for the next step instead of running in a forward of
// its own that the decoding sessions would wait for; prompts alone in a step all run;
// while other sessions generate, a chunk alone in a step is cut to the step's rows. The prompts' last rows are still
// those they give alone.
func TestPromptWaitsForNextStep(t *testing.T) {
	m, newCache, ids := jobFixture(t)
	alone := func(ids []int32) []float32 {
		l, err := m.Forward(ids, newCache(), false)
		if err != nil {
			t.Fatal(err)
		}
		row := make([]float32, l.Cols)
		if err := m.ReadLogits(l, row); err != nil {
			t.Fatal(err)
		}
		return row
	}
	type prompt struct {
		j   *job
		ids []int32 // all of them (a cut job holds the rest)
		got []float32
	}
	newPrompt := func(n, seed int) *prompt {
		p := &prompt{ids: ids(n, seed)}
		p.j = &job{c: newCache(), ids: p.ids, done: make(chan struct{}), start: -1, read: func(l model.Logits) error {
			p.got = make([]float32, l.Cols)
			return m.ReadLogits(l, p.got)
		}}
		return p
	}
	decode := func(seed int) *job {
		return &job{c: newCache(), ids: ids(1, seed), done: make(chan struct{}), start: -1, read: func(model.Logits) error { return nil }}
	}
	bt := NewBatching(16)
	var forwards []int // rows of each forward
	bt.Observe(func(_ *model.Model, _, rows int, _ time.Duration) { forwards = append(forwards, rows) })
	bb := bt.batcher(m)
	lens := func(ps ...*prompt) []int {
		var n []int
		for _, p := range ps {
			n = append(n, p.j.c.Len())
		}
		return n
	}

	// a decoding session and two prompts of 30 rows in a step of 16
	pa, pb := newPrompt(30, 1), newPrompt(30, 2)
	rest := bb.step([]*job{pa.j, decode(3), pb.j})
	if !slices.Equal(forwards, []int{16}) || len(rest) != 2 || rest[0] != pa.j || rest[1] != pb.j || !slices.Equal(lens(pa, pb), []int{15, 0}) {
		t.Fatalf("first step: forwards of %v rows, %d jobs back, prompts at %v; want one of 16, both prompts back, at [15 0]", forwards, len(rest), lens(pa, pb))
	}
	forwards = nil
	if rest = bb.step(append(rest, decode(4))); !slices.Equal(forwards, []int{16}) || len(rest) != 1 || rest[0] != pb.j || !slices.Equal(lens(pa, pb), []int{30, 0}) {
		t.Fatalf("second step: forwards of %v rows, %d jobs back, prompts at %v; want one of 16, the second prompt back, at [30 0]", forwards, len(rest), lens(pa, pb))
	}
	forwards = nil
	if rest = bb.step(rest); !slices.Equal(forwards, []int{30}) || len(rest) != 0 { // no one else generates: whole
		t.Fatalf("third step: forwards of %v rows, %d jobs back; want one of 30, none back", forwards, len(rest))
	}

	// prompts alone in a step all run: nobody waits for them
	pd, pe := newPrompt(20, 6), newPrompt(20, 7)
	forwards = nil
	if rest = bb.step([]*job{pd.j, pe.j}); !slices.Equal(forwards, []int{20, 20}) || len(rest) != 0 {
		t.Fatalf("two prompts alone: forwards of %v rows, %d jobs back; want two of 20, none back", forwards, len(rest))
	}

	// while others generate, a prompt alone in a step is cut to its rows
	pc := newPrompt(30, 5)
	bb.enter()
	bb.enter()
	forwards = nil
	if rest = bb.step([]*job{pc.j}); !slices.Equal(forwards, []int{16}) || len(rest) != 1 || pc.j.c.Len() != 16 {
		t.Fatalf("a prompt alone while others generate: forwards of %v rows, %d jobs back, at %d; want one of 16, the prompt back at 16", forwards, len(rest), pc.j.c.Len())
	}
	if rest = bb.step(rest); len(rest) != 0 || pc.j.c.Len() != 30 {
		t.Fatalf("its rest: %d jobs back, at %d; want none, at 30", len(rest), pc.j.c.Len())
	}
	bb.leave()
	bb.leave()
	for i, p := range []*prompt{pa, pb, pc, pd, pe} {
		if p.j.err != nil {
			t.Fatalf("prompt %d: %v", i, p.j.err)
		}
		if want := alone(p.ids); !slices.Equal(p.got, want) {
			t.Errorf("prompt %d: its last row differs from its forward alone", i)
		}
	}
}

// jobFixture is the batcher tests' model (the synthetic llama Q8_0 on two CPU threads,
// closed with the test), a maker of 64-position caches closed with the test, and
// ids(n, seed), n deterministic token ids.
func jobFixture(t *testing.T) (*model.Model, func() *kv.Cache, func(n, seed int) []int32) {
	b := cpu.New(cpu.Options{Threads: 2})
	t.Cleanup(func() { b.Close() })
	m := golden.LoadModel(t, b, "models/synthetic/synth-llama-q8_0.gguf", "target")
	newCache := func() *kv.Cache {
		c, err := m.NewKV(64, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	ids := func(n, seed int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32((seed*31 + i*7 + 1) % m.Params.Vocab)
		}
		return out
	}
	return m, newCache, ids
}

// TestDueForwardsJoinTheStep: a step waits for the forwards of the sessions that are
// due (batcher.expect) — a speculative round's verify on the target, the draft steps of
// the sessions drafting on the draft model — instead of running without them: a
// decode step and a verify that comes a few milliseconds later run as one forward,
// and so do two sessions' draft steps. A session that takes its pledge back
// (unexpect) lets the step run without it.
func TestDueForwardsJoinTheStep(t *testing.T) {
	m, newCache, ids := jobFixture(t)
	newJob := func(n, seed int) *job {
		return &job{c: newCache(), ids: ids(n, seed), out: model.OutAll, read: func(model.Logits) error { return nil }}
	}
	late := 5 * time.Millisecond // well inside dueLimit (25 ms at least)
	run := func(bb *batcher, early, later *job) {
		t.Helper()
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := bb.do(early); err != nil {
				t.Error(err)
			}
		})
		time.Sleep(late)
		if err := bb.do(later); err != nil {
			t.Error(err)
		}
		wg.Wait()
	}

	t.Run("verify joins the decode step", func(t *testing.T) {
		bb := NewBatching(16).batcher(m)
		bb.enter()
		bb.enter()
		defer bb.leave()
		defer bb.leave()
		bb.expect() // the speculating session drafts
		decode, verify := newJob(1, 1), newJob(4, 2)
		verify.settles = true
		run(bb, decode, verify)
		if decode.seqs != 2 || verify.seqs != 2 || decode.rows != 5 {
			t.Errorf("decode served in a forward of %d sequences (%d rows), verify of %d; want both in one of 2 (5 rows)", decode.seqs, decode.rows, verify.seqs)
		}
		if bb.due != 0 {
			t.Errorf("%d sessions still due after the verify, want 0", bb.due)
		}
	})
	t.Run("draft steps in lockstep", func(t *testing.T) {
		bb := NewBatching(16).draftBatcher(m)
		bb.expect()
		bb.expect()
		a, b := newJob(1, 3), newJob(2, 4)
		a.due, b.due = true, true
		run(bb, a, b)
		bb.unexpect()
		bb.unexpect()
		if a.seqs != 2 || b.seqs != 2 {
			t.Errorf("draft steps served in forwards of %d and %d sequences, want one of 2", a.seqs, b.seqs)
		}
	})
	t.Run("a pledge taken back", func(t *testing.T) {
		bb := NewBatching(16).batcher(m)
		bb.expect()
		decode := newJob(1, 5)
		go func() { time.Sleep(late); bb.unexpect() }()
		if err := bb.do(decode); err != nil {
			t.Fatal(err)
		}
		if decode.seqs != 1 {
			t.Errorf("decode served with %d sequences, want alone", decode.seqs)
		}
	})
}
