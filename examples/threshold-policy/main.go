// Command threshold-policy is an example minfer depth policy: acceptance-threshold
// stepping. After each round it looks at the fraction of drafted tokens the target
// accepted: at or above `up` it drafts `step` deeper, at or below `down` it drafts `step`
// shallower, in between it keeps the depth. It never goes below `min` nor above the
// engine's bound (and `draft_max`).
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o threshold.wasm ./examples/threshold-policy
package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/minfer/minfer/sdk"
	"github.com/minfer/minfer/sdk/guest"
)

// Threshold is the policy; its exported fields are its params.
type Threshold struct {
	Start    int     `json:"start"`     // depth of the first round
	Step     int     `json:"step"`      // depth change per round
	Up       float64 `json:"up"`        // acceptance at or above which it goes deeper
	Down     float64 `json:"down"`      // acceptance at or below which it goes shallower
	Min      int     `json:"min"`       // smallest depth (0 allows plain decoding)
	DraftMax int     `json:"draft_max"` // largest depth (the config's [spec] draft_max)
	MinConf  float64 `json:"min_conf"`  // early-exit cut-off, passed through

	depth int
}

// New parses params (a JSON object) over the defaults.
func New(params []byte) (sdk.DepthPolicy, error) {
	p := &Threshold{Start: 2, Step: 1, Up: 0.8, Down: 0.4, Min: 1, DraftMax: 16}
	if err := json.Unmarshal(params, p); err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	switch {
	case p.Step < 1:
		return nil, fmt.Errorf("params: step %d, want ≥ 1", p.Step)
	case !(p.Down <= p.Up):
		return nil, fmt.Errorf("params: down %v above up %v", p.Down, p.Up)
	case p.Min < 0 || p.Start < p.Min || p.DraftMax < p.Min:
		return nil, fmt.Errorf("params: want 0 ≤ min ≤ start and min ≤ draft_max")
	}
	p.depth = p.Start
	return p, nil
}

// NextDepth steps the depth by the last round's acceptance.
func (p *Threshold) NextDepth(_ context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	if last.Round >= 0 && last.Drafted > 0 {
		rate := float64(last.Accepted) / float64(last.Drafted)
		switch {
		case rate >= p.Up:
			p.depth += p.Step
		case rate <= p.Down:
			p.depth -= p.Step
		}
	}
	bound := p.DraftMax
	if last.Round >= 0 || last.MaxDepth > 0 {
		bound = min(bound, last.MaxDepth)
	}
	p.depth = max(p.Min, min(p.depth, bound))
	return sdk.DepthDecision{Depth: p.depth, MinConf: float32(p.MinConf)}, nil
}

func init() {
	guest.RegisterPolicy("threshold", "1.0.0", New)
	// The keys of Params (ABI v1.3): minfer passes only the [spec] settings among them
	// (draft_max, min_conf) and refuses a misspelt key in [plugins.NAME] params.
	guest.DeclareParams("threshold", "start", "step", "up", "down", "min", "draft_max", "min_conf")
}

func main() {}
