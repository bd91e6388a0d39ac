package builtin

import (
	"context"
	"math"

	"github.com/minfer/minfer/sdk"
)

// UCB is a discounted UCB1 bandit over depths 0..draft_max: each depth is an arm whose
// reward is the round's measured throughput, (accepted+1)/(draft+verify time), scaled by
// the best throughput seen so far. Untried depths are played first (shallow to deep);
// then the arm maximising mean + explore·sqrt(ln(total)/n) is played. Counts are
// discounted by `discount` every round so the bandit follows a shifting regime.
//
// It knows nothing about the structure of the problem (acceptance per position, verify
// cost per nt) that Adaptive exploits; it is here as a baseline and an alternative.
//
// Params (JSON): draft_max (16), min_conf (0), explore (0.3), discount (0.995).
type UCB struct {
	p struct {
		DraftMax int     `json:"draft_max"`
		MinConf  float64 `json:"min_conf"`
		Explore  float64 `json:"explore"`
		Discount float64 `json:"discount"`
	}
	n, sum  []float64 // per depth: discounted plays and summed rates
	bestObs float64   // largest rate observed
	cur     int
}

var _ sdk.DepthPolicy = (*UCB)(nil)

// NewUCB builds the bandit policy from JSON params.
func NewUCB(params []byte) (*UCB, error) {
	u := &UCB{}
	u.p.DraftMax, u.p.Explore, u.p.Discount = 16, 0.3, 0.995
	if err := decodeParams("ucb", params, &u.p); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		key       string
		v, lo, hi float64
	}{
		{"draft_max", float64(u.p.DraftMax), 0, sdk.MaxDepthLimit},
		{"min_conf", u.p.MinConf, 0, 1},
		{"explore", u.p.Explore, 0, 100},
		{"discount", u.p.Discount, 0.5, 1},
	} {
		if err := checkRange("ucb", c.key, c.v, c.lo, c.hi); err != nil {
			return nil, err
		}
	}
	u.n = make([]float64, u.p.DraftMax+1)
	u.sum = make([]float64, u.p.DraftMax+1)
	return u, nil
}

// NextDepth records the finished round and plays the next arm.
func (u *UCB) NextDepth(_ context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	bound := u.p.DraftMax
	if last.Round >= 0 || last.MaxDepth > 0 {
		bound = min(bound, max(last.MaxDepth, 0))
	}
	if last.Round >= 0 && last.VerifyNs > 0 && last.Depth >= 0 && last.Depth < len(u.n) {
		rate := float64(clampInt(last.Accepted, 0, last.Depth)+1) / float64(max(last.DraftNs, 0)+last.VerifyNs)
		u.bestObs = math.Max(u.bestObs, rate)
		for d := range u.n {
			u.n[d] *= u.p.Discount
			u.sum[d] *= u.p.Discount
		}
		u.n[last.Depth]++
		u.sum[last.Depth] += rate
	}
	u.cur = u.choose(bound)
	return sdk.DepthDecision{Depth: u.cur, MinConf: float32(u.p.MinConf)}, nil
}

func (u *UCB) choose(bound int) int {
	total := 0.0
	for d := 0; d <= bound; d++ {
		if u.n[d] < 1e-9 {
			return d // untried arm
		}
		total += u.n[d]
	}
	best, bestScore := 0, math.Inf(-1)
	for d := 0; d <= bound; d++ {
		mean := u.sum[d] / u.n[d] / u.bestObs
		s := mean + u.p.Explore*math.Sqrt(math.Log(total+1)/u.n[d])
		if s > bestScore {
			best, bestScore = d, s
		}
	}
	return best
}
