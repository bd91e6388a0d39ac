package builtin

import (
	"context"
	"fmt"
	"math"

	"github.com/minfer/minfer/sdk"
)

// Adaptive is the default depth policy. It models a round at depth d as
//
//	tokens(d) = 1 + Σ_{k=1..d} Π_{j≤k} a_j        (accepted draft tokens + the bonus token)
//	cost(d)   = d·step + verify(d+1)                (draft steps + one target forward of nt rows)
//
// and picks the d that maximises tokens(d)/cost(d), the expected tokens per second.
//
// a_j, the probability that draft position j is accepted given that j-1 were, has a Beta
// posterior fed only by positions actually drafted: a round that drafted n tokens and
// accepted m is a success at positions 1..m and, when m < n, a failure at m+1; positions
// after that, and beyond n, are not observed (a fully accepted round says nothing about
// depth n+1). Counts are discounted by `forget` each time a position is observed (so the
// posterior follows a shifting acceptance) and relaxed by `relax` every round (so a
// position not drafted for a long time is eventually tried again). The prior of position
// j is centred on the estimate of position j-1, with strength prior_strength, so
// untried depths inherit what shallower positions show. A depth is also scored with each
// a_j raised by `optimism` posterior standard deviations times the prior's share of the
// evidence: depths not yet observed score optimistically and get tried, while the bonus
// of well-observed positions vanishes (it would otherwise compound over deep depths).
//
// step is the minimum draft time per token over the last `window` drafting rounds, and
// verify(nt) the minimum verify time over the last `window` rounds with nt rows; an nt not
// measured yet takes the nearest measurement below (optimistic for deeper depths: they
// get tried and measured), as does one whose measurement went stale while the policy
// played shallower depths (so that rows that became cheap mid-request get tried). In a
// batch (the host says the verify forward served other sequences, ABI v1.3) verify is
// the batch's, and a depth is charged what it would cost if every sequence of the
// batch chose it (adaptive_verify.go): where rows cost, depth falls as the batch grows.
//
// The policy keeps its depth unless another scores more than `hysteresis` better or is
// better in expectation than the current depth is optimistically (into depth 0 only by
// `park_margin`, which shrinks as the first position's evidence grows), with two exceptions: a depth never run is tried as soon as it scores
// best (the hysteresis is against flapping between measured depths), and depth 0 is
// left as soon as another depth scores better optimistically (plain rounds observe no
// acceptance, so parking there would freeze the estimates on a few early rounds).
// Exploration climbs: a depth more than one past the deepest measured is not a
// candidate yet (an untried deep round is the costliest probe). The depth never exceeds
// draft_max nor the round's MaxDepth (the backend's identity bound).
//
// Early exit (auto_cut, on unless min_conf is set): once a draft step has been timed,
// every round that drafts is given the cut-off
//
//	t = rate·(step + row) / a_1
//
// where rate is the chosen depth's expected tokens per ns, row the verify cost of one
// more row and a_1 the acceptance of the first position: a draft token is worth going
// on from while the draft's confidence in it beats what the time of one more draft
// step and verify row yields at the expected rate. The depth of such a round is a cap —
// the deepest depth whose optimistic score is within the hysteresis of the chosen
// depth's — and the cut-off ends it sooner: it runs deep where the draft is confident
// and stops at once where it is not, token by token, which no static depth can do. The
// token under the cut-off is kept (verified) when its row costs less than half the
// cut-off's worth of tokens (rate·row < t/2): on a memory-bound GPU target a row is
// nearly free, on a compute-bound CPU one it is not.
//
// The confidence is not taken at its word (calibrate > 0): the policy learns, per
// confidence bucket (calEdges), how often the target accepts a token drafted there and
// how often it accepts the token after an accepted one, and the cut-off becomes the
// lowest bucket edge from which going on is worth the step, P(accepted)·P(next
// accepted) ≥ rate·(step + row) (calibratedCut). The formula above is its prior, moved
// by the draft's overall shift (how far acceptance exceeds confidence over all judged
// tokens), so that evidence in any bucket moves every other at once; the tokens kept
// under the cut-off are its evidence below it. A draft whose confidence
// understates its accuracy (issue 7's second bed: tokens drafted at 0.3 are all
// accepted) then drafts on where the formula would stop after one token, and one that
// overstates it stops sooner. The model above still decides
// between drafting (depth ≥ 1) and plain decoding (depth 0); it counts, per position,
// the draft steps the cut-off let through and those it stopped at, so a depth's
// expected tokens and cost account for the rounds the cut-off ends early.
//
// Where the sequence offers several drafters (a draft model and drafter plugins) the
// policy keeps all of the above per drafter, but the verify costs, and gives each round
// to the drafter whose own choice scores best (adaptive_drafters.go). A drafter that
// ran out of tokens before the depth (a drafter plugin with nothing to copy) is told
// apart from the cut-off where it can be, and counts as the chance, per position, that
// the drafter has a token there.
//
// A host may keep one instance across the requests of a session (minfer starts one per
// request; `minfer policy replay --session` replays a trace that way): at each new
// request (Round -1) the costs stay, the acceptance evidence is weighted by `carry`, and
// the depth continues from the last request's instead of `start`.
//
// Params (JSON): draft_max (16), min_conf (0; > 0 is passed through as a fixed early-exit
// cut-off instead of the automatic one), keep_cut (false; with a fixed min_conf: keep
// the token under it), auto_cut (true), start (1: the depth of the
// first round, before anything is measured), hysteresis
// (0.10), window (32), forget (0.95), relax (0.999), prior_mean (0.5), prior_strength
// (2), optimism (1.0), carry (0.5: the weight of earlier requests' acceptance evidence
// when a kept instance starts another request), park_margin (0.05: how much better depth
// 0 must score, against the current depth's optimistic score, before the policy parks
// there), probe (4: after this many rounds parked at depth 0 a round of depth 1 probes
// whether the draft agrees again, keeping its first token whatever the cut-off; the
// gap doubles after each probe and starts over when a probe's token is accepted or the
// policy leaves depth 0; no probe where even a fully accepted draft would not beat
// plain decoding by the hysteresis; 0 = never), calibrate (10: the strength, in tokens,
// of the calibration's prior; 0 = no calibration: the cut-off takes the confidence for
// the chance of acceptance), calibrate_shift (10: the strength, in tokens, of the prior
// that the draft's confidence is not shifted overall, see calibratedCut; 0 = each
// bucket learns only from its own tokens: calibrate 3 with calibrate_shift 0 is the
// earlier default, docs/perf-plugins.md compares them), batch_table (false: in a batch
// the verify cost by forward size is the table of measured sizes of batchTable instead
// of one line; docs/perf-server.md, "A table for the batch's verify cost").
type Adaptive struct {
	p adaptiveParams
	// drafterState is the state of the drafter whose round is being observed or
	// decided; states holds every drafter's when the sequence offers several, and
	// active says which one drafterState is (see adaptive_drafters.go).
	drafterState
	states    []drafterState
	active    int
	lastShort bool           // the round decided last drafts a short offer (adaptive_drafters.go)
	ds        []drafterProbe // by drafter, with several (see probeDrafter)
	// verify cost is the target's: one estimate for every drafter
	verify   []ring    // by the verify forward's rows (this sequence's and the batch's others')
	seen     []int     // by the forward's rows: the round whose forward last had that many
	ran      []bool    // by nt: a round of this sequence's nt rows was measured
	rows     []float64 // scratch: verify cost by the forward's rows (see verifyEstimates)
	est      []float64 // verify cost charged to a round of nt rows (see verifyEstimates)
	estFresh bool      // est is up to date with verify (len(est) says for which bound)
	// The batch of the last verify forward (RoundOutcome.BatchSeqs, BatchRows): others
	// the rows of the other sequences in it, seqs the sequences (≥ 1); and the values
	// est was made for.
	others, seqs       int
	estOthers, estSeqs int
	// v0, row: the batch's verify line V(R) = v0 + row·R (batchEstimates)
	v0, row float64
	rounds  int       // rounds observed, the clock of seen
	mean    []float64 // scratch: expected tokens per ns by depth (see score)
	opt     []float64
}

// drafterState is what the adaptive policy learns of one drafter: its acceptance,
// where drafting stops, its draft cost, its calibration, and its depth.
type drafterState struct {
	cur     int     // depth chosen last
	started bool    // a round has been observed
	parked  int     // rounds at depth 0 since the last probe
	probed  bool    // the last round was a probe
	gap     int     // parked rounds before the next probe
	autoCut bool    // the last decision's cut-off came from the cost model
	cut     float32 // the early-exit cut-off of the last decision
	keepCut bool    // and whether the token under it is kept

	// succ[j], fail[j] are position j's discounted counts divided by scale, the
	// product of every round's relax factor: relaxing all positions is then one
	// multiplication per round instead of one per position.
	succ, fail []float64
	// pass[j], stop[j] count, the same way, the draft steps at position j that the
	// cut-off let through and those it stopped the round at.
	pass, stop []float64
	// have[j], out[j] count, the same way, the rounds whose drafter had a token for
	// position j and those it had none for (it ran out before the depth and the
	// cut-off).
	have, out []float64
	scale     float64
	steps     ring // draft ns per token

	// The draft's calibration: judged counts, by confidence bucket (calEdges), the drafted
	// tokens the target judged (up to the first rejection) and hit those it accepted;
	// followed counts the accepted tokens after which a next drafted token was judged,
	// and both those whose next token was accepted too.
	judged, hit    [calBuckets]float64
	followed, both float64
}

// calEdges are the lower edges of the confidence buckets: the cut-offs calibration
// chooses from.
var calEdges = [...]float32{0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}

const calBuckets = len(calEdges)

// calMid are the buckets' middle confidences.
var calMid = func() (m [calBuckets]float64) {
	for b := range m {
		hi := float32(1)
		if b+1 < calBuckets {
			hi = calEdges[b+1]
		}
		m[b] = float64(calEdges[b]+hi) / 2
	}
	return m
}()

// calBucket is the bucket of confidence c; one outside [0, 1] (or NaN, from a
// misbehaving host or a hand-edited trace) counts in the nearest end bucket.
func calBucket(c float32) int {
	if !(c > 0) {
		return 0
	}
	if c >= 1 {
		return calBuckets - 1
	}
	// the edges are 0.05 apart up to 0.2 and 0.1 apart from there: guess by arithmetic,
	// then settle by the edges themselves (a confidence at an edge is in its bucket)
	b := 2 + int(c*10)
	if c < 0.2 {
		b = int(c * 20)
	}
	b = min(max(b, 0), calBuckets-1)
	if b+1 < calBuckets && c >= calEdges[b+1] {
		b++
	}
	if c < calEdges[b] && b > 0 {
		b--
	}
	return b
}

type adaptiveParams struct {
	DraftMax       int     `json:"draft_max"`
	MinConf        float64 `json:"min_conf"`
	Start          int     `json:"start"`
	Hysteresis     float64 `json:"hysteresis"`
	Window         int     `json:"window"`
	Forget         float64 `json:"forget"`
	Relax          float64 `json:"relax"`
	PriorMean      float64 `json:"prior_mean"`
	PriorStrength  float64 `json:"prior_strength"`
	Optimism       float64 `json:"optimism"`
	Carry          float64 `json:"carry"`
	ParkMargin     float64 `json:"park_margin"`
	Probe          int     `json:"probe"`
	AutoCut        bool    `json:"auto_cut"`
	Calibrate      float64 `json:"calibrate"`
	CalibrateShift float64 `json:"calibrate_shift"`
	KeepCut        bool    `json:"keep_cut"`
	BatchTable     bool    `json:"batch_table"`
}

var _ sdk.DepthPolicy = (*Adaptive)(nil)

// NewAdaptive builds the adaptive policy from JSON params.
func NewAdaptive(params []byte) (*Adaptive, error) {
	p := adaptiveParams{DraftMax: 16, Start: 1, Hysteresis: 0.10, Window: 32, Forget: 0.95,
		Relax: 0.999, PriorMean: 0.5, PriorStrength: 2, Optimism: 1, Carry: 0.5, ParkMargin: 0.05,
		Probe: 4, AutoCut: true, Calibrate: 10, CalibrateShift: 10}
	if err := decodeParams("adaptive", params, &p); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		key       string
		v, lo, hi float64
	}{
		{"draft_max", float64(p.DraftMax), 0, sdk.MaxDepthLimit},
		{"min_conf", p.MinConf, 0, 1},
		{"start", float64(p.Start), 0, sdk.MaxDepthLimit},
		{"hysteresis", p.Hysteresis, 0, 10},
		{"window", float64(p.Window), 1, 4096},
		{"forget", p.Forget, 0.5, 1},
		{"relax", p.Relax, 0.5, 1},
		{"prior_mean", p.PriorMean, 0.01, 0.99},
		{"prior_strength", p.PriorStrength, 0.01, 1000},
		{"optimism", p.Optimism, 0, 10},
		{"carry", p.Carry, 0, 1},
		{"park_margin", p.ParkMargin, 0, 10},
		{"probe", float64(p.Probe), 0, 1 << 20},
		{"calibrate", p.Calibrate, 0, 1000},
		{"calibrate_shift", p.CalibrateShift, 0, 1e6},
	} {
		if err := checkRange("adaptive", c.key, c.v, c.lo, c.hi); err != nil {
			return nil, err
		}
	}
	return &Adaptive{p: p, drafterState: newDrafterState(p)}, nil
}

func newDrafterState(p adaptiveParams) drafterState {
	return drafterState{steps: newRing(p.Window), scale: 1, gap: p.Probe}
}

// NextDepth records the finished round and returns the depth for the next one.
func (a *Adaptive) NextDepth(_ context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	bound := a.p.DraftMax
	if last.Round >= 0 || last.MaxDepth > 0 {
		bound = min(bound, max(last.MaxDepth, 0))
	}
	if last.Drafters > 1 || len(a.states) > 0 {
		return a.nextDrafter(&last, bound), nil
	}
	if a.probed {
		if last.Round >= 0 && last.Accepted > 0 {
			a.gap = a.p.Probe // the draft agrees again: probe as often as at first
		}
		a.probed = false
	}
	if last.Round >= 0 {
		a.observe(&last)
	} else if a.started {
		a.newRequest()
	}
	if !a.started {
		a.cur = min(a.p.Start, bound)
	} else {
		a.cur = a.choose(bound)
		a.probeFromZero(bound)
	}
	a.cutOff()
	return a.decision(), nil
}

// probeFromZero turns every so many rounds parked at depth 0 into a depth-1 round:
// depth 0 observes no acceptance, so a request whose first draft tokens were rejected
// would otherwise stay there for good. It does not probe when even a perfect draft
// would not pay (draftingCanPay). The gap starts at `probe` rounds and doubles
// after each probe whose token is rejected (so a draft that never agrees costs a probe
// per 2^k rounds); it starts over when a probe's token is accepted or the policy leaves.
func (a *Adaptive) probeFromZero(bound int) {
	if a.cur > 0 || a.p.Probe == 0 {
		a.parked, a.gap = 0, a.p.Probe
		return
	}
	if bound == 0 || !a.draftingCanPay(bound) {
		return
	}
	a.parked++
	if a.parked >= a.gap {
		a.cur, a.parked, a.gap, a.probed = 1, 0, 2*a.gap, true
	}
}

// draftingCanPay reports whether a draft whose every token is accepted would beat plain
// decoding by more than the hysteresis at some depth, with the measured costs (a
// depth-0 round costs est[1]). When not — a draft nearly as dear as the target — probing
// from depth 0 is pointless, and costly: each probe first catches the draft up on every
// token since it last ran.
func (a *Adaptive) draftingCanPay(bound int) bool {
	step, ok := a.steps.min()
	if !ok || a.steps.n < min(2, a.p.Window) || a.est[1] <= 0 {
		// Not measured yet, or once: a drafter's first round may carry a one-off cost
		// (a host that tells a drafter plugin the prompt in it, a draft model's
		// warm-up), and one such round must not stop the probes that would measure a
		// second.
		return true
	}
	for d := 1; d <= bound; d++ {
		if a.probePays(d, step) {
			return true
		}
	}
	return false
}

// cutOff sets the next round's early-exit cut-off and whether the token under it is
// kept (see "Early exit" above); a fixed min_conf, auto_cut off, depth 0 or a draft
// step not timed yet leave the cut-off at min_conf.
func (a *Adaptive) cutOff() {
	a.cut, a.keepCut, a.autoCut = float32(a.p.MinConf), a.p.KeepCut, false
	if a.p.MinConf > 0 || !a.p.AutoCut || a.cur == 0 {
		return
	}
	step, ok := a.steps.min()
	if !ok {
		return
	}
	// the verify cost of a row, from the estimates score just made (est[nt], nt ≤ bound+1)
	row := atLeast((a.est[a.cur+1]-a.est[1])/float64(a.cur), 0)
	rate := a.mean[a.cur] // tokens per ns
	k := a.p.PriorStrength
	a1 := (k*a.p.PriorMean + a.succ[1]*a.scale) / (k + (a.succ[1]+a.fail[1])*a.scale)
	t := atMost(atLeast(rate*(step+row)/a1, 0.05), 0.95)
	if a.p.Calibrate > 0 {
		t = a.calibratedCut(rate*(step+row), a1)
	}
	a.cut, a.autoCut = float32(t), true
	// a probe keeps its first token whatever the confidence: it is there to observe
	a.keepCut = rate*row < t/2 || a.probed
}

// calibratedCut is the automatic cut-off from the draft's calibration (see "Early
// exit"): the lowest bucket edge from which going on is worth its time, P(accepted) ·
// P(next accepted | accepted) ≥ need (the time of one more draft step and verify row, in
// tokens at the expected rate); 0.95 when not even the top bucket's is. P(accepted) is
// each bucket's posterior mean with `calibrate` prior tokens at the bucket's middle
// confidence, fitted nondecreasing in the confidence (weighted isotonic regression), so
// the evidence of buckets with data carries to neighbours without; P(next accepted) is
// one rate over all buckets, with the same prior weight at a_1. With calibrate_shift > 0
// each bucket's prior is also moved by the draft's overall shift (how far acceptance
// exceeds confidence over all judged tokens, shrunk towards none by calibrate_shift
// prior tokens), so evidence in one bucket moves every other's prior at once.
func (a *Adaptive) calibratedCut(need, a1 float64) float64 {
	k := a.p.Calibrate
	need *= (k + a.followed) / (k*a1 + a.both) // the P(accepted) it takes
	shift := a.calShift()
	// Pool adjacent violators over the buckets in rising confidence: a block is a run
	// of buckets with its summed successes and weight, and joins the block below while
	// that one's mean is higher (compared without dividing).
	var sum, weight [calBuckets]float64
	var first [calBuckets]int
	n := 0
	for b := range calBuckets {
		prior := atMost(atLeast(calMid[b]+shift, 0), 1) // calMid[b] itself without a shift
		s, w, f := k*prior+a.hit[b], k+a.judged[b], b
		for n > 0 && sum[n-1]*w > s*weight[n-1] {
			n--
			s, w, f = s+sum[n], w+weight[n], first[n]
		}
		sum[n], weight[n], first[n] = s, w, f
		n++
	}
	c := 0.95
	for n--; n >= 0 && sum[n] >= need*weight[n]; n-- {
		c = float64(calEdges[first[n]])
	}
	return atMost(atLeast(c, 0.05), 0.95)
}

// newRequest is the start of another request on an instance that has served one
// before (a host that keeps the policy for a session): the costs stay (they are the hardware's and the
// models'), the acceptance evidence is weighted by `carry` (a new prompt may accept
// differently, so its own rounds soon outweigh the old ones), and the depth starts where
// the last request ended instead of at `start`.
func (a *Adaptive) newRequest() {
	for j := range a.succ {
		a.succ[j] *= a.p.Carry
		a.fail[j] *= a.p.Carry
		a.pass[j] *= a.p.Carry
		a.stop[j] *= a.p.Carry
		a.have[j] *= a.p.Carry
		a.out[j] *= a.p.Carry
	}
	for b := range a.judged {
		a.judged[b] *= a.p.Carry
		a.hit[b] *= a.p.Carry
	}
	a.followed *= a.p.Carry
	a.both *= a.p.Carry
}

func (a *Adaptive) decision() sdk.DepthDecision {
	d := a.cur
	if a.autoCut && d > 0 {
		d = a.capDepth()
	}
	return sdk.DepthDecision{Depth: d, MinConf: a.cut, KeepCut: a.keepCut}
}

// capDepth is the depth of a round that the cut-off may end early: the chosen depth,
// extended past it for as long as a draft step that the cut-off lets through is worth
// its time. A step at position e runs only when the tokens before it passed the
// cut-off, so it pays when A^e ≥ rate·(step + row): A is the calibration's chance that
// a token at or above the cut-off is accepted (passAccept), rate the best expected
// tokens per ns of the drafting depths within reach, row the verify cost of one more row (the
// mean over the rows past the chosen depth's, so that one size measured dear by noise
// does not end the cap there). Where the confidence tells accepted tokens from
// rejected ones, A is high and the cap runs deep, the cut-off ending most rounds
// sooner; where it does not (every token drafted confidently: A is no higher than the
// acceptance over all tokens) the cap stays near the chosen depth, which such rounds
// then draft whole. The cap climbs like exploration, at most two depths past the
// deepest one drafted. Without calibration (calibrate 0) the cap is the deepest depth
// whose optimistic score is within the hysteresis of the chosen depth's.
//
// In a batch (continuous batching) a draft step past the chosen depth is charged once
// for every sequence of the batch: the batch's draft phase lasts as long as its
// deepest draft, and the others, which chose alike, do not go on with it, so all of
// them wait through the step (serve_sim_test.go: with the H200's costs at 4 and 8
// clients, 16 of 370 and 68 of 376 steps drafted past three forwards and the batch
// served 0.89 and 0.80 of plain; charged so, none and 0.97-0.98).
//
// (That was the cap for every policy until this commit: on the 7B/0.5B pair of issue
// 18, whose confidences say little, rounds drafted as deep as the cap, 16 before the
// verify sizes were measured, and the simulated pair lost 6-11% to the best static
// depth; docs/perf-plugins.md, "The cap".)
func (a *Adaptive) capDepth() int {
	d := a.cur
	step, ok := a.steps.min()
	if !ok {
		return d
	}
	reach := a.reach()
	if a.p.Calibrate <= 0 {
		h, top := 1+a.p.Hysteresis, a.opt[a.cur]
		for e := d + 1; e < len(a.opt); e++ {
			if a.opt[e]*h >= top {
				d = e
			}
		}
		return d
	}
	rate := a.mean[a.cur]
	for _, m := range a.mean[1:min(len(a.mean), reach+1)] {
		rate = max(rate, m)
	}
	pass, chain := a.passAccept(), 1.0
	for e := 1; e < len(a.mean) && e <= reach+1 && e+1 < len(a.est); e++ {
		chain *= pass
		if e <= a.cur {
			continue
		}
		row := atLeast((a.est[e+1]-a.est[a.cur+1])/float64(e-a.cur), 0)
		if chain < rate*(float64(max(a.seqs, 1))*step+row) {
			break
		}
		d = e
	}
	return d
}

// reach is one past the deepest depth a round has drafted: exploration climbs from
// there (see choose).
func (a *Adaptive) reach() int {
	for d := len(a.ran) - 2; d >= 0; d-- {
		if a.tried(d) {
			return d + 1
		}
	}
	return 0
}

// passAccept is the calibration's chance that a token drafted at a confidence at or
// above the cut-off is accepted after an accepted prefix: the judged tokens of those
// buckets, with `calibrate` prior tokens spread over them at their middles moved by
// the draft's overall shift (as calibratedCut's priors are).
func (a *Adaptive) passAccept() float64 {
	shift := a.calShift()
	lo := calBucket(a.cut)
	kb := a.p.Calibrate / float64(calBuckets-lo)
	s, w := 0.0, 0.0
	for b := lo; b < calBuckets; b++ {
		s += kb*atMost(atLeast(calMid[b]+shift, 0), 1) + a.hit[b]
		w += kb + a.judged[b]
	}
	return s / w
}

// calShift is the draft's overall shift (see calibratedCut): how far acceptance
// exceeds confidence over every judged token, with calibrate_shift prior tokens of
// none.
func (a *Adaptive) calShift() float64 {
	sk := a.p.CalibrateShift
	if sk <= 0 {
		return 0
	}
	shift, judged := 0.0, sk
	for b := range calBuckets {
		shift += a.hit[b] - a.judged[b]*calMid[b]
		judged += a.judged[b]
	}
	return shift / judged
}

// observe folds one round's outcome into the acceptance and cost estimates.
func (a *Adaptive) observe(o *sdk.RoundOutcome) {
	drafted := clampInt(o.Drafted, 0, sdk.MaxDepthLimit)
	accepted := clampInt(o.Accepted, 0, drafted)
	if o.VerifyNs <= 0 {
		return // nothing measured: not a real round
	}
	a.started = true
	a.scale *= a.p.Relax
	if a.scale < 1e-100 { // fold the scale back into the counts before it underflows
		a.fold()
	}
	// The cut-off stopped the round at position `at` when it drafted fewer than its
	// depth: at the last drafted position when that token was kept, else at the next
	// one, whose draft step ran and whose token was dropped.
	// A round can also end short because the drafter had no more to propose (a drafter
	// plugin that finds nothing to copy, a draft model that cannot follow the sequence):
	// where the cut-off would have kept its token, a last token not under the cut-off
	// (or none) says so, and without a cut-off nothing else can have ended it. That is
	// counted apart (have, out). Where the cut-off drops its token the two cannot be
	// told apart, and both leave the next token undrafted: a stop there.
	steps, at, ranOut := drafted, 0, false
	if drafted < o.Depth {
		switch {
		case a.cut > 0 && a.keepCut:
			// (confidences missing, from a malformed outcome: taken for the cut-off's)
			if drafted > len(o.DraftConf) || drafted > 0 && o.DraftConf[drafted-1] < a.cut {
				at = drafted
			} else {
				ranOut = true
			}
		case a.cut > 0:
			steps++
			at = drafted + 1
		default:
			ranOut = true
		}
	}
	a.grow(steps + 2)
	// (each loop runs over slices of exactly its length: no bounds checks, which cost a
	// jump each in WebAssembly)
	one, forget := 1/a.scale, a.p.Forget
	succ, fail := a.succ[:accepted+1], a.fail[:accepted+1]
	for j := 1; j < len(succ); j++ {
		succ[j] = succ[j]*forget + one
		fail[j] *= forget
	}
	if accepted < drafted {
		j := accepted + 1
		a.succ[j] *= forget
		a.fail[j] = a.fail[j]*forget + one
	}
	// every step passed but the one stopped at, which is the last (at = steps) if any
	passed := steps
	if at > 0 {
		passed--
	}
	pass, stop := a.pass[:passed+1], a.stop[:passed+1]
	for j := 1; j < len(pass); j++ {
		pass[j] = pass[j]*forget + one
		stop[j] *= forget
	}
	if at > 0 {
		a.stop[at] = a.stop[at]*forget + one
		a.pass[at] *= forget
	}
	if ranOut {
		have := a.have[:drafted+1]
		for j := 1; j < len(have); j++ {
			have[j] = have[j]*forget + one
			a.out[j] *= forget
		}
		a.out[drafted+1] = a.out[drafted+1]*forget + one
		a.have[drafted+1] *= forget
	}
	if a.p.Calibrate > 0 { // the calibration (see calibratedCut)
		conf := o.DraftConf[:min(len(o.DraftConf), drafted, accepted+1)]
		for k, c := range conf {
			b := calBucket(c)
			a.judged[b]++
			if k < accepted {
				a.hit[b]++
				if k+1 < len(conf) {
					a.followed++
					if k+1 < accepted {
						a.both++
					}
				}
			}
		}
	}
	if steps > 0 && o.DraftNs > 0 {
		a.steps.push(float64(o.DraftNs) / float64(steps))
	}
	a.rounds++
	nt := drafted + 1
	a.ran[nt] = true
	// The forward's rows: this sequence's and the other sequences' of the batch (a
	// host before ABI v1.3 says nothing: a forward of this sequence alone).
	total, seqs := nt, 1
	if o.BatchRows > nt && o.BatchSeqs > 1 {
		total, seqs = min(o.BatchRows, maxBatchRows), min(o.BatchSeqs, maxBatchSeqs)
	}
	if total-nt != a.others || seqs != a.seqs {
		a.others, a.seqs, a.estFresh = total-nt, seqs, false
	}
	a.growRows(total + 1)
	if a.verify[total].push(float64(o.VerifyNs)) {
		a.estFresh = false
	}
	if a.seen[total] < a.rounds-a.staleAfter() {
		a.estFresh = false // an estimate that had gone stale is fresh again
	}
	a.seen[total] = a.rounds
}

// fold multiplies the scale into the counts.
func (s *drafterState) fold() {
	for j := range s.succ {
		s.succ[j] *= s.scale
		s.fail[j] *= s.scale
		s.pass[j] *= s.scale
		s.stop[j] *= s.scale
		s.have[j] *= s.scale
		s.out[j] *= s.scale
	}
	s.scale = 1
}

func (a *Adaptive) grow(n int) {
	for len(a.succ) < n {
		a.succ = append(a.succ, 0)
		a.fail = append(a.fail, 0)
		a.pass = append(a.pass, 0)
		a.stop = append(a.stop, 0)
		a.have = append(a.have, 0)
		a.out = append(a.out, 0)
	}
	for len(a.ran) < n {
		a.ran = append(a.ran, false)
	}
	a.growRows(n)
}

// score fills a.mean and a.opt with the expected tokens per ns of every depth
// 0..bound: with posterior-mean acceptances, and with acceptances raised by `optimism`
// standard deviations.
//
// Under an early-exit cut-off a round of depth d may draft fewer tokens: g_j, the
// chance that the cut-off lets drafting go on past a draft step at position j, comes
// from the pass/stop counts (a position never stopped at scores g = 1). Then token k
// is drafted with chance P_k = Π_{j<k} g_j when a token under the cut-off is kept, or
// Π_{j≤k} g_j when it is dropped, and
//
//	tokens(d) = 1 + Σ_{k≤d} P_k·Π_{j≤k} a_j
//	cost(d)   = step·Σ_{k≤d} Π_{j<k} g_j + Σ_n P(n drafted)·verify(n+1)
func (a *Adaptive) score(bound int) {
	a.grow(bound + 2)
	if !a.estFresh || len(a.est) != bound+2 || a.estOthers != a.others || a.estSeqs != a.seqs ||
		a.rounds&31 == 0 { // (every 32 rounds: measurements go stale)
		a.verifyEstimates(bound + 1)
	}
	step, ok := a.steps.min()
	if !ok {
		step = 0
	}
	a.mean = resize(a.mean, bound+1)
	a.opt = resize(a.opt, bound+1)
	// all of one length, so the loop has no bounds checks
	mean, opt, est := a.mean, a.opt[:len(a.mean)], a.est[:len(a.mean)]
	est1 := a.est[1 : len(mean)+1] // est1[d] = est[d+1]
	succ, fail := a.succ[:len(mean)], a.fail[:len(mean)]
	pass, stop := a.pass[:len(mean)], a.stop[:len(mean)]
	have, out := a.have[:len(mean)], a.out[:len(mean)]
	k, scale, optimism, keep := a.p.PriorStrength, a.scale, a.p.Optimism, a.keepCut

	prior := a.p.PriorMean // chained: position j's prior is centred on position j-1's mean
	gPrior := 1.0          // likewise for the cut-off's pass rate
	tokM, tokO, accM, accO := 1.0, 1.0, 1.0, 1.0
	run := 1.0    // chance that the draft step at position d runs
	kept := 1.0   // chance that token d is drafted (P_d; 1 for d = 0)
	steps := 0.0  // expected draft steps of a round of depth d
	verify := 0.0 // Σ_{n<d} P(exactly n drafted)·verify(n+1)
	perCost := 1 / atLeast(steps*step+verify+kept*est1[0], 1)
	mean[0], opt[0] = tokM*perCost, tokO*perCost
	for d := 1; d < len(mean); d++ {
		s, f := succ[d]*scale, fail[d]*scale
		inv := 1 / (k + s + f)
		m := (k*prior + s) * inv
		// the bonus fades with evidence faster than the standard deviation does, so
		// it explores untried positions without inflating well-observed deep ones
		sd := math.Sqrt(m * (1 - m) / (k + s + f + 1))
		bonus := optimism * sd * k * inv
		prior = m
		accM *= m
		accO *= atMost(m+bonus, 1)

		ps, st := pass[d]*scale, stop[d]*scale
		g := (k*gPrior + ps) / (k + ps + st)
		gPrior = g
		// the chance that the drafter has a token at d (1, bit for bit, for a draft
		// model, which never runs out)
		hv := have[d] * scale
		run *= (k + hv) / (k + hv + out[d]*scale)
		prev := kept
		steps += run
		if keep {
			kept = run
		} else {
			kept = run * g
		}
		run *= g
		verify += (prev - kept) * est[d]
		tokM += kept * accM
		tokO += kept * accO
		perCost = 1 / atLeast(steps*step+verify+kept*est1[d], 1)
		mean[d], opt[d] = tokM*perCost, tokO*perCost
	}
}

// choose returns the depth for the next round: the depth with the best optimistic score,
// if its gain over the current depth exceeds the hysteresis margin, or if it is better
// in expectation than the current depth is even optimistically; else the current depth.
func (a *Adaptive) choose(bound int) int {
	a.score(bound)
	if a.cur > bound {
		a.cur = bound
	}
	// Depths deeper than one past the deepest measured are not candidates yet: an
	// untried depth scores on optimism, and a deep probe is the costliest round there
	// is, so exploration climbs one depth at a time.
	reach := a.reach()
	best, top := 0, a.opt[0]
	for d, v := range a.opt[:min(len(a.opt), reach+1)] {
		if v > top {
			best, top = d, v
		}
	}
	if a.opt[best] > a.opt[a.cur]*(1+a.p.Hysteresis) {
		return best
	}
	// Better in expectation than the current depth even optimistically: switch without
	// the hysteresis — into depth 0 only by `park_margin`: depth 0 observes no
	// acceptance, so a policy that parks there on a close call cannot see it come back.
	if best != 0 && a.mean[best] > a.opt[a.cur] {
		return best
	}
	if best == 0 && a.mean[0] > a.opt[a.cur]*(1+a.parkMargin()) {
		return best
	}
	// A depth never run scores on optimism alone; the hysteresis guards against flapping
	// between measured depths, so it does not hold back the first try of a new one.
	if best != a.cur && !a.tried(best) {
		return best
	}
	// Depth 0 observes no acceptance at all, so staying there is not a stable choice
	// but a blind one: leave it whenever another depth scores better optimistically.
	if a.cur == 0 && a.opt[best] > a.opt[0] {
		return best
	}
	return a.cur
}

// parkMargin is how much better depth 0 must score before the policy parks there:
// park_margin while position 1 is little observed, shrinking as its evidence grows
// (park_margin·k/(k+n), n the discounted observations of position 1, k the prior
// strength). The margin guards against parking on a few unlucky early rounds, since
// depth 0 observes nothing; once position 1 has been rejected round after round, the
// evidence is in, probes (probeFromZero) watch for the draft agreeing again, and a
// full margin would keep the policy drafting a token a round that is nearly never
// accepted, for good (up to park_margin slower than plain decoding).
func (a *Adaptive) parkMargin() float64 {
	if len(a.succ) < 2 {
		return a.p.ParkMargin
	}
	k := a.p.PriorStrength
	return a.p.ParkMargin * k / (k + (a.succ[1]+a.fail[1])*a.scale)
}

// tried reports whether a round of depth d has been measured (a verify of d+1 rows).
func (a *Adaptive) tried(d int) bool { return a.ran[d+1] }

// String describes the policy's parameters (for logs).
func (a *Adaptive) String() string {
	return fmt.Sprintf("adaptive(draft_max=%d hysteresis=%.2f window=%d)", a.p.DraftMax, a.p.Hysteresis, a.p.Window)
}

// atLeast is max(x, lo) and atMost min(x, hi), NaN and signed zeros included, for a
// lo other than -0 and a hi other than +0, neither NaN. Compiled to WebAssembly, the
// float min and max builtins are calls into the runtime; these are a comparison.
func atLeast(x, lo float64) float64 {
	if x <= lo {
		return lo
	}
	return x
}

func atMost(x, hi float64) float64 {
	if x >= hi {
		return hi
	}
	return x
}

func resize(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}
