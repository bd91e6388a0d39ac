package builtin

import (
	"context"
	"fmt"

	"github.com/minfer/minfer/sdk"
)

// Static always drafts the same depth.
//
// Params: depth (default 4), min_conf (default 0), keep_cut (default false: the token
// under min_conf is dropped, as llama.cpp's p_min does; true keeps it as the last draft),
// draft_max (default 0 = no cap beyond the engine's bound).
type Static struct {
	depth   int
	minConf float32
	keepCut bool
}

var _ sdk.DepthPolicy = (*Static)(nil)

// NewStatic builds a static policy from JSON params.
func NewStatic(params []byte) (*Static, error) {
	p := struct {
		Depth    int     `json:"depth"`
		MinConf  float64 `json:"min_conf"`
		KeepCut  bool    `json:"keep_cut"`
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
	return &Static{depth: p.Depth, minConf: float32(p.MinConf), keepCut: p.KeepCut}, nil
}

// NextDepth returns the configured depth, capped by the round's bound.
func (s *Static) NextDepth(_ context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	d := s.depth
	if last.MaxDepth > 0 || last.Round >= 0 {
		d = min(d, last.MaxDepth)
	}
	return sdk.DepthDecision{Depth: d, MinConf: s.minConf, KeepCut: s.keepCut}, nil
}
