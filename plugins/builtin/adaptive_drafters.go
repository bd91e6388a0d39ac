package builtin

import "github.com/minfer/minfer/sdk"

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
	n := min(max(last.Drafters, len(a.states), 1), sdk.MaxDrafters)
	a.ensure(n)
	ran := min(max(last.Drafter, 0), n-1)
	a.use(ran)
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
			a.relaxOthers(ran)
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
	for j := range n {
		a.use(j)
		if !a.started {
			a.cur = min(a.p.Start, bound)
			if untried < 0 {
				untried = j
			}
		} else {
			a.cur = a.choose(bound)
			a.probeFromZero(bound)
			scores[j] = a.mean[a.cur]
		}
		a.cutOff()
		decs[j] = a.decision()
		decs[j].Drafter = j
	}
	best := untried // a drafter not tried yet: its round is the one that tells
	if best < 0 {
		best = 0
		for j := range n {
			if scores[j] > scores[best] {
				best = j
			}
		}
		// The drafter that drafted the last round keeps the next unless another scores
		// more than the hysteresis better. A plain round keeps nothing: the engine tells
		// it as drafter 0's (the draft model's), which would favour the model after
		// every plain round.
		if last.Depth > 0 && ran < n && scores[ran]*(1+a.p.Hysteresis) >= scores[best] {
			best = ran
		}
		best = a.probeDrafter(best, n)
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
		a.use(j)
		if j != best {
			a.probed = false
		}
	}
	a.use(best)
	dec := decs[best]
	if dec.Depth == 0 {
		dec.Drafter = 0
	}
	return dec
}

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

// probeDrafter gives the round to a drafter that the scores pass over when it has
// waited its probe gap (the longest-waiting one): its evidence is not renewed while it
// waits, and a drafter plugin's worth changes with the text (it pays only where the
// output copies). The gap starts at `probe` rounds, doubles after each probe that does
// not win the drafter the next round by its score, and starts over when it does.
func (a *Adaptive) probeDrafter(best, n int) int {
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
		if q := a.ds[j]; j != best && q.lost < drafterProbeGiveUp && q.since >= q.gap && (probe < 0 || q.since > a.ds[probe].since) {
			probe = j
		}
	}
	if probe < 0 {
		return best
	}
	a.ds[probe].probed = true
	return probe
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
