// Command logit-bias-sampler is an example minfer sampler: greedy decoding over logits
// shifted by a per-token bias (OpenAI's logit_bias). A bias of -100 effectively bans a
// token; a positive bias favours one.
//
// It asks the host for the top_k best candidates of each row (16 by default), so a
// positive bias can only lift a token that is already among them; top_k = 0 asks for
// full rows (the whole vocabulary crosses the boundary each round: slower, exact).
// Speculative rounds stay exact: a draft token is accepted only while it equals the
// biased argmax of its row.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o logit-bias.wasm ./examples/logit-bias-sampler
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/minfer/minfer/sdk"
	"github.com/minfer/minfer/sdk/guest"
)

// Bias is the sampler.
type Bias struct {
	topK int
	bias map[int32]float32
}

// New parses params: {"top_k": 16, "bias": {"TOKEN_ID": DELTA, ...}}. Other keys (the
// [sampling] values the config hands every sampler) are ignored.
func New(params []byte) (sdk.Sampler, error) {
	p := struct {
		TopK int                `json:"top_k"`
		Bias map[string]float32 `json:"bias"`
	}{TopK: 16}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	if p.TopK < 0 {
		return nil, fmt.Errorf("params: top_k %d < 0", p.TopK)
	}
	b := &Bias{topK: p.TopK, bias: map[int32]float32{}}
	for k, v := range p.Bias {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("params: bias key %q is not a token id", k)
		}
		b.bias[int32(id)] = v
	}
	return b, nil
}

// Needs asks for top_k candidates per row.
func (b *Bias) Needs() sdk.Needs { return sdk.Needs{TopK: b.topK} }

// best is the candidate with the largest biased logit (ties: lower id).
func (b *Bias) best(row *sdk.SampleRow) int32 {
	best, bestL := int32(-1), float32(0)
	for j, id := range row.IDs {
		l := row.Logits[j] + b.bias[id]
		if best < 0 || l > bestL || l == bestL && id < best {
			best, bestL = id, l
		}
	}
	return best
}

// Sample accepts the draft prefix that matches the biased argmax of each row.
func (b *Bias) Sample(_ context.Context, r *sdk.SampleRound) (sdk.SampleResult, error) {
	for i := range r.Rows {
		top := b.best(&r.Rows[i])
		if top < 0 {
			return sdk.SampleResult{}, fmt.Errorf("row %d has no candidates", i)
		}
		if i == len(r.Draft) || r.Draft[i] != top {
			return sdk.SampleResult{Accepted: i, Next: top}, nil
		}
	}
	return sdk.SampleResult{}, fmt.Errorf("%d rows for %d draft tokens", len(r.Rows), len(r.Draft))
}

func init() { guest.RegisterSampler("logit-bias", "1.0.0", sdk.Needs{TopK: 16}, New) }

func main() {}
