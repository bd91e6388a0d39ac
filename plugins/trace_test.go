package plugins_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/minfer/minfer/plugins"
	"github.com/minfer/minfer/plugins/builtin"
	"github.com/minfer/minfer/plugins/replay"
	"github.com/minfer/minfer/sdk"
)

// TestTracerRoundTrip records a sequence through a wrapped policy and replays it: the
// same policy reproduces the recorded throughput exactly.
func TestTracerRoundTrip(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	tr := plugins.NewTracer(&buf)
	for seq := 0; seq < 2; seq++ {
		inner, _ := builtin.NewAdaptive([]byte(`{"draft_max":6}`))
		p := tr.Wrap(inner, "adaptive")
		last := sdk.RoundOutcome{Round: -1, MaxDepth: 6}
		for r := 0; r < 50; r++ {
			d, err := p.NextDepth(ctx, last)
			if err != nil {
				t.Fatal(err)
			}
			// an engine honouring the early-exit cut-off: confidences 0.95, 0.85, ...
			// so the policy's cut-off stops some rounds early
			drafted, steps := d.Depth, d.Depth
			conf := make([]float32, 0, d.Depth)
			for k := range d.Depth {
				c := 0.95 - 0.1*float32((k+r)%8)
				if c < d.MinConf {
					drafted, steps = k, k+1
					if d.KeepCut {
						drafted, conf = k+1, append(conf, c)
					}
					break
				}
				conf = append(conf, c)
			}
			acc := min(drafted, (r*7+seq)%5)
			last = sdk.RoundOutcome{Round: r, Depth: d.Depth, Drafted: drafted, Accepted: acc,
				DraftConf: conf, DraftNs: int64(steps) * 1000, VerifyNs: 10000 + int64(drafted)*100, MaxDepth: 6}
		}
		p.Finish(last)
		p.Close()
	}
	if tr.Err() != nil {
		t.Fatal(tr.Err())
	}
	rounds, err := sdk.ReadTrace(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(rounds) != 100 || rounds[99].Seq != 1 || rounds[99].Round != 49 {
		t.Fatalf("got %d rounds (last %+v), want 100 ending with sequence 1 round 49", len(rounds), rounds[len(rounds)-1])
	}
	res, err := replay.Replay(ctx, rounds, func() (sdk.DepthPolicy, error) { return builtin.NewAdaptive([]byte(`{"draft_max":6}`)) }, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed.Rate() != res.Recorded.Rate() || res.Extrapolated != 0 {
		t.Fatalf("replaying the recorded policy: %.3f tok/s, recorded %.3f (%d extrapolated)", res.Replayed.Rate(), res.Recorded.Rate(), res.Extrapolated)
	}
}

// TestTracerHostTime: a round's host_ns is its wall time, from asking the policy to the
// next NextDepth (or Finish), less the draft and verify phases the engine reported.
func TestTracerHostTime(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	tr := plugins.NewTracer(&buf)
	inner, _ := builtin.NewStatic([]byte(`{"depth":2}`))
	p := tr.Wrap(inner, "static")
	if _, err := p.NextDepth(ctx, sdk.RoundOutcome{Round: -1, MaxDepth: 4}); err != nil {
		t.Fatal(err)
	}
	const gap, draft, verify = 4 * time.Millisecond, 500 * time.Microsecond, 700 * time.Microsecond
	time.Sleep(gap)
	o := sdk.RoundOutcome{Round: 0, Depth: 2, Drafted: 2, Accepted: 1, DraftConf: []float32{0.9, 0.4},
		DraftNs: int64(draft), VerifyNs: int64(verify), MaxDepth: 4}
	if _, err := p.NextDepth(ctx, o); err != nil {
		t.Fatal(err)
	}
	o.Round = 1
	p.Finish(o) // at once: the round's wall time is less than its phases, so host_ns is 0
	rounds, err := sdk.ReadTrace(&buf)
	if err != nil || len(rounds) != 2 {
		t.Fatalf("%v, %d rounds", err, len(rounds))
	}
	if h, min := time.Duration(rounds[0].HostNs), gap-draft-verify; h < min || h > time.Minute { // the bound above: a stalled, loaded machine, not a wrong sum
		t.Errorf("round 0: host_ns %v, want at least %v", h, min)
	}
	if rounds[1].HostNs != 0 {
		t.Errorf("round 1: host_ns %v, want 0 (clamped)", rounds[1].HostNs)
	}
}

// TestTracerDrafters: a sequence offering two drafters is recorded with each round's
// drafter (index and name); replaying the recorded policy makes the same choices
// between them and reproduces the recorded throughput exactly.
func TestTracerDrafters(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	tr := plugins.NewTracer(&buf)
	inner, _ := builtin.NewAdaptive([]byte(`{"draft_max":6}`))
	p := tr.Wrap(inner, "adaptive")
	p.SetDrafters([]string{"model", "ngram"})
	last := sdk.RoundOutcome{Round: -1, MaxDepth: 6, Drafters: 2}
	for r := range 80 {
		d, err := p.NextDepth(ctx, last)
		if err != nil {
			t.Fatal(err)
		}
		k := d.Drafter
		drafted, acc, ns := d.Depth, min(d.Depth, r%3), int64(d.Depth)*50000 // the model: slow, agrees a little
		if k == 1 && d.Depth > 0 {                                           // ngram: copies in the first half only
			drafted, ns = 0, 2000
			if r < 40 {
				drafted = d.Depth
			}
			acc = drafted
		}
		conf := make([]float32, drafted)
		for i := range conf {
			conf[i] = 0.9
		}
		last = sdk.RoundOutcome{Round: r, Depth: d.Depth, Drafted: drafted, Accepted: acc, DraftConf: conf,
			DraftNs: ns, VerifyNs: 100000 + int64(drafted)*20000, MaxDepth: 6, Drafter: k, Drafters: 2}
	}
	p.Finish(last)
	rounds, err := sdk.ReadTrace(&buf)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]int{}
	for _, r := range rounds {
		if r.Drafters != 2 || r.Depth > 0 && r.Drafter != []string{"model", "ngram"}[r.DrafterIndex] {
			t.Fatalf("round %+v: want 2 drafters and the drafter named by its index", r)
		}
		names[r.Drafter]++
	}
	if names["model"] == 0 || names["ngram"] == 0 {
		t.Fatalf("rounds by drafter %v: want both", names)
	}
	res, err := replay.Replay(ctx, rounds, func() (sdk.DepthPolicy, error) { return builtin.NewAdaptive([]byte(`{"draft_max":6}`)) }, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed.Rate() != res.Recorded.Rate() || res.Extrapolated != 0 {
		t.Fatalf("replaying the recorded policy: %.3f tok/s, recorded %.3f (%d extrapolated)", res.Replayed.Rate(), res.Recorded.Rate(), res.Extrapolated)
	}
}

// TestTraceRecordsTheRoundsOwnBound: a round's max_depth is the bound its policy
// request carried, not the next round's (which the engine reports with its outcome):
// replay caps the round's depth by it.
func TestTraceRecordsTheRoundsOwnBound(t *testing.T) {
	var buf bytes.Buffer
	tp := plugins.NewTracer(&buf).Wrap(constPolicy(4), "p")
	ctx := context.Background()
	for _, o := range []sdk.RoundOutcome{
		{Round: -1, MaxDepth: 4},
		{Round: 0, Depth: 4, Drafted: 4, Accepted: 4, DraftConf: make([]float32, 4), VerifyNs: 1, MaxDepth: 2}, // 2 tokens left
	} {
		if _, err := tp.NextDepth(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	tp.Finish(sdk.RoundOutcome{Round: 1, Depth: 4, Drafted: 2, Accepted: 2, DraftConf: make([]float32, 2), VerifyNs: 1, MaxDepth: 0})
	rounds, err := sdk.ReadTrace(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(rounds) != 2 || rounds[0].MaxDepth != 4 || rounds[1].MaxDepth != 2 {
		t.Fatalf("got %+v, want max_depth 4 then 2 (each round's own bound)", rounds)
	}
}

type constPolicy int

func (p constPolicy) NextDepth(context.Context, sdk.RoundOutcome) (sdk.DepthDecision, error) {
	return sdk.DepthDecision{Depth: int(p)}, nil
}

// TestTracerOffers: a round decided with the drafters' offers records them, and replay
// gives them back to the policy, so replaying the recorded policy reproduces its run.
func TestTracerOffers(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	p := plugins.NewTracer(&buf).Wrap(must(builtin.NewAdaptive([]byte(`{"draft_max":6}`))), "adaptive")
	p.SetDrafters([]string{"model", "ngram"})
	offer := func(r int) []int { // ngram copies in the first half only
		if r < 40 {
			return []int{-1, 6}
		}
		return []int{-1, 0}
	}
	last := sdk.RoundOutcome{Round: -1, MaxDepth: 6, Drafters: 2, Offered: offer(0)}
	for r := range 80 {
		d, err := p.NextDepth(ctx, last)
		if err != nil {
			t.Fatal(err)
		}
		k := d.Drafter
		drafted, acc, ns := d.Depth, min(d.Depth, r%3), int64(d.Depth)*50000
		if k == 1 && d.Depth > 0 {
			drafted, ns = min(d.Depth, offer(r)[1]), 2000
			acc = drafted
		}
		conf := make([]float32, drafted) // (1: no cut-off stops a draft, as none does here)
		for i := range conf {
			conf[i] = 1
		}
		last = sdk.RoundOutcome{Round: r, Depth: d.Depth, Drafted: drafted, Accepted: acc, DraftConf: conf,
			DraftNs: ns, VerifyNs: 100000 + int64(drafted)*20000, MaxDepth: 6, Drafter: k, Drafters: 2, Offered: offer(r + 1)}
	}
	p.Finish(last)
	rounds, err := sdk.ReadTrace(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rounds {
		if want := offer(r.Round); !slices.Equal(r.Offered, want) {
			t.Fatalf("round %d: offered %v, want %v", r.Round, r.Offered, want)
		}
	}
	res, err := replay.Replay(ctx, rounds, func() (sdk.DepthPolicy, error) { return builtin.NewAdaptive([]byte(`{"draft_max":6}`)) }, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed.Rate() != res.Recorded.Rate() || res.Extrapolated != 0 {
		t.Fatalf("replaying the recorded policy: %.3f tok/s, recorded %.3f (%d extrapolated)", res.Replayed.Rate(), res.Recorded.Rate(), res.Extrapolated)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
