package replay

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/minfer/minfer/sdk"
)

// Walk runs a depth policy over the token positions of each prompt of a trace, the way
// the engine would, and estimates what it would have achieved. It needs traces whose
// rounds carry their prompt (sdk.TraceRound.Prompt: specbench and run record it) and
// greedy decoding, under which every sequence of one prompt emits the same tokens
// whatever its depths. specbench traces are the natural input: every depth runs every
// prompt, so the positions one depth leaves unobserved another observes.
//
// Where Replay takes each recorded round as the start of a counterfactual round (so it
// samples only the positions where the recording's rounds began: after a rejection, for a
// deep recording), Walk knows, per position, whether the draft's token agrees with the
// target's and the draft's confidence there, pooled from every round that drafted the
// position on the right prefix (up to and including its first rejection), and advances
// position by position as the policy's rounds accept tokens. Its costs: a draft phase of
// s draft steps after p tokens to catch up costs a·s + b·p (least squares over the
// trace's drafting rounds), a verify of nt rows the trace's mean for nt (interpolated
// where never recorded), and the rest of a round (plugin calls, emitting the tokens)
// the trace's mean HostNs, the same for every round and policy (0 for traces without
// it). Positions no round observed (the bonus token of fully accepted rounds that no
// other depth drafted) accept with the trace's acceptance rate, seeded by opt.Seed, and
// count as Unobserved; their confidence is taken as 1. A round's depth is bounded by the
// largest MaxDepth the prompt's rounds recorded and the tokens left.
//
// newPolicy is called once per prompt (opt.Session: once), in the order the prompts
// first appear.
func Walk(ctx context.Context, rounds []sdk.TraceRound, newPolicy func() (sdk.DepthPolicy, error), opt ReplayOptions) (WalkResult, error) {
	for i := range rounds {
		if rounds[i].Drafters > 1 {
			// a position knows what the drafter that drafted it proposed, not the others
			return WalkResult{}, fmt.Errorf("walk: round %d of sequence %d offered %d drafters; a walk follows one drafter's proposals (replay the trace without --walk)",
				rounds[i].Round, rounds[i].Seq, rounds[i].Drafters)
		}
	}
	prompts, err := walkPrompts(rounds)
	if err != nil {
		return WalkResult{}, err
	}
	wk := walker{costs: newCostModel(rounds), g: rand.New(rand.NewPCG(opt.Seed, 0x3a1c))}
	wk.a, wk.b = fitDraft(rounds, wk.costs.medianStep)
	var p sdk.DepthPolicy
	defer func() { release(p) }()
	for _, w := range prompts {
		if p == nil || !opt.Session {
			release(p)
			if p, err = newPolicy(); err != nil {
				return wk.res, err
			}
		}
		if err := wk.prompt(ctx, p, w); err != nil {
			return wk.res, err
		}
	}
	return wk.res, nil
}

// walker holds a walk's cost model and running sums.
type walker struct {
	costs *costModel
	a, b  float64 // draft phase ns = a·steps + b·tokens caught up (fitDraft)
	g     *rand.Rand
	res   WalkResult
}

// prompt walks policy p over the positions of one prompt.
func (wk *walker) prompt(ctx context.Context, p sdk.DepthPolicy, w *walkPrompt) error {
	last := sdk.RoundOutcome{Round: -1, MaxDepth: min(w.maxDepth, max(w.n-1, 0))}
	pos, pending := 0, 1
	for r := 0; pos < w.n; r++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		dec, err := p.NextDepth(ctx, last)
		if err != nil {
			return fmt.Errorf("walk: prompt %s round %d: %w", w.key, r, err)
		}
		d := min(max(dec.Depth, 0), max(min(w.maxDepth, w.n-pos-1), 0))
		drafted, steps, conf := w.draft(pos, d, dec)
		acc := 0
		for acc < drafted {
			at := w.at(pos + acc)
			ok := at.agree == 1
			if at.agree < 0 {
				wk.res.Unobserved++
				ok = wk.g.Float64() < wk.costs.acceptRate
			}
			if !ok {
				break
			}
			acc++
		}
		draftNs := 0.0
		if steps > 0 {
			draftNs = math.Max(wk.a*float64(steps)+wk.b*float64(pending), 1)
		}
		pending = caughtUp(pending, steps, drafted, acc)
		verifyNs := wk.costs.verify(drafted + 1)
		t := &wk.res.Walked
		t.Tokens += float64(acc + 1)
		t.Ns += draftNs + verifyNs + wk.costs.host
		t.DepthSum += float64(d)
		t.NumRounds++
		pos += acc + 1
		last = sdk.RoundOutcome{Round: r, Depth: d, Drafted: drafted, Accepted: acc, DraftConf: conf,
			DraftNs: int64(draftNs), VerifyNs: int64(verifyNs), MaxDepth: min(w.maxDepth, max(w.n-pos-1, 0))}
	}
	wk.res.Prompts++
	wk.res.Positions += w.n
	wk.res.Observed += w.observed()
	return nil
}

// WalkResult sums a walk.
type WalkResult struct {
	Prompts, Positions int
	Observed           int // positions some recorded round observed
	Walked             Throughput
	// Unobserved counts draft tokens at positions no recorded round observed (their
	// acceptance was drawn from the trace's rate).
	Unobserved int
}

// walkPos is what the trace says about one token position of a prompt.
type walkPos struct {
	agree int8    // 1 the draft's token agrees with the target's, 0 not, -1 unobserved
	conf  float32 // the draft's confidence there (1 when unobserved)
}

type walkPrompt struct {
	key      string
	n        int // tokens the prompt's sequences emitted (the longest)
	maxDepth int
	pos      []walkPos
}

// draft is a round of depth d from position pos under dec's early exit: the tokens
// drafted (kept), the draft steps run and the confidences of the drafted tokens.
func (w *walkPrompt) draft(pos, d int, dec sdk.DepthDecision) (drafted, steps int, conf []float32) {
	for k := range d {
		steps++
		c := w.at(pos + k).conf
		if dec.MinConf > 0 && c < dec.MinConf {
			if dec.KeepCut {
				drafted, conf = k+1, append(conf, c)
			}
			break
		}
		drafted, conf = k+1, append(conf, c)
	}
	return drafted, steps, conf
}

func (w *walkPrompt) at(i int) walkPos {
	if i < len(w.pos) {
		return w.pos[i]
	}
	return walkPos{agree: -1, conf: 1}
}

// walkPrompts pools the rounds of each prompt into per-position agreement and
// confidence, checking that the prompt's sequences agree with each other.
func walkPrompts(rounds []sdk.TraceRound) ([]*walkPrompt, error) {
	byKey := map[string]*walkPrompt{}
	var order []*walkPrompt
	type seqState struct {
		w   *walkPrompt
		pos int
	}
	seqs := map[int]*seqState{}
	for i := range rounds {
		r := &rounds[i]
		if r.Prompt == "" {
			return nil, fmt.Errorf("walk: round %d of sequence %d has no prompt key (traces recorded before the key existed): use replay without --walk", r.Round, r.Seq)
		}
		s := seqs[r.Seq]
		if s == nil {
			w := byKey[r.Prompt]
			if w == nil {
				w = &walkPrompt{key: r.Prompt}
				byKey[r.Prompt] = w
				order = append(order, w)
			}
			s = &seqState{w: w}
			seqs[r.Seq] = s
		}
		w := s.w
		w.maxDepth = max(w.maxDepth, r.MaxDepth, r.Drafted)
		for len(w.pos) < s.pos+r.Drafted+1 {
			w.pos = append(w.pos, walkPos{agree: -1, conf: 1})
		}
		for k := 0; k < r.Drafted && k <= r.Accepted; k++ {
			agree := int8(0)
			if k < r.Accepted {
				agree = 1
			}
			at := &w.pos[s.pos+k]
			if at.agree >= 0 && at.agree != agree {
				return nil, fmt.Errorf("walk: prompt %s position %d: sequence %d says the draft %s, another sequence the opposite (not greedy decoding?)",
					r.Prompt, s.pos+k, r.Seq, map[int8]string{1: "agrees", 0: "disagrees"}[agree])
			}
			at.agree = agree
			if k < len(r.Conf) {
				at.conf = r.Conf[k]
			}
		}
		s.pos += r.Accepted + 1
		w.n = max(w.n, s.pos)
	}
	return order, nil
}

// caughtUp is how many tokens the draft must catch up with at the next round's first
// step, given this round's (as core/engine rolls the draft's cache back): a round whose
// draft ran (steps > 0) has fed the draft every drafted token but the last one, so the
// next round feeds the bonus token, and also the last draft token when every drafted
// token was accepted and no step ran past it (a token dropped under the cut-off was
// drafted after the last one was fed); a plain round adds its one token to what was
// pending.
func caughtUp(pending, steps, drafted, accepted int) int {
	if steps == 0 {
		return pending + 1
	}
	if accepted == drafted && steps == drafted {
		return 2
	}
	return 1
}

// fitDraft fits a draft phase's time as a·steps + b·(tokens caught up first) over the
// drafting rounds after each sequence's first (whose catch-up is the prompt); it falls
// back to step·steps when the fit is degenerate.
func fitDraft(rounds []sdk.TraceRound, step float64) (a, b float64) {
	var sxx, sxy, syy, sxt, syt float64
	pending := map[int]float64{}
	for i := range rounds {
		r := &rounds[i]
		p, seen := pending[r.Seq]
		if !seen {
			p = 1
		}
		if n := float64(draftSteps(r)); n > 0 && r.DraftNs > 0 && seen {
			t := float64(r.DraftNs)
			sxx += n * n
			sxy += n * p
			syy += p * p
			sxt += n * t
			syt += p * t
		}
		pending[r.Seq] = float64(caughtUp(int(p), draftSteps(r), r.Drafted, r.Accepted))
	}
	det := sxx*syy - sxy*sxy
	if det <= 1e-9*sxx*syy || sxx == 0 {
		return step, 0
	}
	a, b = (sxt*syy-syt*sxy)/det, (syt*sxx-sxt*sxy)/det
	if a <= 0 || b < 0 {
		return step, 0
	}
	return a, b
}

// observed counts the positions some recorded round observed.
func (w *walkPrompt) observed() int {
	n := 0
	for _, p := range w.pos[:min(len(w.pos), w.n)] {
		if p.agree >= 0 {
			n++
		}
	}
	return n
}
