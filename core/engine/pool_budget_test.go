package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/enginetest"
	"github.com/minfer/minfer/sdk"
)

// gateSampler is greedy, and holds its request at its first token (after the prefill,
// which reserved the request's blocks) until wait is closed, calling start first: the
// test sees which requests run at once.
type gateSampler struct {
	enginetest.Greedy
	once  sync.Once
	start func()
	wait  <-chan struct{}
}

func (g *gateSampler) Sample(ctx context.Context, r *sdk.SampleRound) (sdk.SampleResult, error) {
	g.once.Do(func() { g.start(); <-g.wait })
	return g.Greedy.Sample(ctx, r)
}

// TestPagedPoolCountsSharing: a paged pool counts physical blocks. A budget of 30
// blocks of 8 positions admits two running requests of 85 positions (11 blocks each)
// whose prompts differ, and refuses the others with ErrPoolFull; it admits four
// running at once whose prompts share a 60-token prefix with an idle slot's cache
// (each reserves the 4 blocks it writes past the 7 whole shared ones, the copy of the
// partly filled eighth included). With a draft model its arena counts the same way
// (its cache shares the prefix too). The outputs are those of whole caches, the pool
// never counts more than its budget nor less than the arena holds, and every block
// and reservation comes back on Close.
func TestPagedPoolCountsSharing(t *testing.T) { plainAndSpeculative(t, testPagedPoolCountsSharing) }

func testPagedPoolCountsSharing(t *testing.T, target, draft *model.Model) {
	v := target.Params.Vocab
	const ctx, sys, clients = 128, 60, 4
	prompt := func(i int, shared bool) []int32 {
		p := make([]int32, sys+4) // + draft rows 17 + 4 tokens: 85 positions
		for k := range p {
			p[k] = int32((k*7919 + 13) % v)
			if k >= sys || !shared {
				p[k] = int32((i*104729 + k*31 + 5) % v)
			}
		}
		return p
	}
	req := func(p []int32, s sdk.Sampler) Request {
		r := Request{Prompt: p, NPredict: 4, Sampler: s}
		if draft != nil {
			r.Policy = FixedDepth(3)
		}
		return r
	}
	alone := func(p []int32) []int32 {
		s, err := NewSession(Config{Target: target, Draft: draft, Vocab: fakeVocab{}, Ctx: ctx, Batch: 16})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		res, err := s.Generate(bg, req(p, enginetest.Greedy{}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Tokens
	}
	pool, err := kv.NewPool(8, 30, 1)
	if err != nil {
		t.Fatal(err)
	}
	paging, err := NewPaging(pool, target, draft, 0, 0)
	if err != nil || paging == nil {
		t.Fatalf("NewPaging: %v, %v", paging, err)
	}
	defer paging.Close()
	sessions := make([]*Session, clients+1)
	for i := range sessions {
		if sessions[i], err = NewSession(Config{Target: target, Draft: draft, Vocab: fakeVocab{}, Ctx: ctx, Batch: 16, Pool: pool, Paging: paging}); err != nil {
			t.Fatal(err)
		}
	}
	// at once runs sessions 1..clients on prompts together, each held at its first
	// token until all are running or refused, and returns how many ran.
	atOnce := func(shared bool) int {
		t.Helper()
		release := make(chan struct{})
		events := make(chan bool, clients)
		results := make([]*Result, clients)
		errs := make([]error, clients)
		var wg sync.WaitGroup
		for i := range clients {
			started := false
			g := &gateSampler{start: func() { started = true; events <- true }, wait: release}
			wg.Go(func() {
				results[i], errs[i] = sessions[1+i].Generate(bg, req(prompt(1+i, shared), g))
				if !started {
					events <- false
				}
			})
		}
		ran := 0
		for range clients {
			if <-events {
				ran++
			}
		}
		if used := pool.Used(); used > pool.Blocks() || paging.Target().Used() > used {
			t.Errorf("while %d run: the pool counts %d blocks of %d, the arena holds %d", ran, used, pool.Blocks(), paging.Target().Used())
		}
		close(release)
		wg.Wait()
		for i := range clients {
			switch {
			case errs[i] != nil && !errors.Is(errs[i], ErrPoolFull):
				t.Fatalf("shared %t, client %d: %v, want ErrPoolFull or success", shared, i, errs[i])
			case errs[i] != nil:
			case !slices.Equal(results[i].Tokens, alone(prompt(1+i, shared))):
				t.Errorf("shared %t, client %d: paged %v, whole cache %v", shared, i, results[i].Tokens, alone(prompt(1+i, shared)))
			case shared && results[i].CachedTokens < sys:
				t.Errorf("client %d: %d cached tokens, want at least the %d shared", i, results[i].CachedTokens, sys)
			}
		}
		return ran
	}
	first := func() {
		t.Helper()
		res, err := sessions[0].Generate(bg, req(prompt(0, true), enginetest.Greedy{}))
		if err != nil {
			t.Fatal(err)
		}
		if want := alone(prompt(0, true)); !slices.Equal(res.Tokens, want) {
			t.Fatalf("the first request: paged %v, whole cache %v", res.Tokens, want)
		}
	}
	first()
	if got := atOnce(false); got != 2 {
		t.Errorf("prompts apart: %d requests ran at once, want 2 (11 blocks each of 30)", got)
	}
	first() // the shared prefix in an idle slot's cache again
	if got := atOnce(true); got != clients {
		t.Errorf("prompts sharing a %d-token prefix: %d requests ran at once, want %d", sys, got, clients)
	}
	for _, s := range sessions {
		s.Close()
	}
	if pool.Used() != 0 || paging.Target().Used() != 0 || paging.Target().Reserved() != 0 {
		t.Errorf("after Close: the pool counts %d blocks, the arena holds %d and reserves %d; want none", pool.Used(), paging.Target().Used(), paging.Target().Reserved())
	}
	if d := paging.Draft(); d != nil && (d.Used() != 0 || d.Reserved() != 0) {
		t.Errorf("after Close: the draft arena holds %d and reserves %d; want none", d.Used(), d.Reserved())
	}
}
