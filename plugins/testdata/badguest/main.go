// Command badguest holds misbehaving Go plugins for the host's tests:
//   - lazy, a sampler that never accepts a draft token and emits the last candidate of
//     the first row (the conformance kit's greedy identity check must catch it);
//   - spin, a policy that loops forever;
//   - hog, a policy that allocates until memory runs out;
//   - crash, a policy that divides by zero;
//   - stray, a policy that names a drafter the sequence does not offer.
package main

import (
	"context"
	"os"

	"github.com/minfer/minfer/sdk"
	"github.com/minfer/minfer/sdk/guest"
)

type lazy struct{}

func (lazy) Needs() sdk.Needs { return sdk.Needs{TopK: 4} }

func (lazy) Sample(_ context.Context, r *sdk.SampleRound) (sdk.SampleResult, error) {
	ids := r.Rows[0].IDs
	return sdk.SampleResult{Accepted: 0, Next: ids[len(ids)-1]}, nil
}

type bad struct{ kind string }

var sink [][]byte

func (b bad) NextDepth(_ context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	switch b.kind {
	case "spin":
		for n := 1; n != 0; n |= 1 {
		}
	case "hog":
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	case "crash":
		zero := last.Drafted - last.Drafted
		return sdk.DepthDecision{Depth: 1 / zero}, nil
	case "stray":
		return sdk.DepthDecision{Depth: 1, Drafter: last.Drafters}, nil
	}
	return sdk.DepthDecision{}, nil
}

func init() {
	guest.RegisterSampler("lazy", "0.0.1", sdk.Needs{TopK: 4}, func([]byte) (sdk.Sampler, error) {
		os.Stderr.WriteString("lazy: started\n") // reaches the engine log, prefixed
		return lazy{}, nil
	})
	for _, k := range []string{"spin", "hog", "crash", "stray"} {
		guest.RegisterPolicy(k, "0.0.1", func([]byte) (sdk.DepthPolicy, error) { return bad{k}, nil })
	}
}

func main() {}
