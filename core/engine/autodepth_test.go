package engine

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/model"
)

// h200Costs are the batched forwards TestBenchBatch measured on the H200 on
// 2026-12-03 (main fdc3b93; docs/PERFORMANCE.md): the 7B Q4_K_M target and the 0.5B
// Q4_K_M draft of the pair, 1-16 sequences × 1 and 2 rows, in seconds.
func h200Costs() (target, draft costCurve) {
	ms := func(v ...float64) []float64 {
		for i := range v {
			v[i] /= 1e3
		}
		return v
	}
	seqs := []int{1, 2, 4, 8, 16}
	target = costCurve{seqs: seqs, secs: [][]float64{
		ms(2.371, 3.100, 4.319, 5.803, 8.282),
		ms(2.885, 4.190, 5.760, 7.929, 14.587),
	}}
	draft = costCurve{seqs: seqs, secs: [][]float64{
		ms(0.696, 0.879, 1.138, 1.343, 1.679),
		ms(0.781, 1.055, 1.328, 1.642, 2.516),
	}}
	return target, draft
}

// TestAutoDepthH200: from the H200's costs, at the pair's acceptance (0.86-0.92 a token
// in specbench's rounds), "auto" drafts one token a round at 4 and 8 sequences, where
// static depth 1 served 1.04-1.05 and 0.99-1.00 of plain decoding, and decodes plainly
// at 16 and 32, where it served 0.83-0.85; at an acceptance of 0.5 it never drafts.
func TestAutoDepthH200(t *testing.T) {
	a := newAutoDepth(h200Costs())
	for _, tc := range []struct {
		n    int
		acc  float64
		want int
	}{
		{2, 0.9, 1}, {4, 0.9, 1}, {8, 0.9, 1}, {16, 0.9, 0}, {32, 0.9, 0},
		{4, 0.5, 0}, {8, 0.5, 0},
	} {
		d, rates := a.choose(tc.n, tc.acc, 0)
		t.Logf("%d sequences, acceptance %.2f: depth %d, depth 1 expected at %.3f× plain", tc.n, tc.acc, d, rates[1]/rates[0])
		if d != tc.want {
			t.Errorf("%d sequences at acceptance %.2f: depth %d, want %d (rates %v)", tc.n, tc.acc, d, tc.want, rates)
		}
	}
	// the model's own figures, which the margin sits under (see autoDepth)
	_, r4 := a.choose(4, 0.9, 0)
	_, r16 := a.choose(16, 0.9, 0)
	if g := r4[1] / r4[0]; math.Abs(g-1.16) > 0.01 {
		t.Errorf("depth 1 at 4 sequences: %.3f× plain expected, want 1.16 (the model of PERFORMANCE.md)", g)
	}
	if g := r16[1] / r16[0]; math.Abs(g-0.925) > 0.01 {
		t.Errorf("depth 1 at 16 sequences: %.3f× plain expected, want 0.925", g)
	}
}

// TestAutoDepthLearnsAcceptance: the rounds' acceptance of their first draft token moves
// the choice — from the prior (0.8) the H200's costs draft at 4 sequences; after rounds
// that accept a third of them they do not; after rounds whose first token is always
// accepted (and the rest never) they do again.
func TestAutoDepthLearnsAcceptance(t *testing.T) {
	a := newAutoDepth(h200Costs())
	if d := a.depth(4); d != 1 {
		t.Fatalf("at the prior acceptance %.2f: depth %d at 4 sequences, want 1", a.acceptance(), d)
	}
	for i := range 300 {
		a.rounded(1, i%3/2) // one in three accepted
	}
	if acc := a.acceptance(); acc > 0.4 {
		t.Fatalf("acceptance %.2f after rounds accepting a third", acc)
	}
	// a round's deeper tokens do not count: rounds of 4 whose first is always accepted
	// and the rest never are mean a first-token acceptance near 1
	for range 600 {
		a.rounded(4, 1)
	}
	if acc := a.acceptance(); acc < 0.9 {
		t.Fatalf("acceptance %.2f after 600 rounds whose first draft token was accepted", acc)
	}
	if d := a.depth(4); d != 1 {
		t.Errorf("at acceptance %.2f: depth %d at 4 sequences, want 1", a.acceptance(), d)
	}
	for i := range 900 { // (the evidence decays by autoDecay a round)
		a.rounded(1, i%3/2)
	}
	if acc := a.acceptance(); acc > 0.4 {
		t.Fatalf("acceptance %.2f after rounds accepting a third", acc)
	}
	if d := a.depth(4); d != 0 {
		t.Errorf("at acceptance %.2f: depth %d at 4 sequences, want 0", a.acceptance(), d)
	}
}

// TestAutoDepthPromptLoad: the prompts the draft model must prefill when it drafts move
// the choice. On the H200's costs with the draft prefilling at 0.06 ms a row, depth 1 at
// 4 sequences and acceptance 0.9 pays with no prompts (1.16× plain), but not at the
// loadgen's 150-row prompts for 128 tokens (1.17 rows a token: 1.08×, under the margin);
// a request counts its expected tokens while it runs, its tokens once it ends, and
// requests of short prompts and long answers bring depth 1 back.
func TestAutoDepthPromptLoad(t *testing.T) {
	a := newAutoDepth(h200Costs())
	a.prefillRow = 0.06e-3
	a.accepted, a.judged = 0.9*1e6, 1e6 // (acceptance 0.9, held there)
	if d := a.depth(4); d != 1 || a.promptLoad() != 0 {
		t.Fatalf("no requests: depth %d at 4 sequences, ρ %v; want depth 1, ρ 0", d, a.promptLoad())
	}
	var ids []int
	for range 4 {
		ids = append(ids, a.requested(150, 128))
	}
	if rho := a.promptLoad(); math.Abs(rho-150.0/128) > 1e-9 {
		t.Errorf("4 requests of 150 prompt rows expecting 128 tokens: ρ %v, want %v", rho, 150.0/128)
	}
	_, rates := a.choose(4, 0.9, 150.0/128)
	if g := rates[1] / rates[0]; math.Abs(g-1.08) > 0.01 {
		t.Errorf("depth 1 at 4 sequences, ρ 1.17: %.3f× plain expected, want 1.08", g)
	}
	if d := a.depth(4); d != 0 {
		t.Errorf("ρ %.2f: depth %d at 4 sequences, want 0", a.promptLoad(), d)
	}
	for _, id := range ids { // each generated 64 tokens, not 128: ρ doubles
		a.finished(id, 128, 64)
	}
	if rho := a.promptLoad(); math.Abs(rho-150.0/64) > 1e-9 {
		t.Errorf("4 requests of 150 prompt rows that generated 64 tokens: ρ %v, want %v", rho, 150.0/64)
	}
	for range 300 {
		a.finished(a.requested(8, 512), 512, 512)
	}
	if rho := a.promptLoad(); rho > 0.02 {
		t.Errorf("after 300 requests of 8 prompt rows and 512 tokens: ρ %v, want about 8/512", rho)
	}
	if d := a.depth(4); d != 1 {
		t.Errorf("ρ %.3f: depth %d at 4 sequences, want 1", a.promptLoad(), d)
	}
}

// TestCostCurve: measured points are returned as measured; sequence counts between them
// linearly, below the first as the first, past the last in proportion; a fractional row
// count between its two row counts, and past the last measured row count in
// proportion; a shape too large for a forward (+Inf) stays infinite, never NaN.
func TestCostCurve(t *testing.T) {
	c := costCurve{seqs: []int{1, 2, 4}, secs: [][]float64{{1, 2, 4}, {3, 4, 8}}}
	for _, tc := range []struct {
		n    int
		r    float64
		want float64
	}{
		{2, 1, 2}, {4, 2, 8}, {3, 1, 3}, {3, 2, 6}, {1, 1, 1}, {8, 1, 8}, {16, 2, 32},
		{2, 1.5, 3}, {4, 1.25, 5}, {2, 3, 6}, {1, 0.5, 1},
	} {
		if got := c.at(tc.n, tc.r); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("at(%d, %v) = %v, want %v", tc.n, tc.r, got, tc.want)
		}
	}
	inf := math.Inf(1)
	big := costCurve{seqs: []int{1, 2, 4}, secs: [][]float64{{1, 2, inf}, {3, inf, inf}}}
	for _, tc := range []struct {
		n int
		r float64
	}{{3, 1}, {4, 1}, {8, 1}, {2, 2}, {3, 1.5}, {4, 1.5}, {2, 1.5}} {
		if got := big.at(tc.n, tc.r); !math.IsInf(got, 1) {
			t.Errorf("at(%d, %v) = %v past the rows a forward takes, want +Inf", tc.n, tc.r, got)
		}
	}
}

// TestCalibrate: on the CPU, Calibrate measures both models at 1, 2, 4 and 5 sequences
// (every row count the model needs, each time positive, and more rows never free of
// time at 5 sequences), gives the target's batcher its chooser, and a budget spent
// after the first count stops it there (past it batches decode plainly).
func TestCalibrate(t *testing.T) {
	target, draft := specPair(t)
	bt := NewBatching(64)
	bt.BatchDepth(BatchAuto)
	cal, err := bt.Calibrate(target, draft, backend.KVF16, backend.KVF16, 5, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(cal)
	a := bt.batcher(target).auto
	if a == nil || a != cal.auto {
		t.Fatal("the target's batcher has no chooser after Calibrate")
	}
	for name, c := range map[string]costCurve{"target": a.target, "draft": a.draft} {
		if len(c.seqs) != 4 || c.seqs[3] != 5 {
			t.Fatalf("%s measured at %v sequences, want 1, 2, 4, 5", name, c.seqs)
		}
		for r, s := range c.secs {
			for i, v := range s {
				if !(v > 0) {
					t.Errorf("%s, %d sequences × %d rows: %v s", name, c.seqs[i], r+1, v)
				}
			}
		}
	}
	if p := a.prefillRow; !(p > 0) || math.IsInf(p, 1) {
		t.Errorf("the draft's prompt row: %v s, want a positive time", p)
	}
	if got := len(depths(cal, 5, 0.9)); got != 4 {
		t.Errorf("depths(5) gave %d depths, want 4 (2…5 sequences)", got)
	}
	bt2 := NewBatching(64)
	bt2.BatchDepth(BatchAuto)
	cal2, err := bt2.Calibrate(target, draft, backend.KVF16, backend.KVF16, 32, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s := cal2.auto.target.seqs; len(s) != 1 || s[0] != 1 {
		t.Errorf("with no budget: measured at %v sequences, want only 1", s)
	}
	// a batch of 8 rows at the most: 5 sequences × 2 rows are no step's, so not run
	bt3 := NewBatching(8)
	bt3.BatchDepth(BatchAuto)
	cal3, err := bt3.Calibrate(target, draft, backend.KVF16, backend.KVF16, 5, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if v := cal3.auto.target.secs[1]; !math.IsInf(v[3], 1) || math.IsInf(v[2], 1) {
		t.Errorf("batch of 8 rows: target × 2 rows at %v sequences took %v s, want +Inf past 4 only", cal3.auto.target.seqs, v)
	}
	if d := depths(cal3, 5, 1); d[3] != 0 {
		t.Errorf("batch of 8 rows: depth %d at 5 sequences, want 0", d[3])
	}
	for i, d := range depths(cal2, 32, 1) {
		if d != 0 {
			t.Errorf("with no budget: depth %d at %d sequences, want 0 (past the counts measured)", d, i+2)
		}
	}
}

// TestBatchDepthAuto: under batch depth "auto" the batch's rounds take the depth its
// chooser gives for the sequences generating — one token a round, in lockstep, under a
// policy of depth 3 where the costs say drafting pays; no drafts in the batch where
// they say it does not, nor before Calibrate has run (uncalibrated "auto" is plain).
func TestBatchDepthAuto(t *testing.T) {
	const seqs = 4
	pays := func(target, draft *model.Model) (costCurve, costCurve) { return payingCosts() }
	never := func(target, draft *model.Model) (costCurve, costCurve) {
		seqs := []int{1, 2, 4, 8, 16}
		flat := func(v float64) []float64 { return []float64{v, v, v, v, v} }
		return costCurve{seqs: seqs, secs: [][]float64{flat(1e-3), flat(2e-3)}},
			costCurve{seqs: seqs, secs: [][]float64{flat(1e-3), flat(1e-3)}}
	}
	var auto *autoDepth // the last run's chooser
	var results []*Result
	run := func(batch int, costs func(target, draft *model.Model) (costCurve, costCurve)) (n, rounds, deep int, perForward float64) {
		bt := NewBatching(64)
		bt.BatchDepth(batch)
		auto = nil
		install := func(target, draft *model.Model) {
			if costs != nil {
				auto = newAutoDepth(costs(target, draft))
				bt.batcher(target).auto = auto
			}
		}
		// (in a subtest of its own, so that its models, their CPU backend and the
		// sessions are closed before the next run)
		var res []*Result
		var forwards, served int64
		t.Run(fmt.Sprintf("batch depth %d", batch), func(t *testing.T) {
			res, forwards, served = specBatch(t, bt, 3, seqs, install)
		})
		results = res
		n, rounds, deep = drafted(res)
		if forwards > 0 {
			perForward = float64(served) / float64(forwards)
		}
		return n, rounds, deep, perForward
	}
	_, rounds, deep, per := run(BatchAuto, pays)
	t.Logf("where drafting pays: %d of %d rounds deeper than 1, %.2f sequences a draft forward", deep, rounds, per)
	if rounds == 0 || 5*deep > rounds {
		t.Errorf("where drafting pays, %d of %d rounds drafted deeper than 1 (the policy's 3); want at most a fifth (the rounds alone)", deep, rounds)
	}
	if per < 2 {
		t.Errorf("where drafting pays, %.2f sequences a draft forward, want at least 2 of %d", per, seqs)
	}
	// the requests told the chooser their prompts and tokens: ρ is a weighted mean of
	// theirs, so between the least and the most
	lo, hi := math.Inf(1), 0.0
	for _, r := range results {
		rho := float64(r.PromptTokens-1-r.CachedTokens) / float64(len(r.Tokens))
		lo, hi = min(lo, rho), max(hi, rho)
	}
	if rho := auto.promptLoad(); rho < lo-1e-9 || rho > hi+1e-9 || hi == 0 {
		t.Errorf("prompt load ρ %v after the requests, want within theirs, %v…%v", rho, lo, hi)
	}
	free, _, _, _ := run(DepthOff, nil) // the policies' own depth, 3
	for name, costs := range map[string]func(target, draft *model.Model) (costCurve, costCurve){"where it does not pay": never, "uncalibrated": nil} {
		z, _, _, _ := run(BatchAuto, costs)
		t.Logf("%s: %d drafted tokens (%d at the policies' depth)", name, z, free)
		if free == 0 || z > free/4 {
			t.Errorf("%s: the sessions drafted %d tokens, %d at their policies' depth 3; want at most a quarter (the rounds alone)", name, z, free)
		}
	}
}

// payingCosts are costs under which depth 1 pays at any batch size: a verify row nearly
// free, a draft forward free.
// (Measured up to 16 sequences: specBatch holds its batch open with as many counts as
// sessions.)
func payingCosts() (target, draft costCurve) {
	seqs := []int{1, 2, 4, 8, 16}
	flat := func(v float64) []float64 { return []float64{v, v, v, v, v} }
	return costCurve{seqs: seqs, secs: [][]float64{flat(1e-3), flat(1.1e-3)}},
		costCurve{seqs: seqs, secs: [][]float64{flat(1e-5), flat(1e-5)}}
}

// TestAutoDepthWindow: "auto" chooses for the most sessions that generated at once
// within autoWindow — a slot idle for a moment between two requests does not switch
// the batch's depth — and for the sessions generating now once that is past.
func TestAutoDepthWindow(t *testing.T) {
	ms := func(v ...float64) []float64 {
		for i := range v {
			v[i] /= 1e3
		}
		return v
	}
	// depth 1 pays at 4 sequences only
	target := costCurve{seqs: []int{1, 2, 3, 4}, secs: [][]float64{ms(1, 1, 1, 1), ms(2, 2, 2, 1.1)}}
	draft := costCurve{seqs: []int{1, 2, 3, 4}, secs: [][]float64{ms(.01, .01, .01, .01), ms(.01, .01, .01, .01)}}
	b := &batcher{depth: BatchAuto, auto: newAutoDepth(target, draft)}
	b.active = 4
	if d := b.batchDepth(); d != 1 {
		t.Fatalf("4 sessions: depth %d, want 1", d)
	}
	b.active = 3
	if d := b.batchDepth(); d != 1 {
		t.Errorf("3 sessions, 4 a moment ago: depth %d, want 1 (the window's 4)", d)
	}
	b.peakAt = b.peakAt.Add(-2 * autoWindow)
	if d := b.batchDepth(); d != 0 {
		t.Errorf("3 sessions, 4 longer than the window ago: depth %d, want 0", d)
	}
	b.active = 4
	if d := b.batchDepth(); d != 1 {
		t.Errorf("4 sessions again: depth %d, want 1", d)
	}
}

// depths is the batch depth "auto" plays for 2…maxSeqs sequences at acceptance acc.
func depths(c *Calibration, maxSeqs int, acc float64) []int {
	var out []int
	for n := 2; n <= maxSeqs; n++ {
		d, _ := c.auto.choose(n, acc, 0)
		out = append(out, d)
	}
	return out
}
