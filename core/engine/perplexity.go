package engine

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/model"
)

// PerplexityOptions follow llama-perplexity's flags.
type PerplexityOptions struct {
	Ctx    int   // tokens per chunk (-c); required
	Batch  int   // tokens per forward (-b); default Ctx
	Chunks int   // most chunks to score (--chunks); ≤ 0: all
	BOS    int32 // replaces each chunk's first token when ≥ 0 (the vocabulary adds BOS)
	KVType backend.KVType
	// OnChunk, if non-nil, sees the running perplexity after each chunk.
	OnChunk func(chunk int, ppl float64)
}

// PerplexityResult is llama-perplexity's output.
type PerplexityResult struct {
	Running   []float64 `json:"ppl_running"`
	Final     float64   `json:"ppl_final"`
	PlusMinus float64   `json:"ppl_final_plusminus"`
	NChunks   int       `json:"n_chunks"`
	Scored    int       `json:"scored_tokens"`
}

// Perplexity computes perplexity exactly as llama.cpp's llama-perplexity does: ids (the
// whole text, tokenized with add_special) is cut into non-overlapping chunks of Ctx
// tokens; each chunk is run from an empty cache (its first token replaced by BOS when
// the vocabulary adds one), and the logits at positions Ctx/2 … Ctx-2 are scored with
// log-softmax against the next token. Running values are exp(mean NLL) over the
// chunks so far; PlusMinus is ppl · sqrt((E[nll²] − E[nll]²)/(N−1)).
func Perplexity(ctx context.Context, m *model.Model, ids []int32, o PerplexityOptions) (*PerplexityResult, error) {
	if o.Ctx < 4 {
		return nil, fmt.Errorf("engine: perplexity context %d too small", o.Ctx)
	}
	if o.Batch <= 0 || o.Batch > o.Ctx {
		o.Batch = o.Ctx
	}
	if len(ids) < 2*o.Ctx { // llama-perplexity's own requirement
		return nil, fmt.Errorf("engine: perplexity with a context of %d needs at least %d tokens, the text has %d", o.Ctx, 2*o.Ctx, len(ids))
	}
	n := len(ids) / o.Ctx
	if o.Chunks > 0 {
		n = min(n, o.Chunks)
	}
	c, err := m.NewKV(o.Ctx, o.KVType)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	v := m.Params.Vocab
	logits := make([]float32, o.Ctx*v)
	chunk := make([]int32, o.Ctx)
	res := &PerplexityResult{NChunks: n}
	var nll, nll2 float64
	first := o.Ctx / 2
	for k := range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		copy(chunk, ids[k*o.Ctx:(k+1)*o.Ctx])
		if o.BOS >= 0 {
			chunk[0] = o.BOS
		}
		c.Reset()
		for p := 0; p < o.Ctx; p += o.Batch {
			end := min(p+o.Batch, o.Ctx)
			l, err := m.Forward(chunk[p:end], c, true)
			if err != nil {
				return nil, err
			}
			if err := m.ReadLogits(l, logits[p*v:end*v]); err != nil {
				return nil, err
			}
		}
		for j := first; j < o.Ctx-1; j++ {
			lp := logSoftmaxAt(logits[j*v:(j+1)*v], ids[k*o.Ctx+j+1])
			nll -= lp
			nll2 += lp * lp
			res.Scored++
		}
		ppl := math.Exp(nll / float64(res.Scored))
		res.Running = append(res.Running, ppl)
		if o.OnChunk != nil {
			o.OnChunk(k, ppl)
		}
	}
	if res.Scored == 0 {
		return nil, errors.New("engine: perplexity scored no tokens")
	}
	mean, mean2 := nll/float64(res.Scored), nll2/float64(res.Scored)
	res.Final = res.Running[n-1]
	if res.Scored > 1 {
		if d := mean2 - mean*mean; d > 0 {
			res.PlusMinus = res.Final * math.Sqrt(d/float64(res.Scored-1))
		}
	}
	return res, nil
}

// logSoftmaxAt is llama-perplexity's log_softmax: float max, double sum of expf.
func logSoftmaxAt(row []float32, tok int32) float64 {
	mx := row[0]
	for _, x := range row[1:] {
		mx = max(mx, x)
	}
	var sum float64
	for _, x := range row {
		sum += float64(float32(math.Exp(float64(x - mx))))
	}
	return float64(row[tok]-mx) - math.Log(sum)
}
