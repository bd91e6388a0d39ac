package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
)

// Batch depth "auto": the depth of a batch's rounds chosen by the batch's size from what
// the two models' batched forwards cost, measured once before serving (Calibrate).
//
// A plain step of n sequences costs C(n×1), the target's forward of a row a sequence. A
// round at batch depth d costs the verify, C(n×(d+1)), and d draft forwards of the n
// sequences in lockstep: the first catches each draft cache up by 1 + a^d rows on
// average (the bonus token, and the last draft token where all d were accepted), D(n×(1
// + a^d)), the others D(n×1). It emits E_d = 1 + a + … + a^d tokens a sequence, a the
// chance that the draft's next token is accepted. So depth d serves
//
//	n·E_d / (C(n×(d+1)) + D(n×(1+a^d)) + (d−1)·D(n×1))
//
// tokens a second against n / C(n×1) for plain decoding, less what drafting adds to
// every token: the draft model must prefill each request's prompt as well, ρ prompt rows
// a generated token at P seconds a row beside a step, so each token costs ρ·P more at d
// > 0 (the model of the H200's
// serving runs in docs/PERFORMANCE.md, 2026-12-03, which it reproduced within 0.04 from
// the costs measured while serving). Without the prompts' term it expected 1.11 of plain
// at 4 sequences where depth 1 served 1.035: the loadgen's prompts are 1.17 rows a
// generated token, and the 0.5B draft's share of them was 0.14 s of the run's 2.48. The costs come from Calibrate's forwards, a of the
// rounds the target's sequences ran with the draft model. A depth d > 0 is played only
// where the model expects autoMargin more than plain decoding of it: Calibrate's
// forwards cost less than a served step (0.3-0.75 ms more a forward on the H200 at 4
// sequences: the prompts' chunks and the rows' hand-over to the sessions), so the model
// expected 1.16, 1.15 and 0.92 of plain at 4, 8 and 16 sequences where the serving run
// measured 1.05, 1.00 and 0.85 for static depth 1.
//
// Unlike branch gov's epoch bandit it explores nothing while serving: every switch of
// depth there cost the draft caches a catch-up and the exploring epochs their worse
// depths (0.80-0.89 of plain at 4-32 clients, H200).
type autoDepth struct {
	target, draft costCurve

	mu sync.Mutex
	// accepted and judged: the rounds whose first draft token was accepted, and every
	// round, both decaying by autoDecay a round (a = accepted / judged), from a prior of
	// autoPrior. The first token's acceptance is depth 1's a exactly; a per-token
	// estimate over all draft tokens (branch gov's) mixes in the deeper tokens of the
	// policies' rounds alone, which are accepted less often: on the H200 at 4 clients
	// it fell below the 0.78 where depth 1 stops clearing autoMargin, and "auto" played
	// plain (0.98 of plain) where depth 1 served 1.05.
	accepted, judged float64
	// prompt and gen: the prompt rows the draft model prefills for the requests that may
	// draft and the tokens they generate, both decaying by autoLoadDecay a request
	// (ρ = prompt / gen); a request counts its expected tokens (autoExpect) until it ends
	prompt, gen float64
	// requests is the number of requests recorded (a request's weight is autoLoadDecay
	// to the power of those after it)
	requests int

	// prefillRow is P, the draft model's seconds a prompt row beside a step (Calibrate)
	prefillRow float64
}

const (
	// autoDepths is the deepest batch depth the model considers: 1 (and the acceptance
	// it learns is that of a round's first draft token). At 4 sequences on
	// the H200 it expects depth 2 to serve 1.04× depth 1 (1.20× plain), but the epochs
	// of branch gov measured depth 2 6% below depth 1 there: a depth-2 round has one
	// forward more, and each served forward costs more than Calibrate's (see autoDepth).
	autoDepths = 1
	// autoMargin is how much more than plain decoding the model must expect of a depth
	// (see autoDepth).
	autoMargin = 0.10
	// autoPrior is the acceptance assumed before a round was seen, weighted as
	// autoPriorWeight judged rounds.
	autoPrior, autoPriorWeight = 0.8, 8
	autoDecay                  = 0.995
	// autoLoadDecay is the weight a request's prompt and tokens keep at the next
	// request's start (ρ is that of the last ~50 requests).
	autoLoadDecay = 0.98
	// calPrefillRows is the prompt rows of the draft's forward that Calibrate times for P.
	calPrefillRows = 32
)

// autoExpect is the tokens a request is expected to generate until it ends: its
// NPredict, or this.
const autoExpect = 256

func newAutoDepth(target, draft costCurve) *autoDepth {
	return &autoDepth{target: target, draft: draft, accepted: autoPrior * autoPriorWeight, judged: autoPriorWeight}
}

// rounded records a round drafted by the draft model: drafted tokens, of which accepted.
func (a *autoDepth) rounded(drafted, accepted int) {
	if a == nil || drafted <= 0 {
		return
	}
	a.mu.Lock()
	a.accepted, a.judged = a.accepted*autoDecay, a.judged*autoDecay+1
	if accepted > 0 {
		a.accepted++
	}
	a.mu.Unlock()
}

// requested records a request that may draft starting, with prompt rows to prefill
// and expect tokens expected (autoExpect), and returns its number for finished.
func (a *autoDepth) requested(prompt, expect int) int {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prompt = a.prompt*autoLoadDecay + float64(max(prompt, 0))
	a.gen = a.gen*autoLoadDecay + float64(expect)
	a.requests++
	return a.requests
}

// finished records the end of request number id, which requested expected expect
// tokens: it generated produced (counted at the weight its expected tokens have now).
func (a *autoDepth) finished(id, expect, produced int) {
	if a == nil {
		return
	}
	a.mu.Lock()
	w := math.Pow(autoLoadDecay, float64(a.requests-id))
	a.gen = max(a.gen+w*float64(produced-expect), 0)
	a.mu.Unlock()
}

// promptLoad is ρ, the prompt rows a generated token (0 before a request).
func (a *autoDepth) promptLoad() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.gen <= 0 {
		return 0
	}
	return a.prompt / a.gen
}

// acceptance is the estimate of a.
func (a *autoDepth) acceptance() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return min(a.accepted/a.judged, 1)
}

// depth is the batch depth for n sequences generating.
func (a *autoDepth) depth(n int) int {
	d, _ := a.choose(n, a.acceptance(), a.promptLoad())
	return d
}

// choose is the batch depth for n sequences at acceptance acc and ρ rho prompt rows a
// token, and the rates the model expects of depths 0…autoDepths (tokens a second). Past
// the most sequences measured
// it is 0: extrapolated in proportion, the costs would keep the largest count's ratio,
// where a larger batch's verify rows cost more, not less, than the decode rows' share.
func (a *autoDepth) choose(n int, acc, rho float64) (int, [autoDepths + 1]float64) {
	var rates [autoDepths + 1]float64
	for d := range rates {
		rates[d] = a.rate(n, d, acc, rho)
	}
	if s := a.target.seqs; len(s) == 0 || n > s[len(s)-1] {
		return 0, rates
	}
	best := 0
	for d := 1; d < len(rates); d++ {
		if rates[d] >= rates[0]*(1+autoMargin) && rates[d] > rates[best] {
			best = d
		}
	}
	return best, rates
}

// rate is the tokens a second the model expects of n sequences at depth d, acceptance
// acc and ρ rho.
func (a *autoDepth) rate(n, d int, acc, rho float64) float64 {
	c := a.target.at(n, float64(d+1))
	if d == 0 {
		return float64(n) / c
	}
	e, p := 1.0, 1.0
	for range d {
		p *= acc
		e += p
	}
	cost := c + a.draft.at(n, 1+p) + float64(d-1)*a.draft.at(n, 1)
	tokens := float64(n) * e
	return tokens / (cost + tokens*rho*a.prefillRow)
}

// costCurve is a model's measured batched forwards: secs[r-1][i] the seconds of a
// forward of seqs[i] sequences of r rows each.
type costCurve struct {
	seqs []int
	secs [][]float64
}

// at is the seconds of a forward of n sequences of r rows each (r may be fractional:
// some sequences one row more than others), interpolated linearly between the measured
// sequence counts and row counts, the smallest count's below it and in proportion to
// the largest's past it (no rows taken for free that were not measured).
func (c costCurve) at(n int, r float64) float64 {
	r = max(r, 1)
	lo := min(int(r), len(c.secs))
	v := c.atRows(n, lo)
	if f := r - float64(lo); f > 0 && !math.IsInf(v, 1) {
		if lo < len(c.secs) {
			v += f * (c.atRows(n, lo+1) - v)
		} else {
			v *= r / float64(lo)
		}
	}
	return v
}

// atRows is at for a whole row count r ≥ 1, at most len(c.secs).
func (c costCurve) atRows(n, r int) float64 {
	s := c.secs[r-1]
	i, found := slices.BinarySearch(c.seqs, n)
	switch {
	case found:
		return s[i]
	case i == 0:
		return s[0]
	case i == len(c.seqs):
		return s[i-1] * float64(n) / float64(c.seqs[i-1])
	}
	if math.IsInf(s[i], 1) { // (a shape no forward takes: see Calibrate)
		return s[i]
	}
	n0, n1 := c.seqs[i-1], c.seqs[i]
	return s[i-1] + (s[i]-s[i-1])*float64(n-n0)/float64(n1-n0)
}

// Calibration is what Calibrate measured: the depth "auto" plays by batch size.
type Calibration struct {
	auto *autoDepth
	// Took is the time the measurement took.
	Took time.Duration
}

// String summarises the measurement: each sequence count's forward times and the depth
// played there at the prior acceptance.
func (c *Calibration) String() string {
	var b strings.Builder
	a := c.auto
	fmt.Fprintf(&b, "measured in %v at acceptance %.2f, no prompts (then as measured); draft prefill %.3f ms a row:",
		c.Took.Round(time.Millisecond), autoPrior, 1e3*a.prefillRow)
	for _, n := range a.target.seqs {
		if n < 2 {
			continue
		}
		d, rates := a.choose(n, autoPrior, 0)
		fmt.Fprintf(&b, " %d seqs: target %.2f/%.2f ms, draft %.2f ms, depth %d (depth 1 expected at %.2f× plain);", n,
			1e3*a.target.at(n, 1), 1e3*a.target.at(n, 2), 1e3*a.draft.at(n, 1), d, rates[1]/rates[0])
	}
	return strings.TrimSuffix(b.String(), ";")
}

// BatchAuto is Batching.BatchDepth's "by the batch's size, from Calibrate's costs".
const BatchAuto = -2

// Calibrate measures, for batch depth "auto" (BatchDepth(BatchAuto)), the batched
// forwards of target and its draft model at 1, 2, 4, … up to seqs sequences: the
// target's of 1…autoDepths+1 rows a sequence (decode and verify), the draft's of 1 and 2
// (a draft step and a catch-up), and the draft's of one sequence of calPrefillRows
// prompt rows (a prompt's cost, P), each on caches of its own at position 128 of 512, its
// rows' statistics (or logits) handed to the host as a step's are, the fastest of two
// after two warm-ups (the second captures a graph where the backend has them; a second
// that took over calLong is the measure itself). It stops at the sequence count where
// budget is spent (past it batches decode plainly). The sessions on target take their
// batch's depth from it; without it "auto" decodes batches plainly. Call it before
// serving: it runs forwards on both models.
func (bt *Batching) Calibrate(target, draft *model.Model, kt, dkt backend.KVType, seqs int, budget time.Duration) (*Calibration, error) {
	if target == nil || draft == nil {
		return nil, errors.New("engine: calibrate: a target and a draft model are needed")
	}
	start := time.Now()
	var sizes []int
	for n := 1; n < seqs; n *= 2 {
		sizes = append(sizes, n)
	}
	sizes = append(sizes, max(seqs, 1))
	var tc, dc costCurve
	tc.secs, dc.secs = make([][]float64, autoDepths+1), make([][]float64, 2)
	// a shape of more rows than one batched forward takes is never a step's: not run,
	// its time infinite (no depth is played on it)
	tRows, dRows := bt.batcher(target).maxRows, bt.batcher(draft).maxRows
	var tCaches, dCaches []*kv.Cache
	defer func() {
		for _, c := range append(tCaches, dCaches...) {
			c.Close()
		}
	}()
	for _, n := range sizes {
		if len(tc.seqs) > 0 && time.Since(start) > budget {
			break
		}
		var err error
		if tCaches, err = growCaches(target, kt, tCaches, n); err != nil {
			return nil, err
		}
		if dCaches, err = growCaches(draft, dkt, dCaches, n); err != nil {
			return nil, err
		}
		if err := tc.measure("target", target, tCaches[:n], true, tRows); err != nil {
			return nil, err
		}
		if err := dc.measure("draft", draft, dCaches[:n], false, dRows); err != nil {
			return nil, err
		}
	}
	a := newAutoDepth(tc, dc)
	// P: a prompt's rows beside a draft step cost the forward's time past a step's
	r := min(calPrefillRows, dRows)
	if r > 1 {
		s, err := timeForward(draft, dCaches[:1], r, false, dRows)
		if err != nil {
			return nil, fmt.Errorf("engine: calibrate: draft, 1 sequence × %d prompt rows: %w", r, err)
		}
		a.prefillRow = max(s-dc.at(1, 1), 0) / float64(r-1)
	}
	b := bt.batcher(target)
	b.mu.Lock()
	b.auto = a
	b.mu.Unlock()
	return &Calibration{auto: a, Took: time.Since(start)}, nil
}

// measure adds to c the forwards of m of one sequence a cache, 1…len(c.secs) rows each
// (every row's logits past one row where verify: the target's verify rows; else the
// last row's), as timeForward measures them.
func (c *costCurve) measure(name string, m *model.Model, caches []*kv.Cache, verify bool, maxRows int) error {
	for r := range c.secs {
		s, err := timeForward(m, caches, r+1, verify && r > 0, maxRows)
		if err != nil {
			return fmt.Errorf("engine: calibrate: %s, %d sequences × %d rows: %w", name, len(caches), r+1, err)
		}
		c.secs[r] = append(c.secs[r], s)
	}
	c.seqs = append(c.seqs, len(caches))
	return nil
}

// The caches Calibrate's forwards run at: calPos positions filled of calCtx.
const calCtx, calPos = 512, 128

// growCaches returns cs with caches of m added up to n.
func growCaches(m *model.Model, t backend.KVType, cs []*kv.Cache, n int) ([]*kv.Cache, error) {
	ctx := calCtx
	if m.Params.CtxTrain > 0 {
		ctx = min(ctx, m.Params.CtxTrain)
	}
	for len(cs) < n {
		c, err := m.NewKV(ctx, t)
		if err != nil {
			return cs, fmt.Errorf("engine: calibrate: %w", err)
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// timeForward is, for a shape of at most maxRows rows (else +Inf), the fastest of two
// batched forwards of m (after two warm-ups; the second warm-up itself where it took
// longer than calLong) of one sequence a cache, rows rows each, every row's logits when
// all (a verify), else the last row's, their statistics (k = 1) or logits read to the
// host.
func timeForward(m *model.Model, caches []*kv.Cache, rows int, all bool, maxRows int) (float64, error) {
	if len(caches)*rows > maxRows {
		return math.Inf(1), nil
	}
	pos := min(calPos, caches[0].Ctx()/4)
	if pos+rows > caches[0].Ctx() {
		return 0, fmt.Errorf("a cache of %d positions holds no %d rows", caches[0].Ctx(), rows)
	}
	out := model.OutLast
	if all {
		out = model.OutAll
	}
	vocab := m.Params.Vocab
	seqs := make([]model.Seq, len(caches))
	for j, c := range caches {
		ids := make([]int32, rows)
		for i := range ids {
			ids[i] = int32((1 + 7*j + i) % vocab)
		}
		seqs[j] = model.Seq{IDs: ids, Cache: c, Out: out}
	}
	var st model.RowStats
	var host []float32
	best := math.Inf(1)
	for i := range 4 {
		for _, c := range caches {
			c.Reset()
			if err := c.Append(pos); err != nil {
				return 0, err
			}
		}
		t0 := time.Now()
		l, err := m.ForwardBatch(seqs)
		if err != nil {
			return 0, err
		}
		if m.HasRowStats() {
			err = m.RowStats(l, 1, nil, &st)
		} else {
			if n := l.Rows * l.Cols; len(host) < n {
				host = make([]float32, n)
			}
			err = m.ReadLogits(l, host)
		}
		if err != nil {
			return 0, err
		}
		d := time.Since(t0)
		if i >= 2 {
			best = min(best, d.Seconds())
		}
		if i == 1 && d > calLong { // (a CPU's large model: a second would be as slow)
			return d.Seconds(), nil
		}
	}
	return best, nil
}

// calLong is the forward time past which Calibrate takes a shape's second forward as
// its measure instead of running two more.
const calLong = 100 * time.Millisecond
