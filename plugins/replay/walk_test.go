package replay

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/minfer/minfer/plugins/builtin"
	"github.com/minfer/minfer/sdk"
)

// walkBed is one prompt's truth: whether the draft agrees with the target at each
// token position, and its confidence there; and the costs of the decoder that ran it.
type walkBed struct {
	agree []bool
	conf  []float32
}

const (
	walkStep    = 50_000 // ns per draft step
	walkCatchUp = 7_000  // ns per token caught up before the first step
	walkHost    = 20_000 // ns of each round outside the draft and the verify
)

func walkVerify(nt int) int64 { return 200_000 + 30_000*int64(nt-1) + 5_000*int64(nt*nt) }

// record decodes the bed with a static depth the way the engine does and returns the
// trace a specbench --trace would write for it.
func (b walkBed) record(seq, depth int, prompt string) []sdk.TraceRound {
	var out []sdk.TraceRound
	n := len(b.agree)
	pos, pending := 0, 1
	for r := 0; pos < n; r++ {
		maxD := min(7, n-pos-1)
		d := min(depth, maxD)
		acc := 0
		for acc < d && b.agree[pos+acc] {
			acc++
		}
		accept := make([]bool, d)
		for i := range acc {
			accept[i] = true
		}
		draft := int64(0)
		if d > 0 {
			draft = walkStep*int64(d) + walkCatchUp*int64(pending)
			// the engine fed the draft all but its last token; when every one was
			// accepted, that token is caught up with the bonus one
			pending = 1
			if acc == d {
				pending = 2
			}
		} else {
			pending++
		}
		out = append(out, sdk.TraceRound{Seq: seq, Prompt: prompt, Round: r, Policy: "static", Depth: depth, MaxDepth: 7,
			Drafted: d, Accepted: acc, Accept: accept, Conf: append([]float32(nil), b.conf[pos:pos+d]...),
			DraftNs: draft, VerifyNs: walkVerify(d + 1), HostNs: walkHost})
		pos += acc + 1
	}
	return out
}

func (b walkBed) rate(rs []sdk.TraceRound) float64 {
	var t Throughput
	for i := range rs {
		t.AddRecorded(&rs[i])
	}
	return t.Rate()
}

func newWalkBed(n int, seed uint64) walkBed {
	b := walkBed{agree: make([]bool, n), conf: make([]float32, n)}
	x := seed
	for i := range n {
		x = x*6364136223846793005 + 1442695040888963407
		u := float64(x>>11) / (1 << 53)
		b.agree[i] = u < 0.7
		b.conf[i] = float32(0.2 + 0.7*u)
	}
	return b
}

// TestWalkReproducesStaticDepths: from a trace of depths 1, 2 and 4 over two prompts,
// walking a static policy of each recorded depth gives that depth's recorded tokens and
// time exactly (the costs are the decoder's, so the fit is exact; each round's host time
// is the bed's one value). So does depth 3,
// recorded nowhere: every position it drafts was drafted by some recorded round, and
// its 4-row verify ran where a depth-4 round was clamped near a prompt's end. At depth 6
// the time is within 5%: 6- and 7-row verifies never ran and are extrapolated linearly
// from the recorded ones, where the bed's cost grows with nt².
func TestWalkReproducesStaticDepths(t *testing.T) {
	beds := []walkBed{newWalkBed(60, 1), newWalkBed(45, 2)}
	var trace []sdk.TraceRound
	seq := 0
	for _, d := range []int{1, 2, 4} {
		for i, b := range beds {
			trace = append(trace, b.record(seq, d, []string{"p0", "p1"}[i])...)
			seq++
		}
	}
	for _, d := range []int{1, 2, 3, 4, 6} {
		var want []sdk.TraceRound
		for i, b := range beds {
			want = append(want, b.record(100+i, d, "x")...)
		}
		res, err := Walk(context.Background(), trace, func() (sdk.DepthPolicy, error) {
			return builtin.NewStatic([]byte(`{"depth":` + string(rune('0'+d)) + `}`))
		}, ReplayOptions{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		var wantTok float64
		for _, r := range want {
			wantTok += float64(r.Accepted + 1)
		}
		got, w := res.Walked.Rate(), walkBed{}.rate(want)
		tol := 1e-6
		if d == 6 {
			tol = 0.05
		}
		if res.Walked.Tokens != wantTok || math.Abs(got/w-1) > tol || res.Prompts != 2 || res.Positions != 105 {
			t.Errorf("depth %d: walked %v tokens at %.3f t/s over %d prompts, %d positions; want %v at %.3f, 2, 105",
				d, res.Walked.Tokens, got, res.Prompts, res.Positions, wantTok, w)
		}
		if res.Unobserved != 0 {
			t.Errorf("depth %d: %d unobserved drafts, want 0 (the trace drafted every position it needs)", d, res.Unobserved)
		}
	}
}

// TestWalkEarlyExit: a policy's cut-off stops at the recorded confidence of the
// position, so a fixed min_conf walks as the confidences say.
func TestWalkEarlyExit(t *testing.T) {
	b := newWalkBed(80, 3)
	var trace []sdk.TraceRound
	for d := 1; d <= 7; d++ { // every position observed
		trace = append(trace, b.record(d, d, "p")...)
	}
	res, err := Walk(context.Background(), trace, func() (sdk.DepthPolicy, error) {
		return builtin.NewStatic([]byte(`{"depth":7,"min_conf":0.6,"keep_cut":true}`))
	}, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// the expected walk: rounds end at the first position whose confidence is under
	// 0.6 (kept), at the first rejection, or at depth 7
	var tok, ns float64
	pos, pending, rounds := 0, 1, 0
	for pos < len(b.agree) {
		d := min(7, len(b.agree)-pos-1)
		drafted := 0
		for drafted < d {
			drafted++
			if b.conf[pos+drafted-1] < 0.6 {
				break
			}
		}
		acc := 0
		for acc < drafted && b.agree[pos+acc] {
			acc++
		}
		if drafted > 0 {
			ns += float64(walkStep*int64(drafted) + walkCatchUp*int64(pending))
			pending = 1 // the cut token is kept, so no step ran past the last draft
			if acc == drafted {
				pending = 2
			}
		} else {
			pending++
		}
		ns += float64(walkVerify(drafted+1) + walkHost)
		tok += float64(acc + 1)
		pos += acc + 1
		rounds++
	}
	// (the last position is always the bonus token: never drafted, never observed)
	if res.Unobserved != 0 || res.Observed != len(b.agree)-1 {
		t.Fatalf("%d unobserved drafts, %d of %d positions observed: the bed is not covered", res.Unobserved, res.Observed, len(b.agree))
	}
	if res.Walked.Tokens != tok || math.Abs(res.Walked.Ns/ns-1) > 1e-6 || res.Walked.NumRounds != rounds {
		t.Errorf("walked %v tokens in %v ns over %d rounds, want %v in %v over %d", res.Walked.Tokens, res.Walked.Ns,
			res.Walked.NumRounds, tok, ns, rounds)
	}
}

func TestWalkErrors(t *testing.T) {
	b := newWalkBed(20, 4)
	noKey := b.record(0, 2, "")
	if _, err := Walk(context.Background(), noKey, nil, ReplayOptions{}); err == nil || !strings.Contains(err.Error(), "no prompt key") {
		t.Errorf("trace without prompt keys: got %v", err)
	}
	other := newWalkBed(20, 5) // a different draft behaviour under the same prompt key
	mixed := append(b.record(0, 3, "p"), other.record(1, 3, "p")...)
	if _, err := Walk(context.Background(), mixed, nil, ReplayOptions{}); err == nil || !strings.Contains(err.Error(), "not greedy decoding") {
		t.Errorf("contradicting sequences: got %v", err)
	}
}
