// Command process-plugin is an example out-of-process minfer plugin: a draft-depth
// policy that steps the depth up while the draft is mostly accepted and down while it
// is mostly rejected. See README.md for building and configuring it.
package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/minfer/minfer/sdk"
	"github.com/minfer/minfer/sdk/process"
)

func main() {
	process.Serve(process.Plugins{
		Name:    "step",
		Version: "1.0.0",
		// The keys of stepParams: minfer then passes only the [spec] settings among
		// them and refuses a misspelt key in [plugins.NAME] params, naming it.
		Params:         []string{"start", "min", "draft_max", "up", "down", "window", "min_conf"},
		ParamsDeclared: true,
		Policy: func(params []byte) (sdk.DepthPolicy, error) {
			return newStep(params)
		},
	})
}

// stepParams are the policy's settings: the [plugins.NAME] params table of minfer.toml,
// plus draft_max and min_conf which minfer passes from [spec].
type stepParams struct {
	Start    int     `json:"start"`     // depth of the first round
	Min      int     `json:"min"`       // lowest depth (0 allows plain decoding)
	DraftMax int     `json:"draft_max"` // highest depth
	Up       float64 `json:"up"`        // step up when the acceptance rate is at least this
	Down     float64 `json:"down"`      // step down when it is below this
	Window   int     `json:"window"`    // rounds the acceptance rate is measured over
	MinConf  float32 `json:"min_conf"`  // passed on: stop drafting below this confidence
}

// step is one sequence's policy state.
type step struct {
	p     stepParams
	depth int
	// drafted[i], accepted[i] of the last Window rounds that drafted anything (a ring).
	drafted, accepted []int
	next              int
}

func newStep(params []byte) (*step, error) {
	p := stepParams{Start: 4, Min: 1, DraftMax: 16, Up: 0.8, Down: 0.4, Window: 4}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, fmt.Errorf("step: params: %w", err)
	}
	switch {
	case p.Min < 0 || p.Min > p.DraftMax:
		return nil, fmt.Errorf("step: params: min %d: want 0 ≤ min ≤ draft_max (%d)", p.Min, p.DraftMax)
	case p.Start < p.Min || p.Start > p.DraftMax:
		return nil, fmt.Errorf("step: params: start %d: want min (%d) ≤ start ≤ draft_max (%d)", p.Start, p.Min, p.DraftMax)
	case p.Window < 1:
		return nil, fmt.Errorf("step: params: window %d: want ≥ 1", p.Window)
	case !(p.Down <= p.Up):
		return nil, fmt.Errorf("step: params: down %g above up %g", p.Down, p.Up)
	}
	return &step{p: p, depth: p.Start, drafted: make([]int, 0, p.Window), accepted: make([]int, 0, p.Window)}, nil
}

// NextDepth records the last round and moves the depth by at most one.
func (s *step) NextDepth(ctx context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	if last.Round >= 0 && last.Drafted > 0 {
		s.record(last.Drafted, last.Accepted)
		if rate := s.rate(); rate >= s.p.Up {
			s.depth++
		} else if rate < s.p.Down {
			s.depth--
		}
	}
	hi := s.p.DraftMax
	if last.MaxDepth > 0 && last.MaxDepth < hi {
		hi = last.MaxDepth
	}
	s.depth = max(s.p.Min, min(s.depth, hi))
	return sdk.DepthDecision{Depth: s.depth, MinConf: s.p.MinConf}, ctx.Err()
}

func (s *step) record(drafted, accepted int) {
	if len(s.drafted) < s.p.Window {
		s.drafted = append(s.drafted, drafted)
		s.accepted = append(s.accepted, accepted)
		return
	}
	s.drafted[s.next], s.accepted[s.next] = drafted, accepted
	s.next = (s.next + 1) % s.p.Window
}

// rate is accepted / drafted over the window.
func (s *step) rate() float64 {
	var d, a int
	for i := range s.drafted {
		d += s.drafted[i]
		a += s.accepted[i]
	}
	return float64(a) / float64(d)
}
