package bench

import (
	"time"

	"github.com/minfer/minfer/core/model"
)

// ChainDepth is the chain length DraftChainStep times: depth 4, where a round's draft
// phase on the 7B/0.5B pair cost 3.52 ms against a lone step's 0.862 (H200, the
// per-step path), so the host's round trip per step shows.
const ChainDepth = 4

// DraftChainStep is the draft's cost per step in a draft chain of ChainDepth steps
// (model.DraftChain: a one-token catch-up, then the steps picked and fed on the
// device, one wait), after the same 64-token prefix as VerifyCurve's draft step: the
// median of 7 chains, divided by ChainDepth. It is 0 when the draft's backend runs no
// chains (the engine then drafts step by step, which VerifyCurve's draft step times).
func DraftChainStep(draft *model.Model) (float64, error) {
	if draft == nil || !draft.HasDraftChain() {
		return 0, nil
	}
	const prefix, runs = 64, 7
	c, err := draft.NewKV(prefix+ChainDepth, 0)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	ids := make([]int32, prefix+1)
	for i := range ids {
		ids[i] = int32((i*2654435761 + 7) % draft.Params.Vocab)
	}
	if _, err := draft.Forward(ids[:prefix], c, false); err != nil {
		return 0, err
	}
	var ch model.Chain
	var ts []float64
	for range runs + 1 { // the first chain captures the graphs: not timed
		if err := c.Truncate(prefix); err != nil {
			return 0, err
		}
		t0 := time.Now()
		if err := draft.DraftChain(ids[prefix:], c, ChainDepth, &ch); err != nil {
			return 0, err
		}
		ts = append(ts, float64(time.Since(t0).Nanoseconds())/1e6/ChainDepth)
	}
	return Median(ts[1:]), nil
}
