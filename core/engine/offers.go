package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/minfer/minfer/sdk"
)

// Offers (sdk.RoundOutcome.Offered, ABI v1.4; [spec] drafter_offers). With several
// drafters, a depth policy that knows only the outcomes of the rounds it gave away
// learns that a drafter plugin has something to copy only by probing it: a probe
// where it has nothing costs a plain round, and a copied passage goes undrafted until
// the next probe (issue 22: on the H200 bed the pair of the draft model and the suffix
// drafter made 0.96 of the suffix drafter alone). A drafter plugin's call costs a few
// µs, so every round asks each of them first and tells the policy how many tokens each
// proposes; the round given to one drafts the proposal it made, with no second call.
// The draft model is never asked (its proposal costs its draft steps): −1.

// offering reports whether this round asks the drafter plugins before the policy.
func (g *gen) offering(maxD int) bool {
	return g.s.offers && g.req.Policy != nil && g.drafters() > 1 && len(g.req.Drafters) > 0 && maxD > 0
}

// offer asks every drafter plugin that is on for up to maxD tokens, holds each
// proposal for the round and sets g.last.Offered (nil when the round asks none). A
// failed call turns its drafter off, as a round's would; only the request's own end
// is an error.
func (g *gen) offer(ctx context.Context, maxD int) error {
	clear(g.holds)
	g.last.Offered = nil
	if !g.offering(maxD) {
		return nil
	}
	base := 0
	if g.s.draft != nil && !g.req.NoDraftModel {
		base = 1 // the draft model is drafter 0
	}
	g.offered = g.offered[:0]
	for range g.drafters() {
		g.offered = append(g.offered, -1)
	}
	for i := range g.req.Drafters {
		if g.off[i] {
			continue
		}
		res, err := g.callPlugin(ctx, i, maxD)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			g.drafterFailed(i, err)
			continue
		}
		h := &g.held[i] // (a drafter may reuse its answer's slices on its next call)
		h.Tokens, h.Conf = append(h.Tokens[:0], res.Tokens...), append(h.Conf[:0], res.Conf...)
		g.holds[i] = true
		g.offered[base+i] = len(res.Tokens)
	}
	g.last.Offered = g.offered
	return nil
}

// callPlugin asks drafter plugin i (req.Drafters[i]) for up to d tokens, telling it
// the tokens appended to the sequence since its last call. Its answer is checked
// (sdk.CheckDraft) whatever the drafter: a bad one is an error naming it.
func (g *gen) callPlugin(ctx context.Context, i, d int) (sdk.DraftResult, error) {
	dr, s := g.req.Drafters[i], g.s
	g.dq.Appended, g.dq.MaxDepth, g.dq.Vocab = s.hist[g.fed[i]:], d, s.target.vocab()
	t0 := time.Now()
	res, err := dr.Draft(ctx, &g.dq)
	g.dq.Appended = nil
	g.fed[i] = len(s.hist) // (a drafter that fails is not called again: see draft)
	if err == nil {
		err = sdk.CheckDraft(&g.dq, res)
	}
	g.res.Spec.Ms.Drafters += ms(time.Since(t0))
	if err != nil {
		return sdk.DraftResult{}, fmt.Errorf("drafter %q: %w", dr.Name, err)
	}
	return res, nil
}
