package builtin

import (
	"math"

	"github.com/minfer/minfer/sdk"
)

// Where the sequence offers several drafters (RoundOutcome.Drafters > 1: a draft model
// and drafter plugins, or several plugins), the adaptive policy keeps what it learns
// per drafter — the acceptance by position, where drafting stops, the draft cost per
// token, the calibration of its confidences, its depth and its probes — and shares
// only the target's verify cost by rows. Each round it decides, for every drafter, the
// depth and cut-off it would decide for it alone, and gives the round to the drafter
// whose choice scores the most expected tokens per second (in expectation: the
// optimism that explores depths within a drafter would favour the drafter whose
// estimates are least settled), keeping the drafter that drafted the last round unless
// another scores more than `hysteresis` better (after a plain round, none: the best
// choice wins). A drafter not tried yet gets the next round;
// one passed over is probed now and then (probeDrafter). Every drafter's evidence relaxes every round, so one that lost long
// ago is tried again. With one drafter the policy is exactly the single-drafter one.

// use makes drafter j's state the current one (saving the current one's).
func (a *Adaptive) use(j int) {
	if j == a.active {
		return
	}
	a.states[a.active] = a.drafterState
	a.drafterState, a.active = a.states[j], j
}

// ensure makes room for n drafters' states; the current state is drafter 0's when the
// policy has run with one drafter so far.
func (a *Adaptive) ensure(n int) {
	if len(a.states) == 0 {
		a.states, a.active = []drafterState{a.drafterState}, 0
	}
	for len(a.states) < n {
		a.states = append(a.states, newDrafterState(a.p))
	}
	for len(a.ds) < n {
		a.ds = append(a.ds, drafterProbe{gap: a.p.Probe})
	}
}

// nextDrafter is NextDepth with several drafters.
func (a *Adaptive) nextDrafter(last *sdk.RoundOutcome, bound int) sdk.DepthDecision {
	// states: drafter j's at j, and its state for short offers at j+n (see below)
	n := min(max(last.Drafters, len(a.states)/2, 1), sdk.MaxDrafters)
	a.ensure(2 * n)
	ran := min(max(last.Drafter, 0), n-1)
	vran := ran
	if a.lastShort {
		vran += n // the last round drafted a short offer
	}
	a.use(vran)
	if a.probed {
		if last.Round >= 0 && last.Accepted > 0 {
			a.gap = a.p.Probe
		}
		a.probed = false
	}
	if last.Round >= 0 {
		before := a.started
		a.observe(last)
		if a.started && last.VerifyNs > 0 {
			a.relaxOthers(vran)
		} else {
			a.started = before
		}
	} else if a.anyStarted() {
		for j := range a.states {
			a.use(j)
			if a.started {
				a.newRequest()
			}
		}
	}
	if last.Drafters > 0 {
		n = min(n, last.Drafters) // drafters the sequence offers now
	}
	decs := make([]sdk.DepthDecision, n)
	scores := make([]float64, n)
	untried := -1
	// zero[j]: drafter j's own policy parked at depth 0 probes this round (probeFromZero),
	// with its probe schedule as it was before (restored when another gets the round)
	zero := make([]bool, n)
	sched := make([][2]int, n)
	ceil := make([]float64, n) // the rate of a fully accepted draft (see ceiling)
	cheap := make([]bool, n)   // a draft step under cheapStep of a plain round
	// With the drafters' offers (RoundOutcome.Offered, ABI v1.4) a drafter plugin that
	// offers nothing cannot draft this round: it scores below any round, is not tried
	// or probed, and no probe is needed to learn that it has something again. One that
	// offers fewer than shortOffer tokens is judged by a state of its own (index j+n):
	// a fragment of a few tokens (a short repeat of the prompt) is accepted far less
	// often than a copied passage, and one estimate of both would price the one by
	// the other.
	offers := len(last.Offered) == n
	off := func(j int) bool { return offers && last.Offered[j] == 0 }
	v := func(j int) int {
		if offers && last.Offered[j] > 0 && last.Offered[j] < shortOffer {
			return j + n
		}
		return j
	}
	for j := range n {
		a.use(v(j))
		if off(j) {
			scores[j], ceil[j] = -1, -1
			decs[j] = sdk.DepthDecision{Drafter: j}
			continue
		}
		if !a.started {
			a.cur = min(a.p.Start, bound)
			if untried < 0 {
				untried = j
			}
		} else {
			sched[j] = [2]int{a.parked, a.gap}
			a.cur = a.choose(bound)
			a.probeFromZero(bound)
			zero[j] = a.probed
			scores[j] = a.mean[a.cur]
			ceil[j] = a.ceiling(bound)
			step, ok := a.steps.min()
			cheap[j] = ok && len(a.est) > 1 && step*cheapStep <= a.est[1]
		}
		a.cutOff()
		decs[j] = a.decision()
		decs[j].Drafter = j
		if offers && last.Offered[j] > 0 {
			decs[j].Depth = min(decs[j].Depth, last.Offered[j]) // (it drafts no more)
		}
	}
	best := untried // a drafter not tried yet: its round is the one that tells
	if best < 0 {
		best = 0
		for off(best) && best < n-1 {
			best++ // (a drafter with something to offer, where one has)
		}
		for j := range n {
			if scores[j] > scores[best] {
				best = j
			}
		}
		// The drafter that drafted the last round keeps the next unless another scores
		// more than the hysteresis better. A round that drafted nothing keeps nothing:
		// a plain round is told as drafter 0's (the draft model's), which would favour
		// the model after every plain round, and a drafter plugin that found nothing
		// to copy held its rounds by the hysteresis while its score fell, some 150
		// rounds after a copied passage ended (TestAdaptiveDrafters, CPU costs).
		if last.Drafted > 0 && ran < n && scores[ran]*(1+a.p.Hysteresis) >= scores[best] {
			best = ran
		}
		best = a.probeFromZeros(best, zero, scores, ceil, decs[best].Depth > 0)
		if !zero[best] {
			chosen := best
			best = a.probeDrafter(best, ceil, scores, cheap)
			if best != chosen && decs[best].Depth == 0 && bound > 0 {
				// a probe of a drafter parked at depth 0: a round of depth 1 that keeps
				// its token, as its own probe from there would be
				a.use(v(best))
				a.score(bound)
				a.cur, a.parked, a.probed = 1, 0, true
				a.cutOff()
				decs[best] = a.decision()
				decs[best].Drafter = best
			}
		}
	}
	for j := range n {
		if j == best {
			a.ds[j].since = 0
		} else {
			a.ds[j].since++
		}
	}
	// a probe decided for a drafter that does not get the round did not happen
	for j := range n {
		a.use(v(j))
		if j != best && a.probed {
			a.probed = false
			a.parked, a.gap = sched[j][0], sched[j][1]
		}
	}
	a.use(v(best))
	a.lastShort = v(best) != best
	dec := decs[best]
	if dec.Depth == 0 {
		dec.Drafter = 0
	}
	return dec
}

// shortOffer: offers of fewer tokens are judged apart from longer ones (see
// nextDrafter). In simulation of the drafter bed (TestAdaptiveHybridOffers) one state
// for every offer made the pair 0.959-0.968 of the suffix drafter alone at this CPU's
// costs, where a verify row costs a third of a round and the fragments' rows do not
// pay; with the split, 0.977-1.005 (3 seeds).
const shortOffer = 4

// drafterProbeMax caps the gap between probes of a drafter that is not chosen: a
// drafter plugin's probe costs about a plain round where it finds nothing, and its
// evidence goes stale (a request starts copying) while it is not asked.
const drafterProbeMax = 64

// drafterProbeGiveUp is the number of probes in a row a drafter may lose before the
// request stops probing it: a draft model's first round after others drafted catches
// up with every token since, so keeping a model that does not pay in play costs its
// catch-up of the whole request however rarely it is probed (4% of the time in
// TestAdaptiveDrafters' CPU regime). Six losses take some 120 rounds of gaps.
const drafterProbeGiveUp = 6

// A drafter whose draft step costs at most 1/cheapStep of a plain round is cheap (a
// drafter plugin: 1-10 µs a call beside a verify of 0.2-1.5 ms); a draft model is not
// (a third of a target step on the H200 bed), and its first round after others' also
// catches up with every token they emitted. A probe of a cheap drafter waits its gap
// times the share of a round's expected rate it is expected to give up, over
// cheapProbeLoss (all of the gap from that share up): the suffix drafter beside a draft
// model on prose is worth some 15% less a round until the text repeats, and from then
// on several times more, so it is asked every few rounds, not every 64.
const (
	cheapStep      = 16
	cheapProbeLoss = 0.25
)

// probeDrafter gives the round to a drafter that the scores pass over when it has
// waited its probe gap (the longest-waiting one): its evidence is not renewed while it
// waits, and a drafter plugin's worth changes with the text (it pays only where the
// output copies). The gap starts at `probe` rounds, doubles after each probe that does
// not win the drafter the next round by its score, and starts over when it does.
func (a *Adaptive) probeDrafter(best int, ceil, scores []float64, cheap []bool) int {
	n := len(ceil)
	for j := range n {
		q := &a.ds[j]
		if q.probed {
			q.probed = false
			if j == best {
				q.gap, q.lost = a.p.Probe, 0
				continue
			}
			q.gap = min(2*q.gap, drafterProbeMax)
			q.lost++
		}
	}
	if a.p.Probe == 0 {
		return best
	}
	probe := -1
	for j := range n {
		q := a.ds[j]
		if j == best || !(ceil[j] > scores[best]) || q.lost >= drafterProbeGiveUp {
			continue
		}
		wait := q.gap
		if cheap[j] && scores[best] > 0 {
			// a cheap drafter's probe costs only the share of the round it gives up
			loss := atMost(atLeast(1-scores[j]/scores[best], 0), 1)
			wait = max(1, int(float64(q.gap)*atMost(loss/cheapProbeLoss, 1)))
		}
		if q.since >= wait && (probe < 0 || q.since > a.ds[probe].since) {
			probe = j
		}
	}
	if probe < 0 {
		return best
	}
	a.ds[probe].probed = true
	return probe
}

// probeFromZeros gives the round to a drafter whose own policy, parked at depth 0,
// probes from there this round (probeFromZero), whatever the other drafters score: a
// drafter plugin parked where it found nothing to copy learns that the text now
// repeats only by such a probe, and its probe's score (depth 1 where it has parked)
// is below the plain round's that every other parked drafter scores, and below any
// drafting one's, so compared on scores it would never run (issue 22: both drafters
// parked for whole requests on the CPU, and on the H200 the suffix drafter was not
// asked while the draft model drafted through text that the target repeated). A
// probe's cost is bounded by its own schedule: its gap doubles after every probe that
// finds nothing. Against a drafting round (drafts) only a drafter whose ceiling beats
// that round's expected rate probes. Of several probes the best-scoring one runs; the
// others wait.
func (a *Adaptive) probeFromZeros(best int, zero []bool, scores, ceil []float64, drafts bool) int {
	if zero[best] {
		return best
	}
	probe := -1
	for j, z := range zero {
		if z && (!drafts || ceil[j] > scores[best]) && (probe < 0 || scores[j] > scores[probe]) {
			probe = j
		}
	}
	if probe < 0 {
		return best
	}
	return probe
}

// ceiling is the current drafter's rate, in tokens per ns, were its every token
// accepted, at its measured draft step and the verify estimates (+Inf before its step
// is measured): a drafter whose ceiling is below another's expected rate cannot win
// the round whatever its acceptance has become, so probing it would only cost (a
// draft model beside the suffix drafter on copied text).
func (a *Adaptive) ceiling(bound int) float64 {
	step, ok := a.steps.min()
	if !ok {
		return math.Inf(1)
	}
	c := 0.0
	for d := 1; d <= bound && d+1 < len(a.est); d++ {
		c = max(c, float64(d+1)/atLeast(float64(d)*step+a.est[d+1], 1))
	}
	return c
}

// drafterProbe is the probing state of one drafter (see probeDrafter).
type drafterProbe struct {
	since  int  // rounds since it last drafted
	gap    int  // rounds it waits before a probe
	probed bool // its last round was a probe
	lost   int  // probes lost in a row
}

// anyStarted reports whether some drafter's round has been observed.
func (a *Adaptive) anyStarted() bool {
	for j := range a.states {
		if j == a.active && a.started || j != a.active && a.states[j].started {
			return true
		}
	}
	return false
}

// relaxOthers relaxes the evidence of every drafter but ran by one round's `relax`, as
// observe does ran's, so that a drafter not chosen for long is tried again.
func (a *Adaptive) relaxOthers(ran int) {
	for j := range a.states {
		if j == ran {
			continue
		}
		s := &a.states[j]
		s.scale *= a.p.Relax
		if s.scale < 1e-100 {
			s.fold()
		}
	}
}
