package replay

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/minfer/minfer/plugins/builtin"
	"github.com/minfer/minfer/sdk"
)

func static(d int) func() (sdk.DepthPolicy, error) {
	return func() (sdk.DepthPolicy, error) { return builtin.NewStatic([]byte(fmt.Sprintf(`{"depth":%d}`, d))) }
}

// TestReplayModel checks the counterfactual model on a hand-made trace: depth 4 rounds,
// accepting 4 (all) or 1, draft 1000 ns per token, verify 10000 ns for 5 rows and 8000
// for 2 rows.
func TestReplayModel(t *testing.T) {
	var rounds []sdk.TraceRound
	for r := 0; r < 10; r++ {
		acc := 4
		if r%2 == 1 {
			acc = 1
		}
		rounds = append(rounds, sdk.TraceRound{Round: r, Depth: 4, MaxDepth: 8, Drafted: 4, Accepted: acc,
			Conf: []float32{0.9, 0.8, 0.1, 0.7}, DraftNs: 4000, VerifyNs: 10000})
	}
	rounds[3].Depth, rounds[3].Drafted, rounds[3].Accepted, rounds[3].DraftNs, rounds[3].VerifyNs = 1, 1, 1, 1000, 8000
	ctx := context.Background()
	for _, tc := range []struct {
		name           string
		policy         func() (sdk.DepthPolicy, error)
		minTok, maxTok float64 // round 3 (fully accepted at depth 1) is extrapolated when deeper
		ns             float64
		extrapolated   int
	}{
		// depth 1: every round accepts its one token; verify of 2 rows is 8000 ns
		{"static 1", static(1), 20, 20, 10 * (1000 + 8000), 0},
		// depth 4 as recorded: 5 rounds of 5 tokens, 4 of 2, round 3 accepts 1 + up to 3 drawn
		{"static 4", static(4), 25 + 8 + 2, 25 + 8 + 5, 10 * 14000, 1},
		// min_conf 0.5 stops drafting at position 3 (conf 0.1): 2 drafted after 3 draft
		// steps, verify of 3 rows interpolated between 2 (8000) and 5 (10000) rows
		{"static 4 early exit", func() (sdk.DepthPolicy, error) { return builtin.NewStatic([]byte(`{"depth":4,"min_conf":0.5}`)) },
			5*3 + 4*2 + 2, 5*3 + 4*2 + 3, 10 * (3000 + 8000 + 2000.0/3), 1},
		// keep_cut keeps position 3's token: 3 drafted for the same 3 draft steps, verify
		// of 4 rows interpolated; rounds accepting 4 now yield 4 tokens, those accepting 1
		// still 2, round 3 yields 2 to 4 (positions 2-3 drawn)
		{"static 4 early exit keep cut", func() (sdk.DepthPolicy, error) {
			return builtin.NewStatic([]byte(`{"depth":4,"min_conf":0.5,"keep_cut":true}`))
		}, 5*4 + 4*2 + 2, 5*4 + 4*2 + 4, 10 * (3000 + 8000 + 2*2000.0/3), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Replay(ctx, rounds, tc.policy, 1)
			if err != nil {
				t.Fatal(err)
			}
			if tok := res.Replayed.Tokens; tok < tc.minTok || tok > tc.maxTok || math.Abs(res.Replayed.Ns-tc.ns) > 1 {
				t.Fatalf("got %v tokens in %v ns, want [%v, %v] in %v", tok, res.Replayed.Ns, tc.minTok, tc.maxTok, tc.ns)
			}
			if res.Extrapolated != tc.extrapolated {
				t.Fatalf("extrapolated rounds: got %d, want %d", res.Extrapolated, tc.extrapolated)
			}
			if res.Recorded.Tokens != 5*5+4*2+2 {
				t.Fatalf("recorded tokens: got %v, want 35", res.Recorded.Tokens)
			}
		})
	}
	// The rest of each round (HostNs) is charged as recorded, to the recording and to
	// every replayed round alike.
	hosted := append([]sdk.TraceRound(nil), rounds...)
	for i := range hosted {
		hosted[i].HostNs = 3000
	}
	res, err := Replay(ctx, hosted, static(1), 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed.Ns != 10*(1000+8000+3000) || res.Recorded.Ns != 9*14000+9000+10*3000 {
		t.Fatalf("with host time: replayed %v ns, recorded %v; want %v and %v", res.Replayed.Ns, res.Recorded.Ns,
			10*(1000+8000+3000), 9*14000+9000+10*3000)
	}
	if _, err := Replay(ctx, nil, static(1), 1); err == nil {
		t.Fatal("empty trace: got nil error")
	}
}

// countingPolicy counts the requests (Round -1 calls) one instance serves.
type countingPolicy struct{ starts *[]int }

func (c countingPolicy) NextDepth(_ context.Context, o sdk.RoundOutcome) (sdk.DepthDecision, error) {
	if o.Round < 0 {
		(*c.starts)[len(*c.starts)-1]++
	}
	return sdk.DepthDecision{Depth: 1}, nil
}

// TestReplaySession: by default each sequence gets its own instance; Session replays
// every sequence with one, each still starting with Round -1.
func TestReplaySession(t *testing.T) {
	var rounds []sdk.TraceRound
	for seq := range 3 {
		for r := range 4 {
			rounds = append(rounds, sdk.TraceRound{Seq: seq, Round: r, Depth: 1, MaxDepth: 4, Drafted: 1, Accepted: 1, DraftNs: 100, VerifyNs: 1000})
		}
	}
	for _, tc := range []struct {
		session bool
		want    []int // requests served per instance
	}{{false, []int{1, 1, 1}}, {true, []int{3}}} {
		var starts []int
		newPolicy := func() (sdk.DepthPolicy, error) {
			starts = append(starts, 0)
			return countingPolicy{&starts}, nil
		}
		if _, err := ReplayWith(context.Background(), rounds, newPolicy, ReplayOptions{Seed: 1, Session: tc.session}); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(starts) != fmt.Sprint(tc.want) {
			t.Errorf("session %v: requests per instance %v, want %v", tc.session, starts, tc.want)
		}
	}
}

// pick always gives the round to one drafter at one depth.
type pick struct{ depth, drafter int }

func (p pick) NextDepth(context.Context, sdk.RoundOutcome) (sdk.DepthDecision, error) {
	return sdk.DepthDecision{Depth: p.depth, Drafter: p.drafter}, nil
}

// TestReplayDrafters: a trace of two drafters replays each round the policy gives the
// recorded drafter as recorded, and the others from that drafter's own recorded rounds
// (extrapolated); a policy naming a drafter the trace did not offer is an error, and a
// walk refuses such a trace.
func TestReplayDrafters(t *testing.T) {
	var rounds []sdk.TraceRound
	for r := range 40 {
		t := sdk.TraceRound{Round: r, Depth: 4, MaxDepth: 8, Drafted: 4, Accepted: 2, Conf: []float32{0.8, 0.8, 0.8, 0.8},
			DraftNs: 400000, VerifyNs: 1000000, Drafters: 2, DrafterIndex: 0, Drafter: "model"}
		if r%2 == 1 { // the copier: all accepted, nearly free
			t.Accepted, t.DraftNs, t.DrafterIndex, t.Drafter, t.Conf = 4, 4000, 1, "ngram", []float32{1, 1, 1, 1}
		}
		rounds = append(rounds, t)
	}
	ctx := context.Background()
	as := func(p pick) func() (sdk.DepthPolicy, error) { return func() (sdk.DepthPolicy, error) { return p, nil } }
	model, err := Replay(ctx, rounds, as(pick{4, 0}), 1)
	if err != nil {
		t.Fatal(err)
	}
	copier, err := Replay(ctx, rounds, as(pick{4, 1}), 1)
	if err != nil {
		t.Fatal(err)
	}
	if model.Extrapolated != 20 || copier.Extrapolated != 20 {
		t.Fatalf("extrapolated %d and %d rounds, want the 20 of the other drafter each", model.Extrapolated, copier.Extrapolated)
	}
	// the copier's rounds accept all 4 (its rate, 1, extrapolates exactly) and cost 1 µs
	// a token; the model's recorded rounds accept 2 at 100 µs, its extrapolated ones
	// draw with its rate of 2 in 3
	if want := 40 * 5.0; copier.Replayed.Tokens != want {
		t.Fatalf("copier: %v tokens, want %v", copier.Replayed.Tokens, want)
	}
	if got := model.Replayed.Tokens; got < 20*3+20 || got > 20*3+20*4 || got == 40*5 {
		t.Fatalf("model: %v tokens, want 60 recorded and 20-80 extrapolated", got)
	}
	if !(copier.Replayed.Rate() > model.Replayed.Rate() && copier.Replayed.Rate() > copier.Recorded.Rate()) {
		t.Fatalf("rates: copier %.0f, model %.0f, recorded %.0f tok/s", copier.Replayed.Rate(), model.Replayed.Rate(), copier.Recorded.Rate())
	}
	if _, err := Replay(ctx, rounds, as(pick{4, 2}), 1); err == nil {
		t.Fatal("drafter 2 of 2: got no error")
	}
	if _, err := Walk(ctx, rounds, as(pick{4, 0}), ReplayOptions{}); err == nil {
		t.Fatal("walk of a two-drafter trace: got no error")
	}
}
