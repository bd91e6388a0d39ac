package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/sdk"
)

// gen is the state of one request.
type gen struct {
	s       *Session
	req     Request
	res     *Result
	emit    emitter
	j       judge
	start   time.Time
	firstAt time.Time
	// firstRound is the number of tokens the first emitting round produced: they all
	// arrive at the time to first token, so generation speed counts only the rest.
	firstRound int
	endAt      time.Time
	produced   int // tokens chosen so far (including an ending EOG)
	last       sdk.RoundOutcome
	drafts     []int32
	conf       []float32
	in         []int32
	pick       []int32 // the verify rows' picked columns: the drafts, then none
	// names are the request's drafters in index order (the draft model first when the
	// session has one); fed[i] is how many tokens of the sequence drafter plugin i was
	// told (req.Drafters[i]); dq is the request reused for its calls.
	names []string
	fed   []int
	dq    sdk.DraftRequest
	// off[i]: drafter plugin i failed, and is off for the rest of the request.
	off []bool
	// held[i] is drafter plugin i's offer for this round when holds[i] (offers.go);
	// offered is the policy request's Offered.
	held    []sdk.DraftResult
	holds   []bool
	offered []int
	// expect is the tokens the request told batch depth "auto" it expects (its prompt
	// load, autoDepth.requested), 0 when it told it nothing; loadID is the number it got
	expect, loadID int
}

// run prefills the prompt, then runs rounds until a stop rule fires.
func (g *gen) run(ctx context.Context) error {
	s := g.s
	g.names = s.drafterNames(&g.req)
	g.fed = make([]int, len(g.req.Drafters))
	g.off = make([]bool, len(g.req.Drafters))
	g.held, g.holds = make([]sdk.DraftResult, len(g.req.Drafters)), make([]bool, len(g.req.Drafters))
	g.last = sdk.RoundOutcome{Round: -1, Drafters: g.drafters()}
	g.j = judge{sampler: g.req.Sampler, penalty: g.req.Penalty, needs: g.req.Sampler.Needs(), vocab: s.target.vocab()}
	primed := g.primeDrafters(ctx)
	// At batch depth 0 (Batching.BatchDepth) the draft model is not prefilled — at 16-32
	// sequences on the H200 that was 10% of the run, for drafts never made; a round that
	// drafts later (alone) catches the draft cache up first.
	kept, err := s.prefill(ctx, g.req.Prompt, g.req.Policy != nil && !g.req.NoDraftModel && s.batchDepth() != 0)
	g.res.CachedTokens = kept
	if perr := g.primed(ctx, primed); err == nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("engine: prefill: %w", err)
	}
	g.requested(kept)
	if g.req.NPredict == 0 {
		// Nothing to generate; still score the last prompt position when asked.
		g.emit.reason = StopLength
		if g.req.TopLogits > 0 {
			rows, err := s.target.forward(s.hist[len(s.hist)-1:], false)
			if err != nil {
				return err
			}
			g.res.TopLogits = topLogits(rows, g.req.TopLogits)
			return s.target.truncate(len(s.hist) - 1) // the cache holds all but the newest token
		}
		return nil
	}
	for round := 0; ; round++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		done, err := g.round(ctx, round)
		if err != nil || done {
			return err
		}
	}
}

// requested tells batch depth "auto" the prompt rows the draft model prefills for the
// request when it drafts — the prompt past the kept positions — and the tokens expected
// of it, where it may draft with the draft model.
func (g *gen) requested(kept int) {
	s := g.s
	a := s.auto()
	if a == nil || s.draft == nil || g.req.Policy == nil || g.req.NoDraftModel || !g.mayDraft() {
		return
	}
	g.expect = autoExpect
	if g.req.NPredict > 0 {
		g.expect = g.req.NPredict
	}
	g.loadID = a.requested(len(g.req.Prompt)-1-kept, g.expect)
}

// drafters is the number of drafters the request offers: the draft model, then the
// drafter plugins.
func (g *gen) drafters() int { return len(g.names) }

// maxDepth is the deepest round the engine can run now: the session's bound, the room
// left in the caches and the remaining token budget.
func (g *gen) maxDepth() int {
	s := g.s
	if g.drafters() == 0 {
		return 0
	}
	d := min(s.draftMax, s.target.ctx()-s.target.len()-1)
	if g.req.DraftMax != nil {
		d = min(d, *g.req.DraftMax)
	}
	if g.req.NPredict > 0 {
		d = min(d, g.req.NPredict-g.produced-1)
	}
	if s.maxBatchRows > 0 {
		d = min(d, s.maxBatchRows/s.generating()-1)
	}
	return max(d, 0)
}

// mayDraft reports whether a round of the request may draft at all, as far as the
// request and the session's bounds tell before the prompt is prefilled (maxDepth's
// bounds but the room left in the caches and the batch's rows).
func (g *gen) mayDraft() bool {
	d := g.s.draftMax
	if g.req.DraftMax != nil {
		d = min(d, *g.req.DraftMax)
	}
	if g.req.NPredict >= 0 {
		d = min(d, g.req.NPredict-1)
	}
	return d > 0
}

// round runs one speculative round (depth 0 = plain decoding) and reports whether the
// generation is over.
func (g *gen) round(ctx context.Context, round int) (bool, error) {
	s := g.s
	if s.target.len() >= s.target.ctx() {
		g.emit.reason = StopCtx
		return true, nil
	}
	// 1. policy
	maxD := g.maxDepth()
	var dec sdk.DepthDecision
	// The policy is asked also when no depth is possible (MaxDepth 0 near the end of the
	// budget): it then learns every round's outcome, and a trace records every round.
	if err := g.offer(ctx, maxD); err != nil {
		return true, err
	}
	if g.req.Policy != nil {
		g.last.MaxDepth = maxD
		t0 := time.Now()
		var err error
		dec, err = g.req.Policy.NextDepth(ctx, g.last)
		g.res.Spec.Ms.Plugins += ms(time.Since(t0))
		if err != nil {
			return true, fmt.Errorf("engine: depth policy: %w", err)
		}
	}
	d := min(max(dec.Depth, 0), maxD)
	k := dec.Drafter
	if f := s.batchDepth(); f >= 0 && g.req.Policy != nil && !g.req.NoDraftModel {
		// the batch's depth: the same for every sequence, so their draft steps run in
		// lockstep, with no cut-off; the policy's drafter where it drafted
		if dec.Depth <= 0 {
			k = 0
		}
		d, dec.MinConf, dec.KeepCut = min(f, maxD), 0, false
	}
	if d > 0 && (k < 0 || k >= g.drafters()) {
		return true, fmt.Errorf("engine: depth policy: drafter %d chosen, the request has %d (%v)", k, g.drafters(), g.names)
	}
	if d == 0 {
		k = 0
	}
	// room for the round's rows (a pooled session's caches grow here; see pool.go)
	if err := s.reserve(s.target.len() + d + 1); err != nil {
		return true, err
	}
	// 2. draft. With batching, the target's steps wait for this round's verify from
	// now, so that its rows join the others' step (see batcher.expect).
	if d > 0 {
		if sq, ok := s.target.(*seq); ok {
			sq.pledge()
			defer sq.unpledge() // (a no-op once the verify went)
		}
	}
	if sq, ok := s.draft.(*seq); ok {
		if d > 0 && k == 0 && !g.req.NoDraftModel {
			sq.owe() // its draft phase comes: the draft's steps wait a little for it
		} else {
			sq.settle() // (owed since its last round, which drafted)
		}
	}
	t0 := time.Now()
	used, err := g.draft(ctx, k, d, dec)
	if err != nil {
		return true, fmt.Errorf("engine: draft: %w", err)
	}
	t1 := time.Now()
	// 3, 4. verify: one target forward over the last token and the drafts; then the
	// penalty and the sampler
	base := s.target.len()
	// The next round likely drafts too (see seq.owe): counted before the verify, so that
	// the sessions whose verify forward returns together are all coming when the first
	// of them reaches the draft model; counted after it, the first one's draft step
	// often ran alone before the others had counted themselves (at depth 1, 4 sessions:
	// 1.9-1.95 sequences a draft forward on the H200 and a 2-core CPU; 3.55-3.72 with
	// the count before the verify).
	if sq, ok := s.draft.(*seq); ok {
		if d > 0 && used == 0 && s.draft.len() > 0 && !g.req.NoDraftModel {
			sq.owe()
		} else {
			sq.settle()
		}
	}
	r, t2, err := g.verify(ctx, round)
	if err != nil {
		return true, err
	}
	// 5. roll both caches back to the accepted tokens
	keep := base + 1 + r.Accepted
	if err := s.target.truncate(keep); err != nil {
		return true, err
	}
	if s.draft != nil {
		if err := s.draft.truncate(min(s.draft.len(), keep)); err != nil {
			return true, err
		}
	}
	g.res.Spec.Ms.Draft += ms(t1.Sub(t0))
	g.res.Spec.Ms.Verify += ms(t2.Sub(t1))
	seqs, rows := s.target.served()
	// The policy is told the drafter that drafted (the draft model when a failed
	// plugin's round fell back to it); a round that fell back to plain decoding keeps
	// the drafter it chose, with nothing drafted.
	told := k
	if used >= 0 {
		told = used
	}
	g.last = sdk.RoundOutcome{Round: round, Depth: d, Drafted: len(g.drafts), Accepted: r.Accepted,
		DraftConf: g.conf, DraftNs: t1.Sub(t0).Nanoseconds(), VerifyNs: t2.Sub(t1).Nanoseconds(),
		Drafter: told, Drafters: g.drafters(), BatchSeqs: seqs, BatchRows: rows}
	// 6. emit the accepted run one token at a time, exactly as plain decoding would
	toks := append(g.drafts[:r.Accepted:r.Accepted], r.Next)
	emitted, done, err := g.push(toks)
	if g.firstRound == 0 {
		g.firstRound = g.produced
	}
	name := ""
	if d > 0 && used >= 0 {
		name = g.names[used]
	}
	g.res.Spec.addRound(name, len(g.drafts), r.Accepted, emitted)
	if used == 0 && len(g.drafts) > 0 {
		s.auto().rounded(len(g.drafts), r.Accepted) // batch depth "auto"'s acceptance
	}
	return done, err
}

// verify runs the round's target forward over the last token and the drafts, returning
// the sampler's decision and the time the forward's results were on the host. When
// the sampler needs only candidates and normalisers (statsK), they are computed where
// the logits live and the rows never come to the host.
func (g *gen) verify(ctx context.Context, round int) (sdk.SampleResult, time.Time, error) {
	s := g.s
	g.in = append(append(g.in[:0], s.hist[len(s.hist)-1]), g.drafts...)
	var (
		r    sdk.SampleResult
		st   *model.RowStats
		rows []float32
		err  error
	)
	if k := g.statsK(round); k > 0 {
		g.pick = append(append(g.pick[:0], g.drafts...), -1)
		st, err = s.target.forwardStats(g.in, true, k, g.pick)
	} else {
		rows, err = s.target.forward(g.in, true)
	}
	if err != nil {
		return r, time.Time{}, fmt.Errorf("engine: verify: %w", err)
	}
	t2 := time.Now()
	if st != nil {
		r, err = g.j.runStats(ctx, st, g.drafts, g.req.Seed, uint64(g.produced))
	} else {
		if round == 0 && g.req.TopLogits > 0 {
			g.res.TopLogits = topLogits(rows[:s.target.vocab()], g.req.TopLogits)
		}
		r, err = g.j.run(ctx, rows, s.hist, g.drafts, g.req.Seed, uint64(g.produced))
	}
	g.res.Spec.Ms.Plugins += ms(time.Since(t2))
	return r, t2, err
}

// statsK is the candidate count when this round's verify rows can be judged from their
// statistics on the target's backend (see judge.statsK), or 0 for the full rows: also
// when the round must report the raw top logits.
func (g *gen) statsK(round int) int {
	if !g.s.target.hasStats() || (round == 0 && g.req.TopLogits > 0) {
		return 0
	}
	return g.j.statsK()
}

// push appends toks to the sequence through the stop rules. When a rule ends the
// generation inside toks, the tokens after it are dropped from the sequence and caches.
func (g *gen) push(toks []int32) (int, bool, error) {
	s := g.s
	for i, t := range toks {
		s.hist = append(s.hist, t)
		g.produced++
		if g.produced == 1 {
			g.firstAt = time.Now()
		}
		done, err := g.emit.push(t)
		if !done && err == nil && g.req.NPredict > 0 && g.produced >= g.req.NPredict {
			g.emit.reason, done = StopLength, true
		}
		if done || err != nil {
			n := len(s.hist) - 1 // the cache never holds the newest token
			if s.target.len() > n {
				if terr := s.target.truncate(n); terr != nil && err == nil {
					err = terr
				}
			}
			if s.draft != nil && s.draft.len() > n {
				if terr := s.draft.truncate(n); terr != nil && err == nil {
					err = terr
				}
			}
			return i + 1, true, err
		}
	}
	return len(toks), false, nil
}

// draft proposes up to d tokens with drafter k (see Request.Drafters) into g.drafts
// and g.conf, stopping early where a token's confidence falls below dec.MinConf:
// before that token, or after it when dec.KeepCut. It returns the drafter that drafted:
// k, or, when drafter plugin k failed or is off, the draft model (0) if the request
// has one, else -1 (the round has no draft tokens: plain decoding). A drafter plugin's
// failure is never the request's; only the request's own end (ctx) and the draft
// model's errors are.
//
// A failed call proposes nothing, and the drafter is off for the rest of the request
// at its first failure, whatever its host. The WebAssembly and process hosts discard
// a failed instance (every later call would fail), and an in-process drafter is held
// to the same rule: after an error or a hostile answer what it has taken in of the
// call's tokens is unknown, so its state may no longer follow the sequence, and
// calling it again would either repeat tokens it has or skip ones it lacks.
func (g *gen) draft(ctx context.Context, k, d int, dec sdk.DepthDecision) (int, error) {
	g.drafts, g.conf = g.drafts[:0], g.conf[:0]
	if d == 0 {
		return k, nil
	}
	model := g.s.draft != nil && !g.req.NoDraftModel
	i := k
	if model {
		if k == 0 {
			return 0, g.draftTokens(d, dec.MinConf, dec.KeepCut)
		}
		i--
	}
	if !g.off[i] {
		err := g.draftPlugin(ctx, i, d, dec.MinConf, dec.KeepCut)
		if err == nil {
			return k, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return k, cerr // the request is ending: not the drafter's failure
		}
		g.drafterFailed(i, err)
		g.drafts, g.conf = g.drafts[:0], g.conf[:0]
	}
	if model {
		return 0, g.draftTokens(d, dec.MinConf, dec.KeepCut)
	}
	return -1, nil
}

// drafterFailed counts the failed call of drafter plugin i, tells the request's
// OnDrafterFailure, and turns the drafter off for the rest of the request (see draft).
func (g *gen) drafterFailed(i int, err error) {
	name := g.req.Drafters[i].Name
	st := &g.res.Spec
	if st.ByDrafter == nil {
		st.ByDrafter = map[string]DrafterStats{}
	}
	b := st.ByDrafter[name]
	if b.Failed == 0 && g.req.OnDrafterFailure != nil {
		g.req.OnDrafterFailure(name, err)
	}
	b.Failed++
	b.Off = true
	g.off[i] = true
	st.ByDrafter[name] = b
}

// primeDrafters tells every drafter plugin of a request that may draft the prompt
// while the prompt is prefilled (in a goroutine: on a GPU the host only waits for the
// prefill), with a call that asks for one token and whose answer is not used. Taking
// in the prompt is the dearest call a drafter gets (some 0.5 ms for 136 tokens of the
// suffix drafter in WebAssembly, against 10-30 µs a round); made in the first round
// that drafts, it was charged to that round's draft time, which the depth policy
// prices a drafter's draft step by, as the draft model's prefill would be if it were
// not done here too (issue 22: on the H200 the suffix drafter at depth auto looked
// dearer than the target's forward after its first round and never drafted again).
// The wait for it, and its time, are the prompt phase's (Ms.DraftersPrompt). primed
// collects the answers.
func (g *gen) primeDrafters(ctx context.Context) <-chan primeResult {
	if g.req.Policy == nil || len(g.req.Drafters) == 0 || !g.mayDraft() {
		return nil
	}
	done := make(chan primeResult, 1)
	prompt, vocab := g.req.Prompt, g.s.target.vocab()
	go func() {
		errs := make([]error, len(g.req.Drafters))
		t0 := time.Now()
		for i, dr := range g.req.Drafters {
			q := sdk.DraftRequest{Appended: prompt, MaxDepth: 1, Vocab: vocab}
			res, err := dr.Draft(ctx, &q)
			if err == nil {
				err = sdk.CheckDraft(&q, res)
			}
			if err != nil {
				errs[i] = fmt.Errorf("drafter %q: %w", dr.Name, err)
			}
		}
		done <- primeResult{errs, ms(time.Since(t0))}
	}()
	return done
}

// primeResult is what primeDrafters' calls came to: an error per drafter plugin (nil:
// it took the prompt in) and the time they took, in ms.
type primeResult struct {
	errs []error
	ms   float64
}

// primed waits for primeDrafters' calls (nil: none were made) and turns off each
// drafter whose call failed, as a round's failure would; only the request's own end is
// an error.
func (g *gen) primed(ctx context.Context, done <-chan primeResult) error {
	if done == nil {
		return nil
	}
	r := <-done
	g.res.Spec.Ms.DraftersPrompt = r.ms
	for i, err := range r.errs {
		g.fed[i] = len(g.req.Prompt)
		if err == nil {
			continue
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		g.drafterFailed(i, err)
	}
	return nil
}

// draftPlugin drafts up to d tokens with drafter plugin i (req.Drafters[i]): the
// proposal it offered before the policy decided (offers.go), else a call asking for d.
func (g *gen) draftPlugin(ctx context.Context, i, d int, minConf float32, keepCut bool) error {
	res := g.held[i]
	if g.holds[i] {
		n := min(d, len(res.Tokens))
		res.Tokens, res.Conf = res.Tokens[:n], res.Conf[:n]
	} else {
		var err error
		if res, err = g.callPlugin(ctx, i, d); err != nil {
			return err
		}
	}
	for j, tok := range res.Tokens {
		if !g.keepDraft(tok, res.Conf[j], minConf, keepCut) {
			break
		}
	}
	return nil
}

// draftTokens proposes up to d tokens greedily with the draft model, first catching
// its cache up with the sequence. It stops early when the draft's top probability
// falls below minConf: before that token, or after it when keepCut. Where the draft
// runs alone on a backend that can (g.chain), its d steps run as one chain on the
// device and the cut is applied after (draftChain); else each step's token comes to
// the host before the next step starts.
func (g *gen) draftTokens(d int, minConf float32, keepCut bool) error {
	s := g.s
	if sq, ok := s.draft.(*seq); ok {
		sq.startDraft()
		defer sq.endDraft()
	}
	pending := s.hist[s.draft.len():]
	for _, id := range pending {
		if int(id) >= s.draft.vocab() {
			// a target token the (smaller) draft vocabulary lacks: the draft cannot
			// follow the sequence any more, so rounds fall back to depth 0
			return nil
		}
	}
	if sq, ok := g.chain(minConf); ok {
		return g.draftChain(sq, pending, d, minConf, keepCut)
	}
	tok, p, err := g.draftNext(pending)
	for i := range d {
		if err != nil {
			return err
		}
		if !g.keepDraft(tok, p, minConf, keepCut) || i == d-1 {
			break
		}
		tok, p, err = g.draftNext(g.drafts[i : i+1])
	}
	return nil
}

// draftNext runs ids through the draft model and returns the greedy next token and
// its probability: from the last row's statistics (the best candidate and the
// log-sum-exp) where the draft's backend computes them, else from the row.
func (g *gen) draftNext(ids []int32) (int32, float32, error) {
	s := g.s
	ids, err := s.feedWarmed(context.Background(), s.draft, ids)
	if err != nil {
		return 0, 0, err
	}
	batch := s.batch
	if s.draft.hasStats() {
		st, err := feedStats(context.Background(), s.draft, ids, batch, 1)
		if err != nil {
			return 0, 0, err
		}
		return st.IDs[0], prob(st.Vals[0], st.LSE[0]), nil
	}
	logits, err := feedLast(context.Background(), s.draft, ids, batch)
	if err != nil {
		return 0, 0, err
	}
	tok, p := argmaxProb(logits)
	return tok, p, nil
}

// finish computes the result's text and timings.
func (g *gen) finish() {
	// A policy that wants the outcome of the last round (the engine reports a round
	// only before the next one) implements Finish — the --trace recorder does.
	if f, ok := g.req.Policy.(interface{ Finish(sdk.RoundOutcome) }); ok && g.last.Round >= 0 {
		f.Finish(g.last)
	}
	if err := g.emit.finish(); err != nil && g.emit.reason == "" {
		g.emit.reason = StopLength
	}
	g.endAt = time.Now()
	if g.expect > 0 {
		g.s.auto().finished(g.loadID, g.expect, g.produced)
	}
	r := g.res
	r.Tokens = g.emit.tokens
	r.Text = g.emit.text.String()
	r.Stop = g.emit.reason
	if g.produced == 0 {
		r.Timings.PromptMs = ms(g.endAt.Sub(g.start))
	} else {
		r.Timings.PromptMs = ms(g.firstAt.Sub(g.start))
		r.Timings.GenMs = ms(g.endAt.Sub(g.firstAt))
		r.Timings.TTFTMs = r.Timings.PromptMs
		// Tokens after the first round over the time after it (a speculative first
		// round emits several tokens at once; counting them would inflate the rate).
		if n := g.produced - max(g.firstRound, 1); n > 0 && r.Timings.GenMs > 0 {
			r.Timings.GenTPS = float64(n) / r.Timings.GenMs * 1000
		}
	}
	if r.Timings.PromptMs > 0 {
		r.Timings.PromptTPS = float64(r.PromptTokens) / r.Timings.PromptMs * 1000
	}
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
