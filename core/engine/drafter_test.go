package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/minfer/minfer/internal/enginetest"
	"github.com/minfer/minfer/sdk"
)

// seenDrafter keeps the sequence it is told (what every real drafter must do) and lets
// propose choose its answer from it.
type seenDrafter struct {
	seq     []int32
	calls   int
	propose func(seq []int32, q *sdk.DraftRequest) (sdk.DraftResult, error)
}

func (d *seenDrafter) Draft(_ context.Context, q *sdk.DraftRequest) (sdk.DraftResult, error) {
	d.seq = append(d.seq, q.Appended...)
	d.calls++
	return d.propose(d.seq, q)
}

// oracle proposes the plain output's continuation of seq (all accepted).
func oracle(prompt, out []int32) func([]int32, *sdk.DraftRequest) (sdk.DraftResult, error) {
	full := append(slices.Clone(prompt), out...)
	return func(seq []int32, q *sdk.DraftRequest) (sdk.DraftResult, error) {
		var res sdk.DraftResult
		for i := len(seq); i < len(full) && len(res.Tokens) < q.MaxDepth; i++ {
			res.Tokens, res.Conf = append(res.Tokens, full[i]), append(res.Conf, 1)
		}
		return res, nil
	}
}

// randomDraft proposes a random number of random tokens with random confidences.
func randomDraft(seed uint64) func([]int32, *sdk.DraftRequest) (sdk.DraftResult, error) {
	r := rand.New(rand.NewPCG(seed, 1))
	return func(_ []int32, q *sdk.DraftRequest) (sdk.DraftResult, error) {
		var res sdk.DraftResult
		for range r.IntN(q.MaxDepth + 1) {
			res.Tokens, res.Conf = append(res.Tokens, int32(r.IntN(q.Vocab))), append(res.Conf, r.Float32())
		}
		return res, nil
	}
}

// adversary proposes the true continuation with one token changed at a random
// position, always with confidence 1: the drafts a verifier must not let through.
func adversary(prompt, out []int32, seed uint64) func([]int32, *sdk.DraftRequest) (sdk.DraftResult, error) {
	r := rand.New(rand.NewPCG(seed, 2))
	honest := oracle(prompt, out)
	return func(seq []int32, q *sdk.DraftRequest) (sdk.DraftResult, error) {
		res, _ := honest(seq, q)
		if n := len(res.Tokens); n > 0 {
			i := r.IntN(n)
			res.Tokens[i] = (res.Tokens[i] + 1 + int32(r.IntN(q.Vocab-1))) % int32(q.Vocab)
		}
		return res, nil
	}
}

// drafterCycle gives round i to drafter i mod n, at a depth that cycles too.
type drafterCycle struct{ i int }

func (p *drafterCycle) NextDepth(_ context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	p.i++
	return sdk.DepthDecision{Depth: 1 + p.i%7, Drafter: p.i % max(last.Drafters, 1)}, nil
}

// TestDrafterGreedyIdentity: whatever a drafter proposes — the right continuation, random
// tokens, or the right one with a token changed — greedy output equals plain decoding,
// without a draft model and beside one, at fixed depths and with a policy that moves
// between drafters; every drafter is told exactly the sequence, once.
func TestDrafterGreedyIdentity(t *testing.T) {
	const v, n, np = 61, 1024, 50
	prompt := []int32{4, 8, 15, 16, 23, 42}
	plain := generate(t, &fakeLM{v: v, n: n}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: np})
	kinds := []struct {
		name string
		mk   func(seed uint64) *seenDrafter
	}{
		{"oracle", func(uint64) *seenDrafter { return &seenDrafter{propose: oracle(prompt, plain.Tokens)} }},
		{"random", func(s uint64) *seenDrafter { return &seenDrafter{propose: randomDraft(s)} }},
		{"adversary", func(s uint64) *seenDrafter { return &seenDrafter{propose: adversary(prompt, plain.Tokens, s)} }},
	}
	for _, k := range kinds {
		for _, depth := range []int{1, 3, 8, 16} {
			d := k.mk(uint64(depth))
			got := generate(t, &fakeLM{v: v, n: n}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: np,
				Policy: FixedDepth(depth), Drafters: []Drafter{{Name: k.name, Drafter: d}}})
			if !slices.Equal(got.Tokens, plain.Tokens) {
				t.Fatalf("%s depth %d: got %v, want %v", k.name, depth, got.Tokens, plain.Tokens)
			}
			if k.name == "oracle" {
				checkFullAcceptance(t, got, depth, np)
			}
			// every round's call, and the one that told it the prompt (see TestDrafterPrimed)
			if st := got.Spec.ByDrafter[k.name]; st.Rounds != d.calls-1 || st.Drafted != got.Spec.Drafted {
				t.Fatalf("%s depth %d: by drafter %+v, want %d rounds and %d drafted", k.name, depth, got.Spec.ByDrafter, d.calls-1, got.Spec.Drafted)
			}
			checkTold(t, d.seq, prompt, got.Tokens)
		}
	}
	// the draft model and the three drafters, one round each in turn
	ds := []Drafter{}
	var seen []*seenDrafter
	for i, k := range kinds {
		d := k.mk(uint64(100 + i))
		seen = append(seen, d)
		ds = append(ds, Drafter{Name: k.name, Drafter: d})
	}
	got := generate(t, &fakeLM{v: v, n: n}, &fakeLM{v: v, n: n, noise: 1, salt: 7}, fakeVocab{},
		Request{Prompt: prompt, NPredict: np, Policy: &drafterCycle{}, Drafters: ds})
	if !slices.Equal(got.Tokens, plain.Tokens) {
		t.Fatalf("cycle: got %v, want %v", got.Tokens, plain.Tokens)
	}
	for _, name := range []string{ModelDrafter, "oracle", "random", "adversary"} {
		if got.Spec.ByDrafter[name].Rounds == 0 {
			t.Fatalf("cycle: drafter %s got no round (%+v)", name, got.Spec.ByDrafter)
		}
	}
	for _, d := range seen {
		checkTold(t, d.seq, prompt, got.Tokens)
	}
}

// checkTold: what a drafter was told is a prefix of the sequence, at most the newest
// token short of it (the tokens of the last round come after its last call).
func checkTold(t *testing.T, told, prompt, out []int32) {
	t.Helper()
	full := append(slices.Clone(prompt), out...)
	if len(told) < len(prompt) || len(told) > len(full) || !slices.Equal(told, full[:len(told)]) {
		t.Fatalf("drafter was told %v, want a prefix of %v holding the prompt", told, full)
	}
}

// recOutcomes records the outcomes a policy is told and answers a fixed decision.
type recOutcomes struct {
	dec  sdk.DepthDecision
	seen []sdk.RoundOutcome
}

func (p *recOutcomes) NextDepth(_ context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	// (the engine reuses the outcome's slices from round to round)
	last.DraftConf, last.Offered = slices.Clone(last.DraftConf), slices.Clone(last.Offered)
	p.seen = append(p.seen, last)
	return p.dec, nil
}

// TestDrafterOutcome: the policy is told how many drafters there are and which drafted,
// and the drafter's confidences; min_conf cuts a drafter's proposal as it cuts the
// model's.
func TestDrafterOutcome(t *testing.T) {
	const v = 40
	prompt := []int32{1, 2, 3}
	d := &seenDrafter{propose: func(_ []int32, q *sdk.DraftRequest) (sdk.DraftResult, error) {
		n := min(q.MaxDepth, 4)
		return sdk.DraftResult{Tokens: []int32{5, 6, 7, 8}[:n], Conf: []float32{0.9, 0.8, 0.2, 0.9}[:n]}, nil
	}}
	for _, tc := range []struct {
		keep    bool
		drafted int
	}{{false, 2}, {true, 3}} {
		pol := &recOutcomes{dec: sdk.DepthDecision{Depth: 4, MinConf: 0.5, KeepCut: tc.keep, Drafter: 1}}
		generate(t, &fakeLM{v: v, n: 64}, &fakeLM{v: v, n: 64}, fakeVocab{}, Request{Prompt: prompt, NPredict: 6,
			Policy: pol, Drafters: []Drafter{{Name: "x", Drafter: d}}})
		first := pol.seen[0]
		if first.Round != -1 || first.Drafters != 2 {
			t.Fatalf("first outcome %+v, want round -1 and 2 drafters", first)
		}
		o := pol.seen[1]
		if o.Drafter != 1 || o.Drafters != 2 || o.Drafted != tc.drafted || !slices.Equal(o.DraftConf, []float32{0.9, 0.8, 0.2}[:tc.drafted]) {
			t.Fatalf("keep_cut %v: outcome %+v, want drafter 1 of 2, %d drafted", tc.keep, o, tc.drafted)
		}
	}
}

// TestDrafterErrors: a policy naming a drafter that is not there ends the request with
// an error naming the problem (a policy's mistake, not a drafter's failure).
func TestDrafterErrors(t *testing.T) {
	d := &seenDrafter{propose: func([]int32, *sdk.DraftRequest) (sdk.DraftResult, error) { return sdk.DraftResult{}, nil }}
	s := newFakeSession(&fakeLM{v: 30, n: 64}, nil, fakeVocab{}, 16)
	_, err := s.Generate(bg, Request{Prompt: []int32{1, 2}, NPredict: 5, Sampler: enginetest.Greedy{},
		Policy: &recOutcomes{dec: sdk.DepthDecision{Depth: 1, Drafter: 1}}, Drafters: []Drafter{{Name: "evil", Drafter: d}}})
	if want := "drafter 1 chosen, the request has 1"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want an error containing %q", err, want)
	}
}

// TestDrafterFallback: a drafter that errors or answers a hostile draft (here at its
// first call, which tells it the prompt and asks for one token: see TestDrafterPrimed)
// never fails the request: its rounds fall back to the draft model, else to plain
// decoding, and the
// greedy output is plain decoding's. The first failure is reported once, naming the
// drafter and the problem; the failure is counted and turns the drafter off (it is
// not called again), as the WebAssembly and process hosts discard a failed instance.
// A drafter that would have answered well after one failure is off all the same.
func TestDrafterFallback(t *testing.T) {
	const v, np = 30, 24
	prompt := []int32{1, 2, 3}
	plain := generate(t, &fakeLM{v: v, n: 64}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: np})
	nan := float32(math.NaN())
	fixed := func(res sdk.DraftResult, err error) func([]int32, *sdk.DraftRequest) (sdk.DraftResult, error) {
		return func([]int32, *sdk.DraftRequest) (sdk.DraftResult, error) { return res, err }
	}
	for _, tc := range []struct {
		name    string
		propose func([]int32, *sdk.DraftRequest) (sdk.DraftResult, error)
		want    string
	}{
		{"too many", fixed(sdk.DraftResult{Tokens: []int32{1, 2, 3}, Conf: []float32{1, 1, 1}}, nil), `drafter "evil": 3 draft tokens, at most 1`},
		{"outside vocab", fixed(sdk.DraftResult{Tokens: []int32{v}, Conf: []float32{1}}, nil), "outside the vocabulary"},
		{"negative id", fixed(sdk.DraftResult{Tokens: []int32{-1}, Conf: []float32{1}}, nil), "outside the vocabulary"},
		{"nan conf", fixed(sdk.DraftResult{Tokens: []int32{1}, Conf: []float32{nan}}, nil), "confidence NaN"},
		{"conf above 1", fixed(sdk.DraftResult{Tokens: []int32{1}, Conf: []float32{1.5}}, nil), "confidence 1.5"},
		{"conf count", fixed(sdk.DraftResult{Tokens: []int32{1}, Conf: []float32{}}, nil), "0 confidences for 1"},
		{"error", fixed(sdk.DraftResult{}, errors.New("out of ideas")), `drafter "evil": out of ideas`},
	} {
		for _, withModel := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/model=%v", tc.name, withModel), func(t *testing.T) {
				var dm *fakeLM
				pol := &recOutcomes{dec: sdk.DepthDecision{Depth: 2}}
				if withModel {
					dm = &fakeLM{v: v, n: 64, noise: 1, salt: 3}
					pol.dec.Drafter = 1 // the plugin, never the model
				}
				d := &seenDrafter{propose: tc.propose}
				var told []string
				got := generate(t, &fakeLM{v: v, n: 64}, dm, fakeVocab{}, Request{Prompt: prompt, NPredict: np, Policy: pol,
					Drafters:         []Drafter{{Name: "evil", Drafter: d}},
					OnDrafterFailure: func(name string, err error) { told = append(told, name+": "+err.Error()) }})
				if !slices.Equal(got.Tokens, plain.Tokens) {
					t.Fatalf("got %v, want %v", got.Tokens, plain.Tokens)
				}
				if len(told) != 1 || !strings.HasPrefix(told[0], "evil: ") || !strings.Contains(told[0], tc.want) {
					t.Fatalf("failures reported %q, want one naming evil and containing %q", told, tc.want)
				}
				st := got.Spec.ByDrafter["evil"]
				if d.calls != 1 || st.Failed != 1 || !st.Off || st.Rounds != 0 {
					t.Fatalf("%d calls, stats %+v; want one failed call, then off", d.calls, st)
				}
				m, drafting := got.Spec.ByDrafter[ModelDrafter], got.Spec.Rounds-got.Spec.ByDepth["0"].Rounds
				if withModel && (m.Rounds != drafting || dm.calls == 0) || !withModel && got.Spec.Drafted != 0 {
					t.Fatalf("rounds %d, by drafter %+v, drafted %d: want every round from the draft model if there is one, else none drafted",
						got.Spec.Rounds, got.Spec.ByDrafter, got.Spec.Drafted)
				}
				for _, o := range pol.seen[1:] {
					if want := map[bool]int{false: 0, true: 0}[withModel]; o.Drafter != want || !withModel && o.Drafted != 0 {
						t.Fatalf("outcome %+v: want drafter %d (the model when there is one)", o, want)
					}
				}
			})
		}
	}
	// Failing at its third call (the prompt's, a round's, then this one): its first
	// round's answer (the true continuation) is accepted, its first failure turns it
	// off, and it is told nothing after the failed call (a prefix of the sequence,
	// ending where that call's did).
	n := 0
	honest := oracle(prompt, plain.Tokens)
	d := &seenDrafter{propose: func(seq []int32, q *sdk.DraftRequest) (sdk.DraftResult, error) {
		n++
		if n%3 == 0 {
			return sdk.DraftResult{}, errors.New("hiccup")
		}
		return honest(seq, q)
	}}
	reports := 0
	got := generate(t, &fakeLM{v: v, n: 64}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: np, Policy: FixedDepth(2),
		Drafters: []Drafter{{Name: "flaky", Drafter: d}}, OnDrafterFailure: func(string, error) { reports++ }})
	st := got.Spec.ByDrafter["flaky"]
	if !slices.Equal(got.Tokens, plain.Tokens) || !st.Off || st.Failed != 1 || d.calls != 3 || st.Rounds != 1 || st.Accepted != 2 || reports != 1 {
		t.Fatalf("tokens %v (want %v), %d calls, stats %+v, %d reports: want one good round, then a failed call, reported once, then off",
			got.Tokens, plain.Tokens, d.calls, st, reports)
	}
	if want := len(prompt) + 3; len(d.seq) != want { // the prompt, then the good round's 2 drafts and the next token
		t.Fatalf("drafter told %d tokens, want %d (nothing after its failed call)", len(d.seq), want)
	}
	checkTold(t, d.seq, prompt, got.Tokens)
}

// TestDrafterPrimed: a request that may draft tells each drafter plugin the prompt
// while it is prefilled, in a call asking for one token whose answer is unused, so
// that the first round a drafter drafts is told only what the rounds since emitted
// (its draft time, which the depth policy prices the drafter by, is a round's, not
// the prompt's); the call's time is the prompt phase's (Ms.DraftersPrompt). A request
// that cannot draft (no policy, or one token to generate) makes no such call.
func TestDrafterPrimed(t *testing.T) {
	const v, np = 40, 12
	prompt := []int32{1, 2, 3, 4, 5, 6, 7}
	plain := generate(t, &fakeLM{v: v, n: 64}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: np})
	var calls []sdk.DraftRequest
	honest := oracle(prompt, plain.Tokens)
	d := &seenDrafter{propose: func(seq []int32, q *sdk.DraftRequest) (sdk.DraftResult, error) {
		calls = append(calls, sdk.DraftRequest{Appended: slices.Clone(q.Appended), MaxDepth: q.MaxDepth, Vocab: q.Vocab})
		return honest(seq, q)
	}}
	pol := &recOutcomes{dec: sdk.DepthDecision{Depth: 3}}
	got := generate(t, &fakeLM{v: v, n: 64}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: np, Policy: pol,
		Drafters: []Drafter{{Name: "x", Drafter: d}}})
	if !slices.Equal(got.Tokens, plain.Tokens) {
		t.Fatalf("got %v, want %v", got.Tokens, plain.Tokens)
	}
	if len(calls) < 2 || !slices.Equal(calls[0].Appended, prompt) || calls[0].MaxDepth != 1 || calls[0].Vocab != v {
		t.Fatalf("calls %+v: want the first to tell the prompt %v and ask for 1 token of a vocabulary of %d", calls, prompt, v)
	}
	if n := len(calls[1].Appended); n != 0 || calls[1].MaxDepth != 3 {
		t.Fatalf("first round's call %+v: want nothing appended (the prompt was told) and depth 3", calls[1])
	}
	if st := got.Spec.ByDrafter["x"]; st.Rounds != len(calls)-1 || got.Spec.Ms.DraftersPrompt <= 0 {
		t.Fatalf("%d calls, by drafter %+v, prompt's call %v ms: want one call per round and the prompt's, timed",
			len(calls), st, got.Spec.Ms.DraftersPrompt)
	}
	checkTold(t, d.seq, prompt, got.Tokens)
	for _, tc := range []struct {
		name string
		req  Request
	}{
		{"no policy", Request{Prompt: prompt, NPredict: np}},
		{"one token", Request{Prompt: prompt, NPredict: 1, Policy: FixedDepth(3)}},
		{"nothing to generate", Request{Prompt: prompt, NPredict: 0, Policy: FixedDepth(3)}},
	} {
		d := &seenDrafter{propose: honest}
		tc.req.Drafters = []Drafter{{Name: "x", Drafter: d}}
		got := generate(t, &fakeLM{v: v, n: 64}, nil, fakeVocab{}, tc.req)
		if d.calls != 0 || got.Spec.Ms.DraftersPrompt != 0 {
			t.Fatalf("%s: %d calls, %v ms: want none", tc.name, d.calls, got.Spec.Ms.DraftersPrompt)
		}
	}
}

// TestNoDraftModel: a request that keeps the draft model out drafts with its plugins
// only (drafter 0 is the first plugin) and never runs the draft model.
func TestNoDraftModel(t *testing.T) {
	const v = 40
	prompt := []int32{1, 2, 3}
	plain := generate(t, &fakeLM{v: v, n: 64}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: 12})
	d := &seenDrafter{propose: oracle(prompt, plain.Tokens)}
	dm := &fakeLM{v: v, n: 64}
	pol := &recOutcomes{dec: sdk.DepthDecision{Depth: 3}}
	got := generate(t, &fakeLM{v: v, n: 64}, dm, fakeVocab{}, Request{Prompt: prompt, NPredict: 12, Policy: pol,
		Drafters: []Drafter{{Name: "x", Drafter: d}}, NoDraftModel: true})
	if !slices.Equal(got.Tokens, plain.Tokens) || dm.calls != 0 || pol.seen[0].Drafters != 1 || got.Spec.ByDrafter["x"].Rounds == 0 {
		t.Fatalf("tokens %v (want %v), draft model forwards %d, drafters %d, by drafter %v; want the plugin alone",
			got.Tokens, plain.Tokens, dm.calls, pol.seen[0].Drafters, got.Spec.ByDrafter)
	}
	// the drafter's calls are timed apart, as a part of the draft phase
	if ms := got.Spec.Ms; !(ms.Drafters > 0 && ms.Drafters <= ms.Draft) {
		t.Fatalf("drafter calls %v ms, draft phase %v ms: want 0 < calls ≤ phase", ms.Drafters, ms.Draft)
	}
}

// deadDrafter fails and then reports, as the plugin hosts do, that its instance is
// discarded (Err).
type deadDrafter struct {
	calls int
	err   error
}

func (d *deadDrafter) Draft(context.Context, *sdk.DraftRequest) (sdk.DraftResult, error) {
	d.calls++
	d.err = errors.New("wasm: trap")
	return sdk.DraftResult{}, d.err
}

func (d *deadDrafter) Err() error { return d.err }

// TestDrafterDiscarded: a drafter whose host discarded the failed instance is off at
// its first failure, not called again; the output is plain decoding's.
func TestDrafterDiscarded(t *testing.T) {
	const v, np = 30, 12
	prompt := []int32{1, 2, 3}
	plain := generate(t, &fakeLM{v: v, n: 64}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: np})
	d := &deadDrafter{}
	got := generate(t, &fakeLM{v: v, n: 64}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: np, Policy: FixedDepth(3),
		Drafters: []Drafter{{Name: "trap", Drafter: d}}})
	if st := got.Spec.ByDrafter["trap"]; !slices.Equal(got.Tokens, plain.Tokens) || d.calls != 1 || st.Failed != 1 || !st.Off {
		t.Fatalf("tokens %v (want %v), %d calls, stats %+v: want one failed call, then off", got.Tokens, plain.Tokens, d.calls, st)
	}
}
