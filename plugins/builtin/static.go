package builtin

import (
	"context"
	"fmt"

	"github.com/minfer/minfer/sdk"
)

// Static always drafts the same depth.
//
// Params: depth (default 4), min_conf (default 0), draft_max (default 0 = no cap beyond
// the engine's bound).
type Static struct {
	depth   int
	minConf float32
}

var _ sdk.DepthPolicy = (*Static)(nil)

// NewStatic builds a static policy from JSON params.
func NewStatic(params []byte) (*Static, error) {
	p := struct {
		Depth    int     `json:"depth"`
		MinConf  float64 `json:"min_conf"`
		DraftMax int     `json:"draft_max"`
	}{Depth: 4}
	if err := decodeParams("static", params, &p); err != nil {
		return nil, err
	}
	if p.Depth < 0 || p.Depth > sdk.MaxDepthLimit {
		return nil, fmt.Errorf("static: params: depth = %d, want 0..%d", p.Depth, sdk.MaxDepthLimit)
	}
	if err := checkRange("static", "min_conf", p.MinConf, 0, 1); err != nil {
		return nil, err
	}
	if p.DraftMax > 0 {
		p.Depth = min(p.Depth, p.DraftMax)
	}
	return &Static{depth: p.Depth, minConf: float32(p.MinConf)}, nil
}

// NextDepth returns the configured depth, capped by the round's bound.
func (s *Static) NextDepth(_ context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	d := s.depth
	if last.MaxDepth > 0 || last.Round >= 0 {
		d = min(d, last.MaxDepth)
	}
	return sdk.DepthDecision{Depth: d, MinConf: s.minConf}, nil
}
