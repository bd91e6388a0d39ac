package plugins

import (
	"bytes"
	"context"
	"testing"

	"github.com/minfer/minfer/plugins/builtin"
	"github.com/minfer/minfer/sdk"
)

// TestTracerRoundTrip records a sequence through a wrapped policy and replays it: the
// same policy reproduces the recorded throughput exactly.
func TestTracerRoundTrip(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	tr := NewTracer(&buf)
	for seq := 0; seq < 2; seq++ {
		inner, _ := builtin.NewAdaptive([]byte(`{"draft_max":6}`))
		p := tr.Wrap(inner, "adaptive")
		last := sdk.RoundOutcome{Round: -1, MaxDepth: 6}
		for r := 0; r < 50; r++ {
			d, err := p.NextDepth(ctx, last)
			if err != nil {
				t.Fatal(err)
			}
			acc := min(d.Depth, (r*7+seq)%5)
			last = sdk.RoundOutcome{Round: r, Depth: d.Depth, Drafted: d.Depth, Accepted: acc,
				DraftConf: make([]float32, d.Depth), DraftNs: int64(d.Depth) * 1000, VerifyNs: 10000 + int64(d.Depth)*100, MaxDepth: 6}
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
	res, err := Replay(ctx, rounds, func() (sdk.DepthPolicy, error) { return builtin.NewAdaptive([]byte(`{"draft_max":6}`)) }, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Replayed.Rate() != res.Recorded.Rate() || res.Extrapolated != 0 {
		t.Fatalf("replaying the recorded policy: %.3f tok/s, recorded %.3f (%d extrapolated)", res.Replayed.Rate(), res.Recorded.Rate(), res.Extrapolated)
	}
}
