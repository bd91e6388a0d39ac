package builtin

import (
	"context"
	"fmt"

	"github.com/minfer/minfer/sdk"
)

// Ngram is the prompt-lookup drafter (vLLM's ngram proposer, llama.cpp's
// ngram-simple): it finds the latest earlier occurrence of the sequence's last n
// tokens, for n from n_max down to n_min, and proposes the tokens that followed it.
// It needs no model: it wins where the output copies the request's text (code
// editing, quoting, retrieval answers) and proposes nothing elsewhere.
//
// The index maps every n-gram (n_min ≤ n ≤ n_max) of the sequence to where its latest
// occurrence was followed by a known token, so a round costs O(n_max) lookups and the
// tokens it appends, not a scan of the history. A longer match is likelier to continue:
// each proposed token's confidence is 1 - 2^-n for a match of n tokens (0.75 for n = 2,
// 0.94 for n = 4), decaying by `decay` per position after the first, so a policy's
// min_conf cut-off shortens the proposals of short matches.
//
// Params (JSON): n_min (2), n_max (4; at most 16), decay (0.9: confidence factor per
// position; 1 = flat).
type Ngram struct {
	nMin, nMax int
	decay      float64
	seq        []int32
	// at[n-nMin] maps the hash of an n-gram to the position after its latest occurrence
	// whose next token is known.
	at   []hashIndex
	toks []int32
	conf []float32
}

var _ sdk.Drafter = (*Ngram)(nil)

// NewNgram builds the drafter from JSON params.
func NewNgram(params []byte) (*Ngram, error) {
	p := struct {
		NMin  int     `json:"n_min"`
		NMax  int     `json:"n_max"`
		Decay float64 `json:"decay"`
	}{NMin: 2, NMax: 4, Decay: 0.9}
	if err := decodeParams("ngram", params, &p); err != nil {
		return nil, err
	}
	if p.NMin < 1 || p.NMax < p.NMin || p.NMax > 16 {
		return nil, fmt.Errorf("ngram: params: n_min = %d, n_max = %d, want 1 ≤ n_min ≤ n_max ≤ 16", p.NMin, p.NMax)
	}
	if err := checkRange("ngram", "decay", p.Decay, 0, 1); err != nil {
		return nil, err
	}
	g := &Ngram{nMin: p.NMin, nMax: p.NMax, decay: p.Decay}
	g.at = make([]hashIndex, p.NMax-p.NMin+1)
	return g, nil
}

// MemoryBytes is the memory the drafter holds (a native host caps it as the
// WebAssembly one caps the module's memory).
func (g *Ngram) MemoryBytes() int {
	n := cap(g.seq)*4 + cap(g.toks)*4 + cap(g.conf)*4
	for i := range g.at {
		n += g.at[i].bytes()
	}
	return n
}

// gramHash hashes s (FNV-1a over the ids); equal hashes are confirmed by comparing.
func gramHash(s []int32) uint64 {
	h := uint64(14695981039346656037)
	for _, t := range s {
		h = (h ^ uint64(uint32(t))) * 1099511628211
	}
	return h
}

// Draft implements sdk.Drafter.
func (g *Ngram) Draft(_ context.Context, q *sdk.DraftRequest) (sdk.DraftResult, error) {
	for _, t := range q.Appended {
		g.seq = append(g.seq, t)
		// the n-grams ending just before t are now followed by a known token
		end := len(g.seq) - 1
		for n := g.nMin; n <= g.nMax && n <= end; n++ {
			g.at[n-g.nMin].set(gramHash(g.seq[end-n:end]), int32(end))
		}
	}
	g.toks, g.conf = g.toks[:0], g.conf[:0]
	L := len(g.seq)
	for n := min(g.nMax, L-1); n >= g.nMin; n-- {
		tail := g.seq[L-n:]
		next, ok := g.at[n-g.nMin].get(gramHash(tail))
		if !ok || !equal(g.seq[int(next)-n:next], tail) {
			continue
		}
		c := 1 - 1/float64(uint64(1)<<n)
		for i := int(next); i < L && len(g.toks) < q.MaxDepth; i++ {
			g.toks, g.conf = append(g.toks, g.seq[i]), append(g.conf, float32(c))
			c *= g.decay
		}
		break
	}
	return sdk.DraftResult{Tokens: g.toks, Conf: g.conf}, nil
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
