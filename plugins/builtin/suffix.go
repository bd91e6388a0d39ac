package builtin

import (
	"context"
	"fmt"

	"github.com/minfer/minfer/sdk"
)

// Suffix is the suffix drafter, after Arctic's suffix decoding (Oliaro et al., 2024): a
// suffix structure over the request's tokens proposes the continuation with the most
// support. For each length m of the sequence's tail that occurs earlier (m from
// `max_pattern` down to 1) it walks from the tail to the continuation seen most often,
// again and again; a token's confidence is the product of the walk's frequencies so
// far (how often the tail, then the tail and the proposal before it, went on that way),
// and the walk stops where it falls below `min_prob`, after `factor`·m + `offset`
// tokens, or where the walked string would pass `depth` tokens: the depth is set by the
// support. The proposal whose confidences sum highest wins (its expected number of
// accepted tokens). Where text is copied the support is one earlier occurrence and the
// walk runs as far as the copy; where a phrase recurs with variants the walk follows the
// most frequent one and stops where they part.
//
// The structure is a suffix automaton (Blumer et al.): at most 2n states and 3n
// transitions for n tokens, whatever the depth, built online in amortised constant time
// a token. A state is a set of substrings that end at the same positions; it keeps how
// many positions that is (the substrings' occurrences) and its most frequent
// continuation (ties: the latest seen), both kept up to date for the substrings of at
// most depth tokens by stepping the states of the sequence's last depth suffixes, as a
// suffix trie of that depth would count them — the proposals are the trie's, token for
// token and confidence for confidence. It takes some 100-200 bytes a token of the
// plugin's memory: a request over `max_tokens` tokens (131072 by default, about 24 MiB)
// is indexed from its newest half again, so memory stays bounded and text more than
// max_tokens back stops giving support.
//
// Params (JSON): depth (32: the longest substring counted, 2..256), max_pattern (16: the
// longest tail matched, < depth), min_prob (0.1), factor (1.0) and offset (0): at most
// factor·m + offset tokens after a match of m tokens; max_tokens (131072, 64..2^24).
type Suffix struct {
	depth, maxPattern int
	minProb, factor   float64
	offset, maxTokens int

	seq []int32 // the tokens indexed (the automaton is rebuilt from its newest half at max_tokens)
	st  []samState
	// trans maps state<<32 | token to the state it leads to; edges lists each state's
	// transitions (st.first, edge.next) for copying them when a state is split.
	trans hashIndex
	edges []samEdge
	last  int32 // the state of the whole sequence
	// anchor is the state holding the sequence's suffix of min(depth-1, len(seq))
	// tokens: the suffixes below it are the ones whose continuations are counted.
	anchor int32
	chain  []int32 // scratch: the suffix states from anchor down to the root

	toks, best []int32
	conf, cbuf []float32
	// The walk in toks and cbuf (see Draft): from the state from, now at state at, with
	// the frequency's denominator and running product there; sums[k] is the score of its
	// first k+1 tokens; over when it can go no further.
	from, at int32
	denom, p float64
	sums     []float64
	over     bool
}

type samState struct {
	len   int32 // the longest substring's length
	link  int32 // the state of the longest suffix in another state (-1: the root's)
	count int32 // occurrences (exact while the shortest substring has ≤ depth tokens)
	best  int32 // the token of the most frequent continuation (-1: none)
	first int32 // the first of the state's edges (-1: none)
}

type samEdge struct {
	tok  int32
	next int32 // the state's next edge (-1: none)
}

var _ sdk.Drafter = (*Suffix)(nil)

// NewSuffix builds the drafter from JSON params.
func NewSuffix(params []byte) (*Suffix, error) {
	p := struct {
		Depth      int     `json:"depth"`
		MaxPattern int     `json:"max_pattern"`
		MinProb    float64 `json:"min_prob"`
		Factor     float64 `json:"factor"`
		Offset     int     `json:"offset"`
		MaxTokens  int     `json:"max_tokens"`
	}{Depth: 32, MaxPattern: 16, MinProb: 0.1, Factor: 1, MaxTokens: 1 << 17}
	if err := decodeParams("suffix", params, &p); err != nil {
		return nil, err
	}
	if p.Depth < 2 || p.Depth > 256 {
		return nil, fmt.Errorf("suffix: params: depth = %d, want 2..256", p.Depth)
	}
	if p.MaxPattern < 1 || p.MaxPattern >= p.Depth {
		return nil, fmt.Errorf("suffix: params: max_pattern = %d, want 1..depth-1 = %d", p.MaxPattern, p.Depth-1)
	}
	if err := checkRange("suffix", "min_prob", p.MinProb, 0, 1); err != nil {
		return nil, err
	}
	if err := checkRange("suffix", "factor", p.Factor, 0, 64); err != nil {
		return nil, err
	}
	if p.Offset < 0 || p.Offset > sdk.MaxDepthLimit {
		return nil, fmt.Errorf("suffix: params: offset = %d, want 0..%d", p.Offset, sdk.MaxDepthLimit)
	}
	if p.MaxTokens < 64 || p.MaxTokens > 1<<24 {
		return nil, fmt.Errorf("suffix: params: max_tokens = %d, want 64..%d", p.MaxTokens, 1<<24)
	}
	s := &Suffix{depth: p.Depth, maxPattern: p.MaxPattern, minProb: p.MinProb, factor: p.Factor, offset: p.Offset,
		maxTokens: p.MaxTokens}
	s.reset()
	return s, nil
}

// reset empties the automaton (the root alone).
func (s *Suffix) reset() {
	s.seq, s.edges = s.seq[:0], s.edges[:0]
	s.st = append(s.st[:0], samState{link: -1, best: -1, first: -1})
	s.trans = hashIndex{}
	s.last, s.anchor = 0, 0
}

// MemoryBytes is the memory the structure holds (a native host caps it as the
// WebAssembly one caps the module's memory).
func (s *Suffix) MemoryBytes() int {
	return cap(s.seq)*4 + cap(s.st)*20 + cap(s.edges)*8 + len(s.trans.keys)*12 + cap(s.chain)*4
}

func transKey(state, tok int32) uint64 { return uint64(uint32(state))<<32 | uint64(uint32(tok)) }

// next is the state that q leads to along tok (-1: none).
func (s *Suffix) next(q, tok int32) int32 {
	r, ok := s.trans.get(transKey(q, tok))
	if !ok {
		return -1
	}
	return r
}

// setNext points q's transition along tok at r, listing it if it is new.
func (s *Suffix) setNext(q, tok, r int32) {
	k := transKey(q, tok)
	if _, ok := s.trans.get(k); !ok {
		s.edges = append(s.edges, samEdge{tok: tok, next: s.st[q].first})
		s.st[q].first = int32(len(s.edges) - 1)
	}
	s.trans.set(k, r)
}

// extend appends tok to the automaton (the standard online construction). It returns
// the state split off (the clone) and the state it was split from, or -1, -1.
func (s *Suffix) extend(tok int32) (clone, from int32) {
	cur := int32(len(s.st))
	s.st = append(s.st, samState{len: s.st[s.last].len + 1, best: -1, first: -1})
	p := s.last
	for p != -1 && s.next(p, tok) < 0 {
		s.setNext(p, tok, cur)
		p = s.st[p].link
	}
	clone, from = -1, -1
	switch {
	case p == -1:
		s.st[cur].link = 0
	case s.st[s.next(p, tok)].len == s.st[p].len+1:
		s.st[cur].link = s.next(p, tok)
	default:
		q := s.next(p, tok)
		clone, from = int32(len(s.st)), q
		c := s.st[q] // same endings so far: the counts and continuations carry over
		c.len, c.first = s.st[p].len+1, -1
		s.st = append(s.st, c)
		for e := s.st[q].first; e != -1; e = s.edges[e].next {
			t := s.edges[e].tok
			s.setNext(clone, t, s.next(q, t))
		}
		for ; p != -1 && s.next(p, tok) == q; p = s.st[p].link {
			s.setNext(p, tok, clone)
		}
		s.st[q].link, s.st[cur].link = clone, clone
	}
	s.last = cur
	return clone, from
}

// add appends tok: the automaton grows by it, and every counted suffix of the
// sequence before it (the states from anchor to the root) counts the occurrence of
// its continuation by tok, as a trie of depth `depth` steps its active nodes.
func (s *Suffix) add(tok int32) {
	n := len(s.seq) // the anchor's suffix has min(depth-1, n) tokens
	l := int32(min(s.depth-1, n))
	s.seq = append(s.seq, tok)
	clone, from := s.extend(tok)
	a := s.anchor
	if a == from && l <= s.st[clone].len {
		a = clone // the anchor's suffix went to the split-off state
	}
	s.chain = s.chain[:0]
	for q := a; q != -1; q = s.st[q].link {
		s.chain = append(s.chain, q)
	}
	prev := int32(-1)
	want := int32(min(s.depth-1, n+1)) // the new anchor's suffix length
	s.anchor = 0
	for _, q := range s.chain {
		r := s.next(q, tok)
		if r != prev { // suffixes of one state continue into one state: count it once
			s.st[r].count++
			prev = r
			if s.st[r].len >= want && s.st[s.st[r].link].len < want {
				s.anchor = r
			}
		}
		if b := s.st[q].best; b < 0 || s.st[r].count >= s.st[s.next(q, b)].count {
			s.st[q].best = tok
		}
	}
}

// tail returns the state of the sequence's last m tokens (1 ≤ m ≤ depth-1, m ≤ the
// sequence's length): on the chain below the anchor.
func (s *Suffix) tail(m int) int32 {
	q := s.anchor
	for q > 0 && int(s.st[s.st[q].link].len) >= m {
		q = s.st[q].link
	}
	return q
}

// Draft implements sdk.Drafter.
func (s *Suffix) Draft(_ context.Context, q *sdk.DraftRequest) (sdk.DraftResult, error) {
	for _, t := range q.Appended {
		if len(s.seq) >= s.maxTokens {
			keep := append([]int32(nil), s.seq[len(s.seq)-s.maxTokens/2:]...)
			s.reset()
			for _, k := range keep {
				s.add(k)
			}
		}
		s.add(t)
	}
	s.best, s.conf = s.best[:0], s.conf[:0]
	bestScore := 0.0
	s.from = -1
	for m := min(s.maxPattern, len(s.seq)); m >= 1; m-- {
		n := s.tail(m)
		// the tail's own occurrence has no continuation yet
		if n <= 0 || s.st[n].count < 2 {
			continue
		}
		limit := min(q.MaxDepth, int(s.factor*float64(m))+s.offset, s.depth-m)
		// Tails of several lengths are often one state (a copied stretch's tails all
		// occur once before): its walk is the same whatever the limit, so it is walked
		// once, as far as the longest limit asks.
		if n != s.from {
			s.startWalk(n)
		}
		s.walkTo(limit)
		if k := min(limit, len(s.toks)); k > 0 && s.sums[k-1] > bestScore {
			bestScore = s.sums[k-1]
			s.best, s.conf = append(s.best[:0], s.toks[:k]...), append(s.conf[:0], s.cbuf[:k]...)
		}
	}
	return sdk.DraftResult{Tokens: s.best, Conf: s.conf}, nil
}

// startWalk starts the walk from state n (a tail that occurred before): each step
// goes to the most frequent continuation, its token's confidence the product of the
// steps' frequencies so far.
func (s *Suffix) startWalk(n int32) {
	s.toks, s.cbuf, s.sums = s.toks[:0], s.cbuf[:0], s.sums[:0]
	s.from, s.at, s.p, s.denom, s.over = n, n, 1, float64(s.st[n].count-1), false
}

// walkTo takes the walk on to limit tokens, unless it stops sooner: where the state
// has no continuation or the confidence would fall below min_prob.
func (s *Suffix) walkTo(limit int) {
	score := 0.0
	if k := len(s.sums); k > 0 {
		score = s.sums[k-1]
	}
	for !s.over && len(s.toks) < limit {
		b := s.st[s.at].best
		if b < 0 {
			s.over = true
			break
		}
		c := s.next(s.at, b)
		p := s.p * min(float64(s.st[c].count)/s.denom, 1)
		if p < s.minProb {
			s.over = true
			break
		}
		score += p
		s.toks, s.cbuf, s.sums = append(s.toks, b), append(s.cbuf, float32(p)), append(s.sums, score)
		s.p, s.at, s.denom = p, c, float64(s.st[c].count)
	}
}
