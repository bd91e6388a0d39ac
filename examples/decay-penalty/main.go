// Command decay-penalty is an example minfer penalty: a repetition penalty that fades
// with distance. Each occurrence of a token in the last `last_n` tokens subtracts
// strength·decay^age from its logit, age being 0 for the most recent token, so a word
// just said is penalised hard and one said long ago barely at all (llama.cpp's
// penalties weigh every occurrence in the window alike).
//
// Like every penalty it is applied per verify row, each row's window including the
// drafted tokens before it, so speculative rounds penalise exactly as plain decoding.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o decay-penalty.wasm ./examples/decay-penalty
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/minfer/minfer/sdk"
	"github.com/minfer/minfer/sdk/guest"
)

// Decay is the penalty.
type Decay struct {
	Strength float64 `json:"strength"`
	Decay    float64 `json:"decay"`
	LastN    int     `json:"last_n"`

	weight map[int32]float64
	pow    []float64 // decay^age
}

// New parses params over the defaults {"strength": 1, "decay": 0.9, "last_n": 64};
// other keys are ignored.
func New(params []byte) (sdk.Penalty, error) {
	p := &Decay{Strength: 1, Decay: 0.9, LastN: 64, weight: map[int32]float64{}}
	if err := json.Unmarshal(params, p); err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	if !(p.Decay > 0 && p.Decay <= 1) || p.LastN < 0 || math.IsNaN(p.Strength) {
		return nil, fmt.Errorf("params: want 0 < decay ≤ 1, last_n ≥ 0, a strength")
	}
	for i := 0; i < p.LastN; i++ {
		p.pow = append(p.pow, math.Pow(p.Decay, float64(i)))
	}
	return p, nil
}

// Window is last_n (0 when the strength is 0: the engine then skips the call).
func (p *Decay) Window() int {
	if p.Strength == 0 {
		return 0
	}
	return p.LastN
}

// Apply subtracts each window token's decayed weight from its logit.
func (p *Decay) Apply(_ context.Context, rows []sdk.PenaltyRow) error {
	for i := range rows {
		h := rows[i].History
		if len(h) > p.LastN {
			h = h[len(h)-p.LastN:]
		}
		clear(p.weight)
		for k, tok := range h {
			p.weight[tok] += p.pow[len(h)-1-k]
		}
		for j, id := range rows[i].IDs {
			rows[i].Logits[j] -= float32(p.Strength * p.weight[id])
		}
	}
	return nil
}

func init() { guest.RegisterPenalty("decay-penalty", "1.0.0", New) }

func main() {}
