package builtin

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/minfer/minfer/sdk"
)

// Sampling draws tokens from the target's distribution after llama.cpp's default chain:
// top_k, then top_p and min_p on the softmax at temperature 1, then temperature. Each
// emitted token is drawn with a generator seeded by (Seed, Step+row), so runs repeat.
//
// With a draft (the engine drafts greedily, i.e. deterministically), it is exact
// speculative sampling: row i accepts draft token x with probability p_i(x); on
// rejection it emits a token drawn from p_i with x removed and renormalised, and stops.
// Summed over the two branches each emitted token has probability p_i, so the output
// distribution equals the target's whatever the draft proposes. A draft token outside
// the kept candidates has p_i(x) = 0 and is always rejected.
//
// temperature 0 (or below) is greedy: argmax, longest matching draft prefix.
//
// Params (JSON): temperature (0.8), top_k (40; 0 = the full row crosses the boundary),
// top_p (0.95; 1 = off), min_p (0.05; 0 = off).
type Sampling struct {
	p samplingParams

	idx   []int     // scratch: candidate order
	probs []float64 // scratch: kept probabilities, by position in idx
	exps  []float64 // scratch: full rows, exp(logit - max)
	z     float64   // full rows: Σ exps
}

type samplingParams struct {
	Temperature float64 `json:"temperature"`
	TopK        int     `json:"top_k"`
	TopP        float64 `json:"top_p"`
	MinP        float64 `json:"min_p"`
}

var _ sdk.Sampler = (*Sampling)(nil)

// NewSampling builds the sampler from JSON params.
func NewSampling(params []byte) (*Sampling, error) {
	s := &Sampling{p: samplingParams{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05}}
	if err := decodeParams("sampling", params, &s.p); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		key       string
		v, lo, hi float64
	}{
		{"temperature", s.p.Temperature, -1, 100},
		{"top_k", float64(s.p.TopK), 0, 1 << 20},
		{"top_p", s.p.TopP, 0, 1},
		{"min_p", s.p.MinP, 0, 1},
	} {
		if err := checkRange("sampling", c.key, c.v, c.lo, c.hi); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Needs asks for top_k candidates per row (the argmax at temperature ≤ 0, the full row
// when top_k is 0).
func (s *Sampling) Needs() sdk.Needs {
	if s.p.Temperature <= 0 {
		return sdk.Needs{TopK: 1}
	}
	return sdk.Needs{TopK: s.p.TopK}
}

// Sample runs speculative rejection sampling over the round.
func (s *Sampling) Sample(ctx context.Context, r *sdk.SampleRound) (sdk.SampleResult, error) {
	if s.p.Temperature <= 0 {
		return (*Greedy)(nil).Sample(ctx, r)
	}
	if len(r.Rows) != len(r.Draft)+1 {
		return sdk.SampleResult{}, fmt.Errorf("sampling: %d rows for %d draft tokens", len(r.Rows), len(r.Draft))
	}
	for i := range r.Rows {
		row := &r.Rows[i]
		if len(row.IDs) == 0 || len(row.Logits) != len(row.IDs) {
			return sdk.SampleResult{}, fmt.Errorf("sampling: row %d has no candidates", i)
		}
		s.distribution(row)
		g := newRNG(r.Seed, r.Step+uint64(i))
		if i == len(r.Draft) {
			return sdk.SampleResult{Accepted: i, Next: s.draw(row, g.float(), -1)}, nil
		}
		x := r.Draft[i]
		px := -1.0
		for k, j := range s.idx {
			if row.IDs[j] == x {
				px = s.probs[k]
				break
			}
		}
		if px > 0 && g.float() < px {
			continue // accepted
		}
		return sdk.SampleResult{Accepted: i, Next: s.draw(row, g.float(), x)}, nil
	}
	panic("BUG: unreachable")
}

// distribution fills s.idx with the kept candidates of row, best first, and s.probs
// with their probabilities (summing to 1).
func (s *Sampling) distribution(row *sdk.SampleRow) {
	sorted := true
	maxJ := 0
	for j := 1; j < len(row.IDs); j++ {
		if better(row, j, j-1) {
			sorted = false
		}
		if better(row, j, maxJ) {
			maxJ = j
		}
	}
	// softmax at temperature 1 over the candidates after top_k, for top_p and min_p
	maxL := float64(row.Logits[maxJ])
	s.idx = s.idx[:0]
	switch {
	case sorted: // top-K rows arrive sorted
		for j := range row.IDs {
			s.idx = append(s.idx, j)
		}
	case s.p.TopK > 0: // unsorted rows with a top_k of our own: sort them all
		for j := range row.IDs {
			s.idx = append(s.idx, j)
		}
		s.sortIdx(row)
	default: // full rows (top_k 0): sort only what top_p and min_p can keep
		s.exps = s.exps[:0]
		z := 0.0
		for _, l := range row.Logits {
			e := math.Exp(float64(l) - maxL)
			s.exps = append(s.exps, e)
			z += e
		}
		// Tokens below cut cannot survive: those under (1-top_p)/V hold less than
		// 1-top_p together, so the top_p prefix ends before them; those under
		// min_p·p_max are removed by min_p (p_max = 1/z).
		cut := 0.0
		if s.p.TopP < 1 {
			cut = (1 - s.p.TopP) / float64(len(row.IDs)) * z
		}
		if s.p.MinP > 0 {
			cut = max(cut, s.p.MinP)
		}
		for j, e := range s.exps {
			if e >= cut {
				s.idx = append(s.idx, j)
			}
		}
		s.sortIdx(row)
		s.z = z
	}
	if k := s.p.TopK; k > 0 && k < len(s.idx) {
		s.idx = s.idx[:k]
	}
	s.probs = s.probs[:0]
	sum := 0.0
	for _, j := range s.idx {
		e := math.Exp(float64(row.Logits[j]) - maxL)
		s.probs = append(s.probs, e)
		sum += e
	}
	if !sorted && s.p.TopK == 0 {
		sum = s.z // normalise over the whole row, not only what was kept
	}
	keep := len(s.idx)
	if s.p.TopP < 1 {
		cum := 0.0
		for k, e := range s.probs {
			cum += e / sum
			if cum >= s.p.TopP {
				keep = k + 1
				break
			}
		}
	}
	if s.p.MinP > 0 {
		for k := 1; k < keep; k++ {
			if s.probs[k] < s.p.MinP*s.probs[0] { // probs[0] is the max
				keep = k
				break
			}
		}
	}
	s.idx, s.probs = s.idx[:keep], s.probs[:keep]
	// temperature on what is kept
	sum = 0
	for k, j := range s.idx {
		e := math.Exp((float64(row.Logits[j]) - maxL) / s.p.Temperature)
		s.probs[k] = e
		sum += e
	}
	for k := range s.probs {
		s.probs[k] /= sum
	}
}

func (s *Sampling) sortIdx(row *sdk.SampleRow) {
	slices.SortFunc(s.idx, func(a, b int) int {
		switch {
		case better(row, a, b):
			return -1
		case better(row, b, a):
			return 1
		}
		return 0
	})
}

// better reports whether candidate a of row ranks before candidate b in the
// candidates' order (sdk.RanksBefore).
func better(row *sdk.SampleRow, a, b int) bool {
	return sdk.RanksBefore(row.Logits[a], row.IDs[a], row.Logits[b], row.IDs[b])
}

// draw picks a kept candidate with probability ∝ s.probs, excluding token `without`
// (-1: none), using the uniform u in [0, 1).
func (s *Sampling) draw(row *sdk.SampleRow, u float64, without int32) int32 {
	total := 0.0
	for k, j := range s.idx {
		if row.IDs[j] != without {
			total += s.probs[k]
		}
	}
	target := u * total
	last := int32(-1)
	for k, j := range s.idx {
		id := row.IDs[j]
		if id == without {
			continue
		}
		last = id
		target -= s.probs[k]
		if target < 0 {
			return id
		}
	}
	if last < 0 { // only the excluded token was kept: fall back to the best other candidate
		for _, j := range s.idx {
			if row.IDs[j] != without {
				return row.IDs[j]
			}
		}
		for j := range row.IDs {
			if row.IDs[j] != without {
				return row.IDs[j]
			}
		}
		return without
	}
	return last
}
