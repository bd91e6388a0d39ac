package builtin

// The suffix drafter as it was before its suffix automaton: a suffix trie of every
// substring up to depth tokens (depth × tokens nodes). Kept as the reference that the
// automaton must answer exactly as (TestSuffixMatchesTrie) and to measure against
// (BenchmarkSuffixBuild).

import (
	"context"
	"fmt"

	"github.com/minfer/minfer/sdk"
)

type suffixTrie struct {
	depth, maxPattern int
	minProb, factor   float64
	offset            int

	seq []int32
	// nodes[0] is the root; root maps a token to the root's child, every other node
	// lists its children (first, next), the latest reached first: a copy's path is
	// found at once.
	nodes []trieNode
	root  hashIndex
	// active[i] is the node of the substring that starts len(seq)-len(active)+i and
	// ends at the newest token (the last depth of them).
	active []int32

	toks, best []int32
	conf, cbuf []float32
}

type trieNode struct {
	count int32 // occurrences of the node's substring
	best  int32 // the child seen most often (0: none)
	tok   int32 // the token that leads to it
	first int32 // the first child (0: none)
	next  int32 // the next sibling (0: none)
}

func newSuffixTrie(params []byte) (*suffixTrie, error) {
	p := struct {
		Depth      int     `json:"depth"`
		MaxPattern int     `json:"max_pattern"`
		MinProb    float64 `json:"min_prob"`
		Factor     float64 `json:"factor"`
		Offset     int     `json:"offset"`
	}{Depth: 32, MaxPattern: 16, MinProb: 0.1, Factor: 1}
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
	return &suffixTrie{depth: p.Depth, maxPattern: p.MaxPattern, minProb: p.MinProb, factor: p.Factor, offset: p.Offset,
		nodes: []trieNode{{}}}, nil
}

// child returns n's child along tok, creating it, and moves it to the front of n's list.
func (s *suffixTrie) child(n, tok int32) int32 {
	if n == 0 {
		c, ok := s.root.get(uint64(uint32(tok)))
		if !ok {
			c = int32(len(s.nodes))
			s.nodes = append(s.nodes, trieNode{tok: tok})
			s.root.set(uint64(uint32(tok)), c)
		}
		return c
	}
	prev := int32(0)
	for c := s.nodes[n].first; c != 0; prev, c = c, s.nodes[c].next {
		if s.nodes[c].tok == tok {
			if prev != 0 {
				s.nodes[prev].next = s.nodes[c].next
				s.nodes[c].next = s.nodes[n].first
				s.nodes[n].first = c
			}
			return c
		}
	}
	c := int32(len(s.nodes))
	s.nodes = append(s.nodes, trieNode{tok: tok, next: s.nodes[n].first})
	s.nodes[n].first = c
	return c
}

// step moves from node n along tok and counts the occurrence.
func (s *suffixTrie) step(n, tok int32) int32 {
	c := s.child(n, tok)
	s.nodes[c].count++
	if b := s.nodes[n].best; b == 0 || s.nodes[c].count >= s.nodes[b].count {
		s.nodes[n].best = c
	}
	return c
}

// add appends tok: every kept substring ending at the previous token grows by it, and
// a new one starts with it.
func (s *suffixTrie) add(tok int32) {
	s.seq = append(s.seq, tok)
	if len(s.active) >= s.depth { // the oldest is depth tokens long: it grows no more
		s.active = s.active[1:]
	}
	for i, n := range s.active {
		s.active[i] = s.step(n, tok)
	}
	s.active = append(s.active, s.step(0, tok))
}

// find returns the node of the sequence's last m tokens: the substring kept going that
// starts there (m ≤ len(active)).
func (s *suffixTrie) find(m int) int32 { return s.active[len(s.active)-m] }

// Draft implements sdk.Drafter.
func (s *suffixTrie) Draft(_ context.Context, q *sdk.DraftRequest) (sdk.DraftResult, error) {
	for _, t := range q.Appended {
		s.add(t)
	}
	s.best, s.conf = s.best[:0], s.conf[:0]
	bestScore := 0.0
	for m := min(s.maxPattern, len(s.active)); m >= 1; m-- {
		n := s.find(m)
		// the tail's own occurrence has no continuation yet
		if n == 0 || s.nodes[n].count < 2 {
			continue
		}
		limit := min(q.MaxDepth, int(s.factor*float64(m))+s.offset, s.depth-m)
		s.toks, s.cbuf = s.toks[:0], s.cbuf[:0]
		p, score, denom := 1.0, 0.0, float64(s.nodes[n].count-1)
		for len(s.toks) < limit {
			c := s.nodes[n].best
			if c == 0 {
				break
			}
			p *= min(float64(s.nodes[c].count)/denom, 1)
			if p < s.minProb {
				break
			}
			s.toks, s.cbuf = append(s.toks, s.nodes[c].tok), append(s.cbuf, float32(p))
			score += p
			n, denom = c, float64(s.nodes[c].count)
		}
		if score > bestScore {
			bestScore = score
			s.best, s.conf = append(s.best[:0], s.toks...), append(s.conf[:0], s.cbuf...)
		}
	}
	return sdk.DraftResult{Tokens: s.best, Conf: s.conf}, nil
}
