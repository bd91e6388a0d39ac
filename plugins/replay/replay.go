// Package replay replays recorded speculative-decoding traces (sdk.TraceRound, written
// by plugins.Tracer) through a depth policy: counterfactual throughput from a cost model
// of the trace (Replay) and a walk along each prompt's recorded draft (Walk). It backs
// `minfer policy replay`.
package replay

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/minfer/minfer/sdk"
)

// ReplayResult compares a policy's counterfactual run over a trace with the recorded one.
type ReplayResult struct {
	Rounds   int
	Recorded Throughput
	Replayed Throughput
	// Extrapolated counts rounds where the policy drafted deeper than a fully accepted
	// recorded round, so acceptance beyond it was drawn from the trace's rate.
	Extrapolated int
}

// Throughput sums a run: tokens emitted and time spent.
type Throughput struct {
	Tokens    float64
	Ns        float64
	DepthSum  float64 // Σ depth, for the mean depth
	NumRounds int
}

// AddRecorded counts a recorded round: its tokens (the accepted drafts and the next
// token) and its wall time (draft, verify and the rest of the round).
func (t *Throughput) AddRecorded(r *sdk.TraceRound) {
	t.Tokens += float64(r.Accepted + 1)
	t.Ns += float64(r.DraftNs + r.VerifyNs + r.HostNs)
	t.DepthSum += float64(r.Depth)
	t.NumRounds++
}

// Rate is tokens per second.
func (t Throughput) Rate() float64 {
	if t.Ns <= 0 {
		return 0
	}
	return t.Tokens / t.Ns * 1e9
}

// MeanDepth is the mean depth per round.
func (t Throughput) MeanDepth() float64 {
	if t.NumRounds == 0 {
		return 0
	}
	return t.DepthSum / float64(t.NumRounds)
}

// Replay runs a depth policy against recorded rounds and estimates what it would have
// achieved. newPolicy is called once per sequence of the trace (rounds with the same
// Seq, in order).
//
// The counterfactual model, per round with recorded drafted n and accepted a:
//   - a depth d ≤ n, or any d when a < n (a rejection was observed at a+1), accepts
//     min(d, a) tokens: this is known from the trace;
//   - beyond a fully accepted round (d > n = a) each further position is accepted with
//     the trace's overall conditional acceptance rate, drawn from a generator seeded by
//     seed;
//   - a round whose drafter ran out of tokens (ranOut: a drafter plugin with nothing
//     more to copy) drafts at most what it had;
//   - an early-exit cut-off (MinConf) stops drafting at the first recorded confidence
//     below it, after that position with KeepCut and before it (its draft step still
//     paid) without; positions beyond n have no recorded confidence and are not cut;
//   - draft time is the round's measured time per draft token (the trace median when
//     the round drafted nothing) times the tokens drafted; verify time is the recorded
//     one when nt matches, else the trace's mean for that nt, interpolated linearly
//     (and extrapolated from the two nearest) for nt never recorded;
//   - the rest of the round (its plugin calls, emitting the tokens: HostNs) costs what
//     the recorded round's did (nothing in traces without it);
//   - where the sequence offered several drafters (Drafters > 1) and the policy gives
//     the round to another drafter than the recorded one, nothing is known of that
//     position: the other drafter proposes token after token with the chance its own
//     recorded rounds went on (had a token where more were asked for), each accepted
//     with its own recorded conditional acceptance rate, at its own cost per token (a
//     drafter never recorded proposes nothing); such rounds count as Extrapolated.
func Replay(ctx context.Context, rounds []sdk.TraceRound, newPolicy func() (sdk.DepthPolicy, error), seed uint64) (ReplayResult, error) {
	return ReplayWith(ctx, rounds, newPolicy, ReplayOptions{Seed: seed})
}

// ReplayOptions tune ReplayWith.
type ReplayOptions struct {
	Seed uint64 // for acceptance beyond the recorded rounds
	// Session replays every sequence with one policy instance, as a host that kept its
	// policy across a session's requests would (each sequence still starts with Round
	// -1); by default each sequence gets a new instance, as every minfer request has.
	Session bool
}

// ReplayWith is Replay with options.
func ReplayWith(ctx context.Context, rounds []sdk.TraceRound, newPolicy func() (sdk.DepthPolicy, error), opt ReplayOptions) (ReplayResult, error) {
	seed := opt.Seed
	var res ReplayResult
	if len(rounds) == 0 {
		return res, fmt.Errorf("replay: empty trace")
	}
	m := newCostModel(rounds)
	dm := newDrafterModels(rounds)
	g := rand.New(rand.NewPCG(seed, 0x5eed))
	var p sdk.DepthPolicy
	var last sdk.RoundOutcome
	seq := math.MinInt
	for i := range rounds {
		r := &rounds[i]
		if err := ctx.Err(); err != nil {
			return res, err
		}
		res.Rounds++
		res.Recorded.AddRecorded(r)
		if r.Seq != seq {
			if p == nil || !opt.Session {
				release(p)
				var err error
				if p, err = newPolicy(); err != nil {
					return res, err
				}
			}
			seq = r.Seq
			last = sdk.RoundOutcome{Round: -1, MaxDepth: r.MaxDepth, Drafters: r.Drafters}
		}
		last.Offered = r.Offered // what the drafters offered when this round was decided
		dec, err := p.NextDepth(ctx, last)
		if err != nil {
			return res, fmt.Errorf("replay: round %d of sequence %d: %w", r.Round, r.Seq, err)
		}
		d := min(max(dec.Depth, 0), max(r.MaxDepth, 0))
		k := 0
		if d > 0 && r.Drafters > 1 {
			if k = dec.Drafter; k < 0 || k >= r.Drafters {
				return res, fmt.Errorf("replay: round %d of sequence %d: the policy chose drafter %d of %d", r.Round, r.Seq, k, r.Drafters)
			}
			if k != r.DrafterIndex {
				res.Extrapolated++
				last = dm.other(k, d, r, m, g, &res)
				last.Drafters = r.Drafters
				continue
			}
		}
		drafted, steps := d, d // draft tokens kept, draft steps run
		if n := ranOut(r); n >= 0 && n < d {
			drafted, steps = n, n // the drafter had no more to propose
		}
		if dec.MinConf > 0 {
			cut := false
			for k := 0; k < drafted && k < len(r.Conf); k++ {
				if r.Conf[k] < dec.MinConf {
					drafted, steps, cut = k, k+1, true
					if dec.KeepCut {
						drafted = k + 1
					}
					break
				}
			}
			// a recorded cut-off that dropped its token says that token's confidence was
			// under the recorded cut-off: so under one at least as high
			if !cut && !dec.KeepCut && droppedCut(r) && dec.MinConf >= r.MinConf && drafted > r.Drafted {
				drafted, steps = r.Drafted, r.Drafted+1
			}
		}
		acc := min(drafted, r.Accepted)
		if drafted > r.Drafted && r.Accepted == r.Drafted {
			res.Extrapolated++
			for acc < drafted && g.Float64() < m.acceptRate {
				acc++
			}
		}
		draftNs := float64(steps) * m.step(r)
		verifyNs := float64(r.VerifyNs)
		if drafted != r.Drafted {
			verifyNs = m.verify(drafted + 1)
		}
		res.Replayed.Tokens += float64(acc + 1)
		res.Replayed.Ns += draftNs + verifyNs + float64(r.HostNs)
		res.Replayed.DepthSum += float64(d)
		res.Replayed.NumRounds++
		conf := r.Conf
		if drafted < len(conf) {
			conf = conf[:drafted]
		}
		last = sdk.RoundOutcome{Round: r.Round, Depth: d, Drafted: drafted, Accepted: acc, DraftConf: conf,
			DraftNs: int64(draftNs), VerifyNs: int64(verifyNs), MaxDepth: r.MaxDepth, Drafter: k, Drafters: r.Drafters}
	}
	release(p)
	return res, nil
}

// costModel holds what the whole trace says about acceptance and costs.
type costModel struct {
	acceptRate float64
	medianStep float64
	nts        []int     // recorded nt, ascending
	verifyMean []float64 // mean verify ns per nts entry
	host       float64   // mean HostNs of the rounds that recorded it (0: none did)
}

func newCostModel(rounds []sdk.TraceRound) *costModel {
	m := &costModel{}
	var succ, trials float64
	var steps, host []float64
	byNT := map[int][]float64{}
	for i := range rounds {
		r := &rounds[i]
		succ += float64(r.Accepted)
		trials += float64(r.Accepted)
		if r.Accepted < r.Drafted {
			trials++
		}
		if n := draftSteps(r); n > 0 && r.DraftNs > 0 {
			steps = append(steps, float64(r.DraftNs)/float64(n))
		}
		byNT[r.Drafted+1] = append(byNT[r.Drafted+1], float64(r.VerifyNs))
		if r.HostNs > 0 {
			host = append(host, float64(r.HostNs))
		}
	}
	// Means, not medians: a recording's rate is its total time over its tokens, so on a
	// noisy machine (slow rounds now and then) medians put every estimate under it.
	m.host = mean(host)
	m.acceptRate = 0
	if trials > 0 {
		m.acceptRate = succ / trials
	}
	m.medianStep = median(steps)
	for nt := range byNT {
		m.nts = append(m.nts, nt)
	}
	sort.Ints(m.nts)
	for _, nt := range m.nts {
		m.verifyMean = append(m.verifyMean, mean(byNT[nt]))
	}
	return m
}

func (m *costModel) step(r *sdk.TraceRound) float64 {
	if n := draftSteps(r); n > 0 && r.DraftNs > 0 {
		return float64(r.DraftNs) / float64(n)
	}
	return m.medianStep
}

// draftSteps is the number of draft steps a recorded round ran: one more than it
// drafted when the cut-off dropped a token.
func draftSteps(r *sdk.TraceRound) int {
	if r.MinConf > 0 && !r.KeepCut && r.Drafted < min(r.Depth, r.MaxDepth) {
		return r.Drafted + 1
	}
	return r.Drafted
}

// verify estimates the verify time for nt rows.
func (m *costModel) verify(nt int) float64 {
	i := sort.SearchInts(m.nts, nt)
	switch {
	case i < len(m.nts) && m.nts[i] == nt:
		return m.verifyMean[i]
	case len(m.nts) == 1:
		return m.verifyMean[0]
	case i == 0:
		i = 1
	case i == len(m.nts):
		i = len(m.nts) - 1
	}
	x0, x1 := float64(m.nts[i-1]), float64(m.nts[i])
	y0, y1 := m.verifyMean[i-1], m.verifyMean[i]
	v := y0 + (y1-y0)*(float64(nt)-x0)/(x1-x0)
	return math.Max(v, math.Min(y0, y1)*0.5) // a descending extrapolation must stay sane
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	t := 0.0
	for _, x := range v {
		t += x
	}
	return t / float64(len(v))
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// release closes p if it is an io.Closer (every policy plugins.Registry hands out is).
func release(p sdk.DepthPolicy) {
	if c, ok := p.(io.Closer); ok {
		c.Close()
	}
}

// droppedCut reports whether a recorded round may have ended at a cut-off that dropped
// its token (it drafted fewer than its depth under a cut-off without keep_cut).
func droppedCut(r *sdk.TraceRound) bool {
	return r.MinConf > 0 && !r.KeepCut && r.Drafted < min(r.Depth, r.MaxDepth)
}

// ranOut returns the tokens a recorded round's drafter had when it ran out of them (a
// drafter plugin with nothing more to copy): the round ended short of its depth with
// no cut-off to explain it (none set, or a kept last token not under it); else -1. A
// cut-off that drops its token leaves it open, and counts as the cut-off.
func ranOut(r *sdk.TraceRound) int {
	if r.Drafted >= min(r.Depth, r.MaxDepth) {
		return -1
	}
	if r.MinConf == 0 || r.KeepCut && (r.Drafted == 0 || r.Drafted <= len(r.Conf) && r.Conf[r.Drafted-1] >= r.MinConf) {
		return r.Drafted
	}
	return -1
}

// drafterModel is what a trace says of one drafter: the chance that it had another
// token where more were asked for, the conditional acceptance of its tokens, its cost
// per token and its mean confidence.
type drafterModel struct {
	goOn, accept, step float64
	conf               float32
}

type drafterModels []drafterModel

func newDrafterModels(rounds []sdk.TraceRound) drafterModels {
	type sums struct{ had, asked, succ, trials, conf, n float64 }
	var s []sums
	var steps [][]float64
	for i := range rounds {
		r := &rounds[i]
		if r.Drafters <= 1 || r.Depth == 0 {
			continue
		}
		for len(s) < r.Drafters {
			s, steps = append(s, sums{}), append(steps, nil)
		}
		x := &s[r.DrafterIndex]
		// positions 1..drafted had a token; drafted+1 had none when the round ended
		// short of its depth without a cut-off (the cut-off's rounds say nothing there)
		x.had += float64(r.Drafted)
		x.asked += float64(r.Drafted)
		if r.Drafted < min(r.Depth, r.MaxDepth) && r.MinConf == 0 {
			x.asked++
		}
		x.succ += float64(r.Accepted)
		x.trials += float64(r.Accepted)
		if r.Accepted < r.Drafted {
			x.trials++
		}
		for _, c := range r.Conf {
			x.conf += float64(c)
			x.n++
		}
		if n := draftSteps(r); n > 0 && r.DraftNs > 0 {
			steps[r.DrafterIndex] = append(steps[r.DrafterIndex], float64(r.DraftNs)/float64(n))
		}
	}
	out := make(drafterModels, len(s))
	for j, x := range s {
		if x.asked > 0 {
			out[j].goOn = x.had / x.asked
		}
		if x.trials > 0 {
			out[j].accept = x.succ / x.trials
		}
		if x.n > 0 {
			out[j].conf = float32(x.conf / x.n)
		}
		out[j].step = median(steps[j])
	}
	return out
}

// other replays round r as given to drafter k (not the recorded one) at depth d.
func (dm drafterModels) other(k, d int, r *sdk.TraceRound, m *costModel, g *rand.Rand, res *ReplayResult) sdk.RoundOutcome {
	var x drafterModel
	if k < len(dm) {
		x = dm[k]
	}
	drafted, acc := 0, 0
	for drafted < d && g.Float64() < x.goOn {
		drafted++
	}
	for acc < drafted && g.Float64() < x.accept {
		acc++
	}
	conf := make([]float32, drafted)
	for i := range conf {
		conf[i] = x.conf
	}
	draftNs := float64(drafted) * x.step
	verifyNs := m.verify(drafted + 1)
	res.Replayed.Tokens += float64(acc + 1)
	res.Replayed.Ns += draftNs + verifyNs + float64(r.HostNs)
	res.Replayed.DepthSum += float64(d)
	res.Replayed.NumRounds++
	return sdk.RoundOutcome{Round: r.Round, Depth: d, Drafted: drafted, Accepted: acc, DraftConf: conf,
		DraftNs: int64(draftNs), VerifyNs: int64(verifyNs), MaxDepth: r.MaxDepth, Drafter: k}
}
