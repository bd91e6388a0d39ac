package engine

import (
	"errors"
	"slices"
	"testing"

	"github.com/minfer/minfer/internal/enginetest"
	"github.com/minfer/minfer/sdk"
)

// generateOffering is generate on a session that shows the policy the drafters' offers.
func generateOffering(t *testing.T, target, draft *fakeLM, req Request) *Result {
	t.Helper()
	s := newFakeSession(target, draft, fakeVocab{}, 16)
	s.offers = true
	return generateOn(t, s, req)
}

// TestDrafterOffers: with offers on and several drafters, every drafter plugin is asked
// before each policy call and the policy is told how many tokens each proposes (−1 for
// the draft model, never asked, and for a drafter that failed); the round given to a
// plugin drafts the proposal it offered, cut to the decided depth, with no second call;
// the output is plain decoding's. With one drafter, or offers off, nothing is offered.
func TestDrafterOffers(t *testing.T) {
	const v, np = 61, 40
	prompt := []int32{4, 8, 15, 16, 23, 42}
	plain := generate(t, &fakeLM{v: v, n: 256}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: np})
	t.Run("model and two plugins", func(t *testing.T) {
		copier := &seenDrafter{propose: oracle(prompt, plain.Tokens)}
		empty := &seenDrafter{propose: func([]int32, *sdk.DraftRequest) (sdk.DraftResult, error) { return sdk.DraftResult{}, nil }}
		pol := &recOutcomes{dec: sdk.DepthDecision{Depth: 3, Drafter: 1}}
		got := generateOffering(t, &fakeLM{v: v, n: 256}, &fakeLM{v: v, n: 256, noise: 1, salt: 7}, Request{Prompt: prompt, NPredict: np,
			Policy: pol, Drafters: []Drafter{{Name: "copier", Drafter: copier}, {Name: "empty", Drafter: empty}}})
		if !slices.Equal(got.Tokens, plain.Tokens) {
			t.Fatalf("got %v, want %v", got.Tokens, plain.Tokens)
		}
		rounds := len(pol.seen)
		for i, o := range pol.seen {
			if i == rounds-1 && o.MaxDepth == 0 {
				if o.Offered != nil {
					t.Fatalf("round %d at max depth 0: offered %v, want none", o.Round, o.Offered)
				}
				continue
			}
			// the copier proposes the continuation, up to the round's max depth
			if len(o.Offered) != 3 || o.Offered[0] != -1 || o.Offered[1] != o.MaxDepth || o.Offered[2] != 0 {
				t.Fatalf("round %d (max depth %d): offered %v, want [-1 %d 0]", o.Round, o.MaxDepth, o.Offered, o.MaxDepth)
			}
		}
		// one call a round each (the one that told the prompt aside), however the round went
		if calls := copier.calls - 1; calls < rounds-1 || calls > rounds {
			t.Fatalf("copier called %d times in %d rounds, want one call a round", calls, rounds)
		}
		if empty.calls != copier.calls {
			t.Fatalf("empty drafter called %d times, the copier %d", empty.calls, copier.calls)
		}
		checkAcceptedFully(t, got, "copier")
		checkTold(t, copier.seq, prompt, got.Tokens)
		checkTold(t, empty.seq, prompt, got.Tokens)
	})
	t.Run("a failing drafter", func(t *testing.T) {
		calls := 0
		bad := &seenDrafter{propose: func(_ []int32, q *sdk.DraftRequest) (sdk.DraftResult, error) {
			if calls++; calls == 3 { // the prompt's call, one offer, then it fails
				return sdk.DraftResult{}, errors.New("boom")
			}
			return sdk.DraftResult{Tokens: []int32{1}, Conf: []float32{1}}, nil
		}}
		copier := &seenDrafter{propose: oracle(prompt, plain.Tokens)}
		pol := &recOutcomes{dec: sdk.DepthDecision{Depth: 2, Drafter: 0}}
		var failed []string
		got := generateOffering(t, &fakeLM{v: v, n: 256}, nil, Request{Prompt: prompt, NPredict: np, Policy: pol,
			Drafters:         []Drafter{{Name: "copier", Drafter: copier}, {Name: "bad", Drafter: bad}},
			OnDrafterFailure: func(name string, err error) { failed = append(failed, name) }})
		if !slices.Equal(got.Tokens, plain.Tokens) {
			t.Fatalf("got %v, want %v", got.Tokens, plain.Tokens)
		}
		if !slices.Equal(failed, []string{"bad"}) || calls != 3 {
			t.Fatalf("failures %v after %d calls, want bad's once after 3", failed, calls)
		}
		if o := pol.seen[0]; !slices.Equal(o.Offered[1:], []int{1}) {
			t.Fatalf("round 0's offers %v, want bad's 1 token", o.Offered)
		}
		if o := pol.seen[1]; o.Offered[1] != -1 {
			t.Fatalf("offers after the failure %v, want -1 for bad", o.Offered)
		}
	})
	t.Run("none", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			draft   *fakeLM
			offers  bool
			plugins int
		}{{"one plugin", nil, true, 1}, {"off", &fakeLM{v: v, n: 256}, false, 1}} {
			var ds []Drafter
			for range tc.plugins {
				ds = append(ds, Drafter{Name: "copier", Drafter: &seenDrafter{propose: oracle(prompt, plain.Tokens)}})
			}
			pol := &recOutcomes{dec: sdk.DepthDecision{Depth: 2}}
			s := newFakeSession(&fakeLM{v: v, n: 256}, tc.draft, fakeVocab{}, 16)
			s.offers = tc.offers
			if _, err := s.Generate(bg, Request{Prompt: prompt, NPredict: np, Sampler: enginetest.Greedy{}, Policy: pol, Drafters: ds}); err != nil {
				t.Fatal(err)
			}
			for _, o := range pol.seen {
				if o.Offered != nil {
					t.Fatalf("%s: round %d offered %v, want none", tc.name, o.Round, o.Offered)
				}
			}
		}
	})
}

// checkAcceptedFully: drafter name's rounds were all accepted in full (an oracle's).
func checkAcceptedFully(t *testing.T, got *Result, name string) {
	t.Helper()
	st := got.Spec.ByDrafter[name]
	if st.Rounds == 0 || st.Accepted != st.Drafted {
		t.Fatalf("%s: %+v, want rounds whose every draft is accepted", name, st)
	}
}

// TestDrafterOffersGreedyIdentity: with offers on, rounds given in turn to the draft
// model and to random and adversarial drafter plugins (each drafting the proposal it
// offered, cut to a depth that cycles) keep plain decoding's output.
func TestDrafterOffersGreedyIdentity(t *testing.T) {
	const v, np = 61, 50
	prompt := []int32{4, 8, 15, 16, 23, 42}
	plain := generate(t, &fakeLM{v: v, n: 1024}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: np})
	for seed := range uint64(3) {
		ds := []Drafter{
			{Name: "random", Drafter: &seenDrafter{propose: randomDraft(seed)}},
			{Name: "adversary", Drafter: &seenDrafter{propose: adversary(prompt, plain.Tokens, seed)}},
			{Name: "oracle", Drafter: &seenDrafter{propose: oracle(prompt, plain.Tokens)}},
		}
		got := generateOffering(t, &fakeLM{v: v, n: 1024}, &fakeLM{v: v, n: 1024, noise: 1, salt: 7},
			Request{Prompt: prompt, NPredict: np, Policy: &drafterCycle{i: int(seed)}, Drafters: ds})
		if !slices.Equal(got.Tokens, plain.Tokens) {
			t.Fatalf("seed %d: got %v, want %v", seed, got.Tokens, plain.Tokens)
		}
		for _, d := range ds {
			checkTold(t, d.Drafter.(*seenDrafter).seq, prompt, got.Tokens)
		}
	}
}
