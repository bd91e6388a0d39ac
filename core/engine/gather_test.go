package engine

import (
	"sync"
	"testing"
	"time"

	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/enginetest"
	"github.com/minfer/minfer/internal/golden"
)

// TestGatherTurnaround: a step waits a twentieth of a forward for the other sessions,
// or until those whose next job is still to come are due — each one's forward end plus
// twice its turnaround (forward end to its next decode job) — for the sessions whose
// turnaround is at most half a forward, never past half a forward from now; verify jobs
// that end a draft phase, prompt chunks and gaps past turnMax are not turnarounds.
func TestGatherTurnaround(t *testing.T) {
	fast, slow := &kv.Cache{}, &kv.Cache{}
	b := &batcher{lastDur: 2400 * time.Microsecond}
	t0 := time.Now()
	if got, want := b.gatherUntil(t0).Sub(t0), 120*time.Microsecond; got != want {
		t.Fatalf("no turnaround measured: wait %v, want %v (a twentieth)", got, want)
	}
	feed := func(j *job, gap time.Duration, n int) {
		for range n {
			b.ran([]*job{j}, t0)
			b.arrival(j, t0.Add(gap))
		}
	}
	decode := func(c *kv.Cache) *job { return &job{c: c, ids: []int32{1}, out: model.OutLast} }
	feed(&job{c: fast, ids: []int32{1}, out: model.OutAll, settles: true}, 900*time.Microsecond, 5)
	feed(&job{c: fast, ids: []int32{1, 2, 3}, out: model.OutLast}, 900*time.Microsecond, 5)
	feed(decode(fast), 30*time.Millisecond, 5)
	if st := b.turns[fast]; st.turn != 0 {
		t.Fatalf("turnaround %v from draft phases, prompts and long gaps, want none", st.turn)
	}
	feed(decode(fast), 300*time.Microsecond, 20)
	feed(decode(slow), 1500*time.Microsecond, 20)
	if f, s := b.turns[fast].turn, b.turns[slow].turn; f != 300*time.Microsecond || s != 1500*time.Microsecond {
		t.Fatalf("turnarounds %v and %v after gaps of 300µs and 1.5 ms", f, s)
	}
	// the fast session's forward ended 50µs before the step gathers: due 550µs from now
	b.ran([]*job{decode(fast)}, t0)
	now := t0.Add(50 * time.Microsecond)
	if got, want := b.gatherUntil(now).Sub(now), 550*time.Microsecond; got != want {
		t.Errorf("a session of turnaround 300µs pending: wait %v, want %v (its end plus twice its turnaround)", got, want)
	}
	// the slow one (1.5 ms, over half a forward) is not waited for
	b.turns[fast].pending = false
	b.ran([]*job{decode(slow)}, t0)
	if got, want := b.gatherUntil(now).Sub(now), 120*time.Microsecond; got != want {
		t.Errorf("only a session of turnaround 1.5 ms pending (forward 2.4 ms): wait %v, want %v", got, want)
	}
	// never past half a forward
	b.lastDur = 4 * time.Millisecond
	b.turns[slow].turn = 1900 * time.Microsecond
	if got, want := b.gatherUntil(now).Sub(now), 2*time.Millisecond; got != want {
		t.Errorf("turnaround 1.9 ms, forward 4 ms: wait %v, want %v (half a forward)", got, want)
	}
}

// TestGatherSlowHost: two sessions decoding plainly, each with host work between its
// steps (an OnText that sleeps, as a server streams to its client), come into step and
// share their forwards. Before the turnaround entered the wait, the wait was a
// twentieth of a batched forward — none before the first — and two sessions that began
// out of step alternated lone forwards for the whole request.
func TestGatherSlowHost(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	target := golden.LoadModel(t, b, "models/trained/target-q8_0.gguf", "target")
	bt := NewBatching(64)
	const seqs, n = 2, 64
	sessions := make([]*Session, seqs)
	for i := range sessions {
		s, err := NewSession(Config{Target: target, Vocab: fakeVocab{}, Ctx: 256, Batch: 64, Batching: bt})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		sessions[i] = s
	}
	// the forward's time, for the sleep: a quarter of it a token
	probe, err := NewSession(Config{Target: target, Vocab: fakeVocab{}, Ctx: 256, Batch: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	t0 := time.Now()
	if _, err := probe.Generate(bg, Request{Prompt: []int32{1, 2, 3}, NPredict: 16, Sampler: enginetest.Greedy{}}); err != nil {
		t.Fatal(err)
	}
	sleep := time.Since(t0) / 16 / 4
	var wg sync.WaitGroup
	errs := make([]error, seqs)
	for i := range sessions {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 3 * sleep) // out of step from the start
			_, errs[i] = sessions[i].Generate(bg, Request{Prompt: []int32{int32(5 + i), 7, 9}, NPredict: n, Sampler: enginetest.Greedy{}, IgnoreEOG: true,
				OnText: func(string) error { time.Sleep(sleep); return nil }})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	forwards, served := bt.Served(target)
	per := float64(served) / float64(forwards)
	t.Logf("host work %v a token: %d forwards served %d sequences' steps (%.2f a forward)", sleep, forwards, served, per)
	if per < 1.5 {
		t.Errorf("%.2f sequences a forward of 2, want at least 1.5", per)
	}
}
