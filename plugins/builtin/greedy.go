package builtin

import (
	"context"
	"fmt"

	"github.com/minfer/minfer/sdk"
)

// Greedy takes the argmax of every row: it accepts the longest draft prefix that
// matches the rows' argmax tokens and emits the argmax of the first row that does not
// match (or of the last row). It asks the host for TopK 1, so only the argmax crosses
// the boundary. With it, speculative output equals plain greedy decoding.
//
// Params: none of its own; the sampling keys the config hands every sampler
// (temperature, top_k, top_p, min_p) are accepted and ignored.
type Greedy struct{}

var _ sdk.Sampler = (*Greedy)(nil)

// NewGreedy builds the greedy sampler from JSON params.
func NewGreedy(params []byte) (*Greedy, error) {
	var p samplingParams
	if err := decodeParams("greedy", params, &p); err != nil {
		return nil, err
	}
	return &Greedy{}, nil
}

// Needs asks for the argmax only.
func (*Greedy) Needs() sdk.Needs { return sdk.Needs{TopK: 1} }

// Sample accepts the matching prefix and emits the next argmax.
func (*Greedy) Sample(_ context.Context, r *sdk.SampleRound) (sdk.SampleResult, error) {
	if len(r.Rows) != len(r.Draft)+1 {
		return sdk.SampleResult{}, fmt.Errorf("greedy: %d rows for %d draft tokens", len(r.Rows), len(r.Draft))
	}
	for i := range r.Rows {
		top, ok := argmax(&r.Rows[i])
		if !ok {
			return sdk.SampleResult{}, fmt.Errorf("greedy: row %d has no candidates", i)
		}
		if i == len(r.Draft) || r.Draft[i] != top {
			return sdk.SampleResult{Accepted: i, Next: top}, nil
		}
	}
	panic("BUG: unreachable")
}

// argmax returns the first candidate of a row in the candidates' order
// (sdk.RanksBefore), whether or not the row is sorted.
func argmax(row *sdk.SampleRow) (int32, bool) {
	if len(row.IDs) == 0 || len(row.Logits) != len(row.IDs) {
		return 0, false
	}
	best := 0
	for i := 1; i < len(row.IDs); i++ {
		if sdk.RanksBefore(row.Logits[i], row.IDs[i], row.Logits[best], row.IDs[best]) {
			best = i
		}
	}
	return row.IDs[best], true
}
