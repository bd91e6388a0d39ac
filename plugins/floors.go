package plugins

import (
	"context"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/sdk"
)

// Floors are the config's [spec] bounds the host applies to every depth policy's
// decision, built in or not, so that a policy need not read them from its params
// (sdk/ABI.md, "What the host applies"): a round that drafts drafts at least DraftMin
// tokens (the engine then clamps to max_depth), and its cut-off is at least MinConf,
// with KeepCut set when the config asks for it. The zero value changes nothing.
type Floors struct {
	DraftMin int     // [spec] draft_min; 0 = off
	MinConf  float32 // [spec] min_conf; 0 = off
	KeepCut  bool    // [spec] keep_cut
}

// SpecFloors are the floors of cfg's [spec].
func SpecFloors(cfg *config.Config) Floors {
	return Floors{DraftMin: cfg.Spec.DraftMin, MinConf: float32(cfg.Spec.MinConf), KeepCut: cfg.Spec.KeepCut}
}

// Apply returns d with the floors applied.
func (f Floors) Apply(d sdk.DepthDecision) sdk.DepthDecision {
	if d.Depth > 0 && d.Depth < f.DraftMin {
		d.Depth = f.DraftMin
	}
	d.MinConf = max(d.MinConf, f.MinConf)
	if f.KeepCut {
		d.KeepCut = true
	}
	return d
}

// WithFloors wraps p so that every decision it returns has f applied; with zero
// floors it returns p itself.
func WithFloors(p sdk.DepthPolicy, f Floors) sdk.DepthPolicy {
	if f == (Floors{}) {
		return p
	}
	return &flooredPolicy{DepthPolicy: p, floors: f}
}

type flooredPolicy struct {
	sdk.DepthPolicy
	floors Floors
}

func (p *flooredPolicy) NextDepth(ctx context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	d, err := p.DepthPolicy.NextDepth(ctx, last)
	if err != nil {
		return d, err
	}
	return p.floors.Apply(d), nil
}

// SetPrompt passes the request's prompt on to a policy that wants it.
func (p *flooredPolicy) SetPrompt(ids []int32) {
	if sp, ok := p.DepthPolicy.(interface{ SetPrompt([]int32) }); ok {
		sp.SetPrompt(ids)
	}
}
