package engine

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/enginetest"
	"github.com/minfer/minfer/internal/golden"
)

// specBatch runs seqs sessions sharing bt, each with the draft model at a fixed depth
// and the same prompt length (so they start together), and returns their results, and
// the draft model's forwards while all of them generated and the sequences those
// served. (Their goroutines start one by one: on two cores, unless held, the first
// sometimes generated alone for many rounds, or its whole request, before the next
// began — 1.27-1.9 sequences a draft forward over the whole run in 2-3 runs of 10,
// 2.5-3.3 in the others.)
// setup, when given, is called with the two models before the sessions are made.
func specBatch(t *testing.T, bt *Batching, depth, seqs int, setup ...func(target, draft *model.Model)) (res []*Result, draftForwards, draftSeqs int64) {
	t.Helper()
	target, draft := specPair(t)
	// every step waits for the other sessions' forwards a bounded while: on a loaded
	// machine the default wait can let every forward run alone (set before setup, which
	// may make the batchers: a batcher takes it when made)
	bt.minGather = 50 * time.Millisecond
	for _, f := range setup {
		f(target, draft)
	}
	v := target.Params.Vocab
	var mu sync.Mutex
	// held counts the batch is held open by (below); draft forwards count while every
	// session generates
	var held, finished atomic.Int64
	bt.Observe(func(m *model.Model, n, _ int, _ time.Duration) {
		if m == draft && int64(bt.batcher(target).generating())-held.Load() == int64(seqs) {
			mu.Lock()
			draftForwards, draftSeqs = draftForwards+1, draftSeqs+int64(n)
			mu.Unlock()
		}
	})
	sessions := make([]*Session, seqs)
	for i := range sessions {
		s, err := NewSession(Config{Target: target, Draft: draft, Vocab: fakeVocab{}, Ctx: 128, Batch: 8, Batching: bt})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		sessions[i] = s
	}
	res = make([]*Result, seqs)
	errs := make([]error, seqs)
	// The batch is held open (counted generating) until every session is inside
	// Generate (or through it: on a loaded machine this goroutine may look only after
	// the sessions, batched all along by the held counts, have finished), so that they
	// start together.
	tb := bt.batcher(target)
	held.Store(int64(seqs))
	for range seqs {
		tb.enter()
	}
	var wg sync.WaitGroup
	for i := range sessions {
		p := make([]int32, 6)
		for k := range p {
			p[k] = int32((i*104729 + k*7919 + 13) % v)
		}
		wg.Go(func() {
			res[i], errs[i] = sessions[i].Generate(bg, Request{Prompt: p, NPredict: 24, Sampler: enginetest.Greedy{}, Policy: FixedDepth(depth)})
			finished.Add(1)
		})
	}
	entered := func() int64 { return int64(tb.generating()-seqs) + finished.Load() }
	for deadline := time.Now().Add(10 * time.Second); entered() < int64(seqs); time.Sleep(50 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s, %d of %d sessions generate or have generated", entered(), seqs)
		}
	}
	held.Store(0)
	for range seqs {
		tb.leave()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("sequence %d: %v", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return res, draftForwards, draftSeqs
}

// specPair loads specBatch's target and draft models on a CPU backend of two threads.
func specPair(t *testing.T) (target, draft *model.Model) {
	t.Helper()
	b := cpu.New(cpu.Options{Threads: 2})
	t.Cleanup(func() { b.Close() })
	target = golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q8_0.gguf", "target")
	draft = golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q4_0.gguf", "draft")
	return target, draft
}

// TestDraftStepsInLockstep: sessions drafting at the same depth draft in lockstep —
// each draft step of a round is one forward of the draft model for all of them — even
// where their verify forward returns to them one after another (on this machine's two
// cores the first session's draft job used to reach the draft model before the others
// had counted themselves as coming, and ran alone: 1.9 sequences a draft forward of 4).
func TestDraftStepsInLockstep(t *testing.T) {
	const seqs = 4
	_, forwards, served := specBatch(t, NewBatching(64), 1, seqs)
	per := float64(served) / float64(forwards)
	t.Logf("%d draft forwards served %d sequences' steps (%.2f a forward)", forwards, served, per)
	// (the prompts' draft prefills and the last rounds, as the sequences end, are
	// forwards of fewer: 2.62-3.5 in 30 runs on a 2-core AMD EPYC VM, 2.42 at the
	// least in 20 runs beside a busy loop; 1.15-1.41 before the fix)
	if per < 2 {
		t.Errorf("%.2f sequences a draft forward, want at least 2 of %d", per, seqs)
	}
}

// drafted counts, over results res, the draft tokens, the rounds, and the rounds that
// drafted more than one token.
func drafted(res []*Result) (n, rounds, deep int) {
	for _, r := range res {
		n += r.Spec.Drafted
		for k, d := range r.Spec.ByDepth {
			rounds += d.Rounds
			if k != "0" && k != "1" {
				deep += d.Rounds
			}
		}
	}
	return n, rounds, deep
}

// TestBatchDepth: a batch depth sets every batched round's depth whatever the policy —
// 0 keeps the sessions generating together plain (they draft only alone, at the end of
// the batch), 1 drafts one token a round under a policy of depth 3 — and keeps the
// draft steps in lockstep.
func TestBatchDepth(t *testing.T) {
	const seqs = 4
	free, _, _ := specBatch(t, NewBatching(64), 3, seqs)
	plain := NewBatching(64)
	plain.BatchDepth(0)
	none, _, _ := specBatch(t, plain, 3, seqs)
	one := NewBatching(64)
	one.BatchDepth(1)
	res1, forwards, served := specBatch(t, one, 3, seqs)
	f, _, _ := drafted(free)
	z, _, _ := drafted(none)
	_, rounds, deep := drafted(res1)
	t.Logf("drafted tokens: %d at the policies' depth 3, %d at batch depth 0; at batch depth 1 %d of %d rounds deeper than 1, %.2f sequences a draft forward",
		f, z, deep, rounds, float64(served)/float64(forwards))
	if f == 0 || z > f/4 {
		t.Errorf("at batch depth 0 the sessions drafted %d tokens, at their policies' %d; want at most a quarter", z, f)
	}
	if rounds == 0 || 5*deep > rounds {
		t.Errorf("at batch depth 1, %d of %d rounds drafted deeper (the policy's 3); want at most a fifth (the rounds alone)", deep, rounds)
	}
	if per := float64(served) / float64(forwards); per < 2 {
		t.Errorf("at batch depth 1, %.2f sequences a draft forward, want at least 2 of %d", per, seqs)
	}
}
