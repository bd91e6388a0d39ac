// Command markov-drafter is an example minfer drafter plugin: a Markov chain of order
// `order` learned from the request itself. It counts, for every context of `order`
// tokens seen so far, which token followed it and how often, and proposes a chain of
// the most frequent successors — each token's confidence its share of the context's
// continuations times the confidence before it — until the confidence falls below
// `min_conf` or the round's depth is reached. Where ngram (prompt lookup) follows the
// latest occurrence only, this follows the majority: it pays on text whose phrases
// recur with variants (templated output, lists, logs).
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o markov.wasm ./examples/markov-drafter
//
// and declare it in minfer.toml:
//
//	[plugins.markov]
//	source = "file:./markov.wasm"
//	params = { order = 2, min_conf = 0.3 }
//
//	[spec]
//	drafter = "markov"
package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/minfer/minfer/sdk"
	"github.com/minfer/minfer/sdk/guest"
)

// Markov is the drafter; its exported fields are its params.
type Markov struct {
	Order   int     `json:"order"`    // tokens of context (1..8)
	MinConf float64 `json:"min_conf"` // stop the chain below this confidence

	seq  []int32
	next map[string]map[int32]int // context → successor → count
	res  sdk.DraftResult
}

// New parses params (a JSON object) over the defaults.
func New(params []byte) (sdk.Drafter, error) {
	m := &Markov{Order: 2, MinConf: 0.3, next: map[string]map[int32]int{}}
	if err := json.Unmarshal(params, m); err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	if m.Order < 1 || m.Order > 8 {
		return nil, fmt.Errorf("params: order = %d, want 1..8", m.Order)
	}
	if !(m.MinConf >= 0 && m.MinConf <= 1) {
		return nil, fmt.Errorf("params: min_conf = %v, want a value in [0, 1]", m.MinConf)
	}
	return m, nil
}

// key encodes a context of tokens as a map key.
func key(ctx []int32) string {
	b := make([]byte, 0, 4*len(ctx))
	for _, t := range ctx {
		b = append(b, byte(t), byte(t>>8), byte(t>>16), byte(t>>24))
	}
	return string(b)
}

// Draft learns the appended tokens, then walks the chain from the sequence's end.
func (m *Markov) Draft(_ context.Context, q *sdk.DraftRequest) (sdk.DraftResult, error) {
	for _, t := range q.Appended {
		if n := len(m.seq); n >= m.Order {
			k := key(m.seq[n-m.Order:])
			if m.next[k] == nil {
				m.next[k] = map[int32]int{}
			}
			m.next[k][t]++
		}
		m.seq = append(m.seq, t)
	}
	m.res.Tokens, m.res.Conf = m.res.Tokens[:0], m.res.Conf[:0]
	if len(m.seq) < m.Order {
		return m.res, nil
	}
	ctx := append([]int32(nil), m.seq[len(m.seq)-m.Order:]...)
	conf := 1.0
	for len(m.res.Tokens) < q.MaxDepth {
		succ := m.next[key(ctx)]
		best, bestN, total := int32(-1), 0, 0
		for t, n := range succ {
			total += n
			if n > bestN || n == bestN && t < best { // ties: the lower id, so the answer is deterministic
				best, bestN = t, n
			}
		}
		if best < 0 {
			break
		}
		if conf *= float64(bestN) / float64(total); conf < m.MinConf {
			break
		}
		m.res.Tokens, m.res.Conf = append(m.res.Tokens, best), append(m.res.Conf, float32(conf))
		ctx = append(ctx[1:], best)
	}
	return m.res, nil
}

func init() { guest.RegisterDrafter("markov", "0.1.0", New) }

func main() {}
