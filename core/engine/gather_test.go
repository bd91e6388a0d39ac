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

// TestGatherTurnaround: the gathering wait is a twentieth of a forward until the
// sessions' turnaround (forward end to the same sequence's next decode job) is longer,
// then twice the turnaround, at most half a forward; verify jobs that end a draft
// phase, prompt chunks and gaps past turnMax are not turnarounds.
func TestGatherTurnaround(t *testing.T) {
	c := &kv.Cache{}
	b := &batcher{lastDur: 2400 * time.Microsecond}
	if got, want := b.gatherLimit(), 120*time.Microsecond; got != want {
		t.Fatalf("no turnaround measured: wait %v, want %v (a twentieth)", got, want)
	}
	t0 := time.Now()
	feed := func(j *job, gap time.Duration, n int) {
		for range n {
			b.ran([]*job{j}, t0)
			b.arrival(j, t0.Add(gap))
		}
	}
	feed(&job{c: c, ids: []int32{1}, out: model.OutAll, settles: true}, 900*time.Microsecond, 50)
	feed(&job{c: c, ids: []int32{1, 2, 3}, out: model.OutLast}, 900*time.Microsecond, 50)
	feed(&job{c: c, ids: []int32{1}, out: model.OutLast}, 30*time.Millisecond, 50)
	if b.turn != 0 {
		t.Fatalf("turnaround %v from draft phases, prompts and long gaps, want none", b.turn)
	}
	feed(&job{c: c, ids: []int32{1}, out: model.OutLast}, 300*time.Microsecond, 60)
	if d := b.turn - 300*time.Microsecond; d < -time.Microsecond || d > time.Microsecond {
		t.Fatalf("turnaround %v after 60 gaps of 300µs", b.turn)
	}
	if got, want := b.gatherLimit(), 600*time.Microsecond; got < want-2*time.Microsecond || got > want {
		t.Errorf("turnaround 300µs, forward 2.4 ms: wait %v, want ~%v (twice the turnaround)", got, want)
	}
	b.lastDur = 400 * time.Microsecond
	if got, want := b.gatherLimit(), 200*time.Microsecond; got != want {
		t.Errorf("turnaround 300µs, forward 0.4 ms: wait %v, want %v (half a forward)", got, want)
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
