package plugins

import (
	"context"
	"fmt"
	"io"

	"github.com/minfer/minfer/sdk"
)

// fallbackPolicy is [spec] fallback (Roles builds it): each round's depth comes from the configured
// policy until that plugin fails (a trap, a timeout, an error), then from the fallback
// policy for the rest of the request, with one line on log saying so. A cancelled
// request is not a plugin failure: its error is returned as is.
type fallbackPolicy struct {
	sdk.DepthPolicy // the configured policy
	fallback        sdk.DepthPolicy
	name, fbName    string
	log             io.Writer
	failed          bool
}

func (p *fallbackPolicy) NextDepth(ctx context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	if !p.failed {
		d, err := p.DepthPolicy.NextDepth(ctx, last)
		if err == nil || ctx.Err() != nil {
			return d, err
		}
		p.failed = true
		if p.log != nil {
			fmt.Fprintf(p.log, "minfer: depth policy %q failed, using [spec] fallback %q for the rest of the request: %v\n", p.name, p.fbName, err)
		}
	}
	d, err := p.fallback.NextDepth(ctx, last)
	if err != nil {
		return d, fmt.Errorf("fallback policy %q: %w", p.fbName, err)
	}
	return d, nil
}
