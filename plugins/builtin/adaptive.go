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
// untried depths inherit what shallower positions show. A depth is scored with each a_j
// raised by `optimism` posterior standard deviations: depths not yet observed score
// optimistically and get tried.
//
// step is the minimum draft time per token over the last `window` drafting rounds, and
// verify(nt) the minimum verify time over the last `window` rounds with nt rows; an nt not
// measured yet is interpolated linearly between measured neighbours, and extrapolated
// flat beyond them (optimistic for deeper depths: they get tried and measured).
//
// The policy keeps its depth unless another scores more than `hysteresis` better. The
// depth never exceeds draft_max nor the round's MaxDepth (the backend's identity bound).
//
// Params (JSON): draft_max (16), min_conf (0; passed through as the early-exit cut-off),
// start (4: the depth of the first round, before anything is measured), hysteresis
// (0.10), window (32), forget (0.95), relax (0.999), prior_mean (0.5), prior_strength
// (2), optimism (1.0).
type Adaptive struct {
	p adaptiveParams

	cur     int  // depth chosen last
	started bool // a round has been observed

	succ, fail []float64 // per position j ≥ 1 (index j), discounted counts
	steps      ring      // draft ns per token
	verify     []ring    // by nt
	est        []float64 // scratch: verify cost by nt
	acc        []float64 // scratch: optimistic a_j
	scores     []float64 // scratch: expected tokens per ns by depth
}

type adaptiveParams struct {
	DraftMax      int     `json:"draft_max"`
	MinConf       float64 `json:"min_conf"`
	Start         int     `json:"start"`
	Hysteresis    float64 `json:"hysteresis"`
	Window        int     `json:"window"`
	Forget        float64 `json:"forget"`
	Relax         float64 `json:"relax"`
	PriorMean     float64 `json:"prior_mean"`
	PriorStrength float64 `json:"prior_strength"`
	Optimism      float64 `json:"optimism"`
}

var _ sdk.DepthPolicy = (*Adaptive)(nil)

// NewAdaptive builds the adaptive policy from JSON params.
func NewAdaptive(params []byte) (*Adaptive, error) {
	p := adaptiveParams{DraftMax: 16, Start: 4, Hysteresis: 0.10, Window: 32, Forget: 0.95,
		Relax: 0.999, PriorMean: 0.5, PriorStrength: 2, Optimism: 1}
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
	} {
		if err := checkRange("adaptive", c.key, c.v, c.lo, c.hi); err != nil {
			return nil, err
		}
	}
	return &Adaptive{p: p, steps: newRing(p.Window)}, nil
}

// NextDepth records the finished round and returns the depth for the next one.
func (a *Adaptive) NextDepth(_ context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	bound := a.p.DraftMax
	if last.Round >= 0 || last.MaxDepth > 0 {
		bound = min(bound, max(last.MaxDepth, 0))
	}
	if last.Round >= 0 {
		a.observe(&last)
	}
	if !a.started {
		a.cur = min(a.p.Start, bound)
		return a.decision(), nil
	}
	best, scores := a.best(bound)
	if a.cur > bound || scores[best] > scores[a.cur]*(1+a.p.Hysteresis) {
		a.cur = best
	}
	return a.decision(), nil
}

func (a *Adaptive) decision() sdk.DepthDecision {
	return sdk.DepthDecision{Depth: a.cur, MinConf: float32(a.p.MinConf)}
}

// observe folds one round's outcome into the acceptance and cost estimates.
func (a *Adaptive) observe(o *sdk.RoundOutcome) {
	drafted := clampInt(o.Drafted, 0, sdk.MaxDepthLimit)
	accepted := clampInt(o.Accepted, 0, drafted)
	if o.VerifyNs <= 0 {
		return // nothing measured: not a real round
	}
	a.started = true
	for j := range a.succ {
		a.succ[j] *= a.p.Relax
		a.fail[j] *= a.p.Relax
	}
	a.grow(drafted + 2)
	for j := 1; j <= accepted; j++ {
		a.succ[j] = a.succ[j]*a.p.Forget + 1
		a.fail[j] *= a.p.Forget
	}
	if accepted < drafted {
		j := accepted + 1
		a.succ[j] *= a.p.Forget
		a.fail[j] = a.fail[j]*a.p.Forget + 1
	}
	if drafted > 0 && o.DraftNs > 0 {
		a.steps.push(float64(o.DraftNs) / float64(drafted))
	}
	a.verify[drafted+1].push(float64(o.VerifyNs))
}

func (a *Adaptive) grow(n int) {
	for len(a.succ) < n {
		a.succ = append(a.succ, 0)
		a.fail = append(a.fail, 0)
	}
	for len(a.verify) < n {
		a.verify = append(a.verify, newRing(a.p.Window))
	}
}

// best scores every depth 0..bound and returns the best and the scores.
func (a *Adaptive) best(bound int) (int, []float64) {
	a.grow(bound + 2)
	est := a.verifyEstimates(bound + 1)
	step, ok := a.steps.min()
	if !ok {
		step = 0
	}
	// optimistic acceptance per position, chained priors
	a.acc = append(a.acc[:0], 0)
	mean := a.p.PriorMean
	for j := 1; j <= bound; j++ {
		s, f, k := a.succ[j], a.fail[j], a.p.PriorStrength
		mean = (k*mean + s) / (k + s + f)
		sd := math.Sqrt(mean * (1 - mean) / (k + s + f + 1))
		a.acc = append(a.acc, math.Min(1, mean+a.p.Optimism*sd))
	}
	a.scores = append(a.scores[:0], make([]float64, bound+1)...)
	scores := a.scores
	best, tokens, reach := 0, 1.0, 1.0
	for d := 0; d <= bound; d++ {
		if d > 0 {
			reach *= a.acc[d]
			tokens += reach
		}
		cost := float64(d)*step + est[d+1]
		scores[d] = tokens / math.Max(cost, 1)
		if scores[d] > scores[best] {
			best = d
		}
	}
	return best, scores
}

// verifyEstimates fills a.est[nt] for nt = 1..maxNT from the measured minima.
func (a *Adaptive) verifyEstimates(maxNT int) []float64 {
	a.est = a.est[:0]
	for nt := 0; nt <= maxNT; nt++ {
		v, ok := a.verify[nt].min()
		if !ok {
			v = math.NaN()
		}
		a.est = append(a.est, v)
	}
	lo := -1 // last measured nt
	for nt := 1; nt <= maxNT; nt++ {
		if !math.IsNaN(a.est[nt]) {
			if lo < 0 { // flat below the first measurement
				for k := 1; k < nt; k++ {
					a.est[k] = a.est[nt]
				}
			} else {
				for k := lo + 1; k < nt; k++ { // linear between measurements
					w := float64(k-lo) / float64(nt-lo)
					a.est[k] = a.est[lo]*(1-w) + a.est[nt]*w
				}
			}
			lo = nt
		}
	}
	for k := max(lo+1, 1); k <= maxNT; k++ { // flat beyond the last
		if lo < 0 {
			a.est[k] = 1
		} else {
			a.est[k] = a.est[lo]
		}
	}
	return a.est
}

// ring keeps the last n values and answers their minimum.
type ring struct {
	v    []float64
	next int
	full bool
}

func newRing(n int) ring { return ring{v: make([]float64, n)} }

func (r *ring) push(x float64) {
	r.v[r.next] = x
	r.next++
	if r.next == len(r.v) {
		r.next, r.full = 0, true
	}
}

func (r *ring) min() (float64, bool) {
	n := r.next
	if r.full {
		n = len(r.v)
	}
	if n == 0 {
		return 0, false
	}
	m := r.v[0]
	for _, x := range r.v[1:n] {
		m = math.Min(m, x)
	}
	return m, true
}

// String describes the policy's parameters (for logs).
func (a *Adaptive) String() string {
	return fmt.Sprintf("adaptive(draft_max=%d hysteresis=%.2f window=%d)", a.p.DraftMax, a.p.Hysteresis, a.p.Window)
}
