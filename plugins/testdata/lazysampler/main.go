// Command lazysampler is a deliberately wrong sampler for the conformance kit's tests:
// it never accepts a draft token and always emits the last candidate of the first row.
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

func init() {
	guest.RegisterSampler("lazy", "0.0.1", sdk.Needs{TopK: 4}, func([]byte) (sdk.Sampler, error) {
		os.Stderr.WriteString("lazy: started\n") // reaches the engine log, prefixed
		return lazy{}, nil
	})
}

func main() {}
