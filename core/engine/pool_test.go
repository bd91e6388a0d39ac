package engine

import (
	"errors"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/enginetest"
	"github.com/minfer/minfer/internal/golden"
)

// TestPooledCaches: sessions whose caches come from a block pool — nothing allocated
// up front, bounded requests taking their blocks at start, unbounded ones growing by
// doubling with the cache recomputed — generate exactly what sessions with whole
// caches do, alone and batched, plain and speculative; the pool's count of taken
// blocks is the sum of what the sessions hold, and it all comes back on Close.
func TestPooledCaches(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	target := golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q8_0.gguf", "target")
	draft := golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q4_0.gguf", "draft")
	const ctx, seqs = 96, 4
	prompt := func(i int) []int32 { return []int32{int32(5 + i), 40, 41, int32(90 + 3*i), 7} }
	req := func(i int) Request {
		r := Request{Prompt: prompt(i), NPredict: 20 + 10*i, Sampler: enginetest.Greedy{}}
		if i%2 == 1 {
			r.NPredict = -1 // until the context is full: the caches grow as it goes
		}
		if i >= 2 {
			r.Policy = FixedDepth(3)
		}
		return r
	}
	want := make([][]int32, seqs)
	for i := range want {
		s, err := NewSession(Config{Target: target, Draft: draft, Vocab: fakeVocab{}, Ctx: ctx, Batch: 8})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Generate(bg, req(i))
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		want[i] = res.Tokens
	}
	for _, paged := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole caches", true: "paged"}[paged], func(t *testing.T) {
			pool, err := kv.NewPool(8, 4*ctx/8, 1)
			if err != nil {
				t.Fatal(err)
			}
			var paging *Paging
			if paged {
				if paging, err = NewPaging(pool, target, draft, 0, 0); err != nil || paging == nil {
					t.Fatalf("NewPaging: %v, %v", paging, err)
				}
				defer paging.Close()
			}
			bt := NewBatching(64)
			sessions := make([]*Session, seqs)
			for i := range sessions {
				if sessions[i], err = NewSession(Config{Target: target, Draft: draft, Vocab: fakeVocab{}, Ctx: ctx, Batch: 8, Batching: bt, Pool: pool, Paging: paging}); err != nil {
					t.Fatal(err)
				}
				if sessions[i].capacity() != 0 {
					t.Fatalf("a pooled session allocated %d positions up front", sessions[i].capacity())
				}
			}
			for round := range 2 { // the second time each slot reuses its cached prefix
				got := make([][]int32, seqs)
				errs := make([]error, seqs)
				var wg sync.WaitGroup
				for i := range sessions {
					wg.Go(func() {
						res, err := sessions[i].Generate(bg, req(i))
						if err == nil {
							got[i] = res.Tokens
						}
						errs[i] = err
					})
				}
				wg.Wait()
				held := 0
				for i := range got {
					if errs[i] != nil {
						t.Fatalf("round %d, sequence %d: %v", round, i, errs[i])
					}
					if !slices.Equal(got[i], want[i]) {
						t.Errorf("round %d, sequence %d: pooled %v, whole caches %v", round, i, got[i], want[i])
					}
					held += sessions[i].PoolBlocks()
					if c := sessions[i].target.(*seq).c; c != nil && c.Paged() != paged {
						t.Fatalf("sequence %d: paged cache %t, want %t", i, c.Paged(), paged)
					}
					if c := sessions[i].capacity(); c < len(prompt(i))+len(got[i])-1 || c > ctx { // (the cache holds all but the last token)
						t.Errorf("sequence %d: caches of %d positions for %d tokens (context %d)", i, c, len(prompt(i))+len(got[i]), ctx)
					}
				}
				if pool.Used() != held {
					t.Errorf("round %d: the pool counts %d blocks taken, the sessions hold %d", round, pool.Used(), held)
				}
				if paged && (paging.Target().Used() > held || paging.Draft().Used() > held) {
					t.Errorf("round %d: arenas use %d and %d blocks, more than the %d the pool lent", round, paging.Target().Used(), paging.Draft().Used(), held)
				}
			}
			for _, s := range sessions {
				s.Close()
			}
			if pool.Used() != 0 {
				t.Errorf("after Close the pool counts %d blocks taken, want 0", pool.Used())
			}
			if paged && (paging.Target().Used() != 0 || paging.Draft().Used() != 0) {
				t.Errorf("after Close the arenas use %d and %d blocks, want 0", paging.Target().Used(), paging.Draft().Used())
			}
		})
	}
}

// TestPoolFull: when running sequences hold the whole pool, another request fails
// with ErrPoolFull (not a context error, not a panic, not a wrong answer), and once an
// idle session's blocks can be taken back the same request succeeds with its own
// greedy output.
func TestPoolFull(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	target := golden.LoadModel(t, b, "models/synthetic/synth-llama-q8_0.gguf", "target")
	pool, err := kv.NewPool(16, 4, 1) // 64 positions in all
	if err != nil {
		t.Fatal(err)
	}
	newSession := func() *Session {
		s, err := NewSession(Config{Target: target, Vocab: fakeVocab{}, Ctx: 64, Batch: 8, Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	a, c := newSession(), newSession()
	big := Request{Prompt: []int32{1, 2, 3, 4}, NPredict: 40, Sampler: enginetest.Greedy{}} // 4+40+17 positions: all 4 blocks
	small := Request{Prompt: []int32{9, 8, 7}, NPredict: 5, Sampler: enginetest.Greedy{}}
	alone, err := newSession().Generate(bg, small)
	if err != nil {
		t.Fatal(err)
	}
	// a runs: hold its blocks as a running sequence does by marking it busy
	if _, err := a.Generate(bg, big); err != nil {
		t.Fatal(err)
	}
	pool.Busy(a)
	if _, err := c.Generate(bg, small); !errors.Is(err, ErrPoolFull) || errors.Is(err, ErrContextFull) {
		t.Fatalf("pool held by a running sequence: got %v, want ErrPoolFull", err)
	}
	pool.Idle(a) // a ended: its blocks may be taken back
	res, err := c.Generate(bg, small)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Tokens, alone.Tokens) {
		t.Errorf("after taking a's blocks back: %v, alone %v", res.Tokens, alone.Tokens)
	}
	if a.PoolBlocks() != 0 || a.capacity() != 0 || len(a.hist) != 0 {
		t.Errorf("a gave its blocks back but holds %d blocks, %d positions, %d tokens", a.PoolBlocks(), a.capacity(), len(a.hist))
	}
	if _, err := a.Generate(bg, small); err != nil { // c is idle now: a takes its blocks
		t.Fatal(err)
	}
}

// TestPagedPrefixSharing: pooled sessions on paged caches whose prompts share a long
// prefix (a system prompt) compute it once: a session starting a request takes the
// prefix from another's cache (Result.CachedTokens counts it), the arena holds its
// blocks once, and every output equals that of a session with a whole cache —
// whether the session it shares from is idle or generating beside it.
func TestPagedPrefixSharing(t *testing.T) { plainAndSpeculative(t, testPagedPrefixSharing) }

// plainAndSpeculative runs test as subtest "plain" on the synthetic qwen2 Q8_0 target
// alone and as "speculative" with its Q4_0 draft.
func plainAndSpeculative(t *testing.T, test func(t *testing.T, target, draft *model.Model)) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	target := golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q8_0.gguf", "target")
	draftModel := golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q4_0.gguf", "draft")
	for _, draft := range []*model.Model{nil, draftModel} {
		t.Run(map[bool]string{true: "plain", false: "speculative"}[draft == nil], func(t *testing.T) {
			test(t, target, draft)
		})
	}
}

func testPagedPrefixSharing(t *testing.T, target, draft *model.Model) {
	v := target.Params.Vocab
	const ctx, sys = 128, 45 // the system prompt: 5 blocks and a part
	prompt := func(i int) []int32 {
		p := make([]int32, sys+4+i)
		for k := range p {
			p[k] = int32((k*7919 + 13) % v)
			if k >= sys {
				p[k] = int32((i*104729 + k*31 + 5) % v)
			}
		}
		return p
	}
	req := func(i int) Request {
		r := Request{Prompt: prompt(i), NPredict: 12, Sampler: enginetest.Greedy{}}
		if draft != nil {
			r.Policy = FixedDepth(3)
		}
		return r
	}
	want := make([][]int32, 4)
	for i := range want {
		s, err := NewSession(Config{Target: target, Draft: draft, Vocab: fakeVocab{}, Ctx: ctx, Batch: 16})
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Generate(bg, req(i))
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		want[i] = res.Tokens
	}
	pool, err := kv.NewPool(8, 4*ctx/8, 1)
	if err != nil {
		t.Fatal(err)
	}
	paging, err := NewPaging(pool, target, draft, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer paging.Close()
	bt := NewBatching(64)
	sessions := make([]*Session, 4)
	for i := range sessions {
		if sessions[i], err = NewSession(Config{Target: target, Draft: draft, Vocab: fakeVocab{}, Ctx: ctx, Batch: 16, Batching: bt, Pool: pool, Paging: paging}); err != nil {
			t.Fatal(err)
		}
		defer sessions[i].Close()
	}
	check := func(i int, res *Result, err error, minCached int) {
		t.Helper()
		if err != nil {
			t.Fatalf("sequence %d: %v", i, err)
		}
		if !slices.Equal(res.Tokens, want[i]) {
			t.Errorf("sequence %d: shared prefix %v, whole cache %v", i, res.Tokens, want[i])
		}
		if res.CachedTokens < minCached {
			t.Errorf("sequence %d: %d cached tokens, want at least %d", i, res.CachedTokens, minCached)
		}
	}
	used := func() (int, int) {
		d := 0
		if paging.Draft() != nil {
			d = paging.Draft().Used()
		}
		return paging.Target().Used(), d
	}
	res, err := sessions[0].Generate(bg, req(0))
	check(0, res, err, 0)
	if res.CachedTokens != 0 {
		t.Fatalf("the first request found %d cached tokens", res.CachedTokens)
	}
	aloneT, aloneD := used()
	// 1 shares from idle 0; then 2 and 3 start together beside each other
	res, err = sessions[1].Generate(bg, req(1))
	check(1, res, err, sys)
	if gotT, gotD := used(); gotT >= 2*aloneT || draft != nil && gotD >= 2*aloneD {
		t.Errorf("two sequences sharing a %d-token prefix use %d target and %d draft blocks, one alone %d and %d: the prefix is not held once", sys, gotT, gotD, aloneT, aloneD)
	}
	var wg sync.WaitGroup
	results := make([]*Result, 4)
	errs := make([]error, 4)
	for i := 2; i < 4; i++ {
		wg.Go(func() { results[i], errs[i] = sessions[i].Generate(bg, req(i)) })
	}
	wg.Wait()
	for i := 2; i < 4; i++ {
		check(i, results[i], errs[i], sys)
	}
	// 0 again, after the others wrote beside its prefix: its own cache still serves it
	res, err = sessions[0].Generate(bg, req(0))
	check(0, res, err, len(prompt(0))-1)
}

// BenchmarkSharedSystemPrompt: a request on a second slot whose prompt starts with the
// 400-token system prompt the first slot's cache holds (trained target Q8_0, pooled
// sessions, 2 threads, 8 tokens generated): with paging the prefix is shared, without
// it recomputed. cpu-ms/request is the process CPU time of a request.
func BenchmarkSharedSystemPrompt(b *testing.B) {
	be := cpu.New(cpu.Options{Threads: 2})
	defer be.Close()
	target := golden.LoadModel(b, be, "models/trained/target-q8_0.gguf", "target")
	const sys = 400
	prompt := func(i int) []int32 {
		p := make([]int32, sys+20)
		for k := range p {
			p[k] = int32(1 + (k*7)%300)
			if k >= sys {
				p[k] = int32(1 + (i*13+k)%300)
			}
		}
		return p
	}
	for _, paged := range []bool{false, true} {
		b.Run(map[bool]string{false: "recomputed", true: "shared"}[paged], func(b *testing.B) {
			pool, err := kv.NewPool(256, 8, 1)
			if err != nil {
				b.Fatal(err)
			}
			var paging *Paging
			if paged {
				if paging, err = NewPaging(pool, target, nil, 0, 0); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(paging.Close) // after the sessions' Close (cleanups run last first)
			}
			newSession := func() *Session {
				s, err := NewSession(Config{Target: target, Vocab: fakeVocab{}, Ctx: 512, Batch: 64, Pool: pool, Paging: paging})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(s.Close)
				return s
			}
			first, second := newSession(), newSession()
			if _, err := first.Generate(bg, Request{Prompt: prompt(0), NPredict: 8, Sampler: enginetest.Greedy{}}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			cpu0 := processCPU()
			for i := range b.N {
				second.Reset()
				res, err := second.Generate(bg, Request{Prompt: prompt(1 + i%8), NPredict: 8, Sampler: enginetest.Greedy{}})
				if err != nil {
					b.Fatal(err)
				}
				if paged != (res.CachedTokens >= sys) {
					b.Fatalf("cached %d tokens (paged %t)", res.CachedTokens, paged)
				}
			}
			b.ReportMetric((processCPU()-cpu0).Seconds()*1e3/float64(b.N), "cpu-ms/request")
		})
	}
}

// processCPU is the process's user+system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestPagedShareThenReclaim: a session shares the prefix of an idle one, and its
// reservation then makes the pool take that idle session's blocks back (the pool
// holds one sequence and less than the other's own blocks): the shared blocks live on by the sharer's
// references, the outputs are those of whole caches, the arena never holds more than
// the pool lent, and every block comes back when the sessions close.
func TestPagedShareThenReclaim(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	target := golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q8_0.gguf", "target")
	v := target.Params.Vocab
	const ctx = 128
	prompt := func(i int) []int32 {
		p := make([]int32, 50)
		for k := range p {
			p[k] = int32((k*7919 + 13) % v) // a common prefix of 40
			if k >= 40 {
				p[k] = int32((i*104729 + k*31 + 5) % v)
			}
		}
		return p
	}
	req := func(i int) Request { return Request{Prompt: prompt(i), NPredict: 10, Sampler: enginetest.Greedy{}} }
	alone := func(r Request) []int32 {
		s, err := NewSession(Config{Target: target, Vocab: fakeVocab{}, Ctx: ctx, Batch: 16})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		res, err := s.Generate(bg, r)
		if err != nil {
			t.Fatal(err)
		}
		return res.Tokens
	}
	// a request alone takes 10 blocks (50 + 16 + 1 + 10 positions); one sharing the
	// 40-token prefix (5 blocks) of an idle one holding 8 reserves 5 more: 13 > 12
	pool, err := kv.NewPool(8, 12, 1)
	if err != nil {
		t.Fatal(err)
	}
	paging, err := NewPaging(pool, target, nil, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer paging.Close()
	var a, c *Session
	for _, p := range []**Session{&a, &c} {
		if *p, err = NewSession(Config{Target: target, Vocab: fakeVocab{}, Ctx: ctx, Batch: 16, Pool: pool, Paging: paging}); err != nil {
			t.Fatal(err)
		}
	}
	gen := func(s *Session, i, minCached int) {
		t.Helper()
		r := req(i)
		res, err := s.Generate(bg, r)
		if err != nil {
			t.Fatal(err)
		}
		if want := alone(r); !slices.Equal(res.Tokens, want) {
			t.Fatalf("request %d: paged %v, whole cache %v", i, res.Tokens, want)
		}
		if res.CachedTokens < minCached {
			t.Errorf("request %d: %d cached tokens, want at least %d", i, res.CachedTokens, minCached)
		}
		if paging.Target().Used() > pool.Used() {
			t.Fatalf("the arena holds %d blocks, the pool lent %d", paging.Target().Used(), pool.Used())
		}
	}
	gen(a, 0, 0)
	before := a.Reclaims()
	gen(c, 1, 40) // shares a's prefix, then its reservation takes a's blocks back
	if a.Reclaims() == before {
		t.Fatal("the pool took nothing back from the idle session")
	}
	gen(c, 1, 49) // its own cache, the shared blocks included
	gen(a, 0, 40) // a starts over from c's prefix, taking c's blocks back in turn
	a.Close()
	c.Close()
	if pool.Used() != 0 || paging.Target().Used() != 0 {
		t.Errorf("after Close: the pool lends %d blocks, the arena holds %d; want 0 and 0", pool.Used(), paging.Target().Used())
	}
}
