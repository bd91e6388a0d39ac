package tokenizer

import "fmt"

// bpeModel holds merge ranks keyed by symbol ids. Symbols are interned strings: every
// vocabulary token keeps its id, and strings that appear only in merges get ids from
// len(vocab) on, so the merge loop never builds strings (llama.cpp compares strings;
// interning gives the same result because equal strings get equal ids).
type bpeModel struct {
	nVocab  int32
	extra   []string // texts of interned ids >= nVocab
	merges  map[uint64]bpeMerge
	byteSym [256]int32 // symbol id of each raw byte's byte-level character, -1 if none
}

type bpeMerge struct {
	rank   int32
	result int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func newBPEModel(toID map[string]int32, merges [][2]string) (*bpeModel, error) {
	m := &bpeModel{nVocab: int32(len(toID)), merges: make(map[uint64]bpeMerge, len(merges))}
	extraID := map[string]int32{}
	intern := func(s string) int32 {
		if id, ok := toID[s]; ok {
			return id
		}
		if id, ok := extraID[s]; ok {
			return id
		}
		id := m.nVocab + int32(len(m.extra))
		m.extra = append(m.extra, s)
		extraID[s] = id
		return id
	}
	for rank, mg := range merges {
		a, b := intern(mg[0]), intern(mg[1])
		k := pairKey(a, b)
		if _, dup := m.merges[k]; dup {
			continue // llama.cpp's bpe_ranks.emplace keeps the first rank
		}
		m.merges[k] = bpeMerge{rank: int32(rank), result: intern(mg[0] + mg[1])}
	}
	for b := 0; b < 256; b++ {
		s := string(byteToRune[b])
		m.byteSym[b] = -1
		if id, ok := toID[s]; ok {
			m.byteSym[b] = id
		} else if id, ok := extraID[s]; ok {
			m.byteSym[b] = id
		}
	}
	return m, nil
}

// bpeSym is one symbol of a word being merged: raw bytes word[lo:hi], interned id.
type bpeSym struct {
	id     int32
	lo, hi int32
	next   int32
}

// bpeState is per-Encode scratch space.
type bpeState struct {
	syms  []bpeSym
	ranks []bpeMerge
	enc   []byte
	heap  bpeHeap

	// cache maps a word to its ids (a range of cacheIDs) within one Encode call: running
	// text repeats most words, and a word's tokens do not depend on its context.
	cache    map[string]cacheRange
	cacheIDs []int32
}

type cacheRange struct{ lo, hi int32 }

const (
	cacheMaxWord    = 64      // longer words are not cached
	cacheMaxEntries = 1 << 16 // entries per Encode call
)

// encodeWordCached is encodeWord with the per-call word cache.
func (t *Tokenizer) encodeWordCached(st *bpeState, word string, out []int32) []int32 {
	if len(word) > cacheMaxWord {
		return t.encodeWord(st, word, out)
	}
	if r, ok := st.cache[word]; ok {
		return append(out, st.cacheIDs[r.lo:r.hi]...)
	}
	n := len(out)
	out = t.encodeWord(st, word, out)
	if st.cache == nil {
		st.cache = make(map[string]cacheRange, 1024)
	}
	if len(st.cache) < cacheMaxEntries {
		lo := int32(len(st.cacheIDs))
		st.cacheIDs = append(st.cacheIDs, out[n:]...)
		st.cache[word] = cacheRange{lo, int32(len(st.cacheIDs))}
	}
	return out
}

// encodeWord appends the tokens of one pre-tokenized word (raw bytes) to out.
func (t *Tokenizer) encodeWord(st *bpeState, word string, out []int32) []int32 {
	m := t.bpe
	if t.ignoreMerges {
		st.enc = byteEncode(st.enc[:0], word)
		if id, ok := t.toID[string(st.enc)]; ok {
			return append(out, id)
		}
	}
	syms := st.syms[:0]
	for i := 0; i < len(word); i++ {
		syms = append(syms, bpeSym{id: m.byteSym[word[i]], lo: int32(i), hi: int32(i + 1), next: int32(i + 1)})
	}
	syms[len(syms)-1].next = -1
	if len(syms) <= 64 {
		syms = m.mergeSmall(st, syms)
	} else {
		syms = m.mergeHeap(st, syms)
	}
	st.syms = syms
	for i := int32(0); i != -1; i = syms[i].next {
		s := syms[i]
		if s.id >= 0 && s.id < m.nVocab {
			out = append(out, s.id)
			continue
		}
		// Not a token: llama.cpp emits the tokens of the single bytes of the symbol's
		// byte-level text that exist (only ASCII ones can).
		st.enc = byteEncode(st.enc[:0], word[s.lo:s.hi])
		for _, c := range st.enc {
			if id, ok := t.toID[string([]byte{c})]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}

func (m *bpeModel) rank(a, b int32) (bpeMerge, bool) {
	if a < 0 || b < 0 {
		return bpeMerge{}, false
	}
	mg, ok := m.merges[pairKey(a, b)]
	return mg, ok
}

// mergeSmall repeatedly merges the adjacent pair of lowest rank (leftmost on ties): the
// same order as llama.cpp's priority queue, found by a linear scan over cached pair
// ranks, which is faster for short words. Symbols stay in index order; merged-away ones
// are unlinked. ranks[i] is the merge of symbol i with its successor (rank -1: none).
func (m *bpeModel) mergeSmall(st *bpeState, syms []bpeSym) []bpeSym {
	ranks := st.ranks[:0]
	for i := range syms {
		mg := bpeMerge{rank: -1}
		if j := syms[i].next; j >= 0 {
			if x, ok := m.rank(syms[i].id, syms[j].id); ok {
				mg = x
			}
		}
		ranks = append(ranks, mg)
	}
	st.ranks = ranks
	for {
		best, bestRank := int32(-1), int32(1<<31-1)
		prev := int32(-1)
		bestPrev := int32(-1)
		for i := int32(0); i != -1; i = syms[i].next {
			if r := ranks[i].rank; r >= 0 && r < bestRank {
				best, bestRank, bestPrev = i, r, prev
			}
			prev = i
		}
		if best < 0 {
			return syms
		}
		j := syms[best].next
		syms[best].id = ranks[best].result
		syms[best].hi = syms[j].hi
		syms[best].next = syms[j].next
		ranks[best] = bpeMerge{rank: -1}
		if k := syms[best].next; k >= 0 {
			if x, ok := m.rank(syms[best].id, syms[k].id); ok {
				ranks[best] = x
			}
		}
		if bestPrev >= 0 {
			ranks[bestPrev] = bpeMerge{rank: -1}
			if x, ok := m.rank(syms[bestPrev].id, syms[best].id); ok {
				ranks[bestPrev] = x
			}
		}
	}
}

// bpeHeap is a binary min-heap of candidate merges ordered by (rank, left index).
type bpeCand struct {
	rank        int32
	left, right int32
	lid, rid    int32 // symbol ids when the candidate was made
}

type bpeHeap []bpeCand

func (h bpeHeap) less(a, b int) bool {
	return h[a].rank < h[b].rank || (h[a].rank == h[b].rank && h[a].left < h[b].left)
}

func (h *bpeHeap) push(c bpeCand) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *bpeHeap) pop() bpeCand {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s.less(l, m) {
			m = l
		}
		if r < len(s) && s.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// mergeHeap is llama.cpp's priority-queue merge loop, O(n log n) for long words.
func (m *bpeModel) mergeHeap(st *bpeState, syms []bpeSym) []bpeSym {
	h := st.heap[:0]
	prev := make([]int32, len(syms))
	for i := range syms {
		prev[i] = int32(i) - 1
	}
	add := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		if mg, ok := m.rank(syms[l].id, syms[r].id); ok {
			h.push(bpeCand{rank: mg.rank, left: l, right: r, lid: syms[l].id, rid: syms[r].id})
		}
	}
	for i := 1; i < len(syms); i++ {
		add(int32(i-1), int32(i))
	}
	for len(h) > 0 {
		c := h.pop()
		l, r := &syms[c.left], &syms[c.right]
		if l.hi == l.lo || r.hi == r.lo || l.id != c.lid || r.id != c.rid || l.next != c.right {
			continue // stale
		}
		mg, _ := m.rank(c.lid, c.rid)
		l.id = mg.result
		l.hi = r.hi
		l.next = r.next
		if r.next >= 0 {
			prev[r.next] = c.left
		}
		r.hi = r.lo // dead
		add(prev[c.left], c.left)
		add(c.left, l.next)
	}
	st.heap = h
	return syms
}

// bpeText returns the byte-level text of an interned symbol id (for errors and tests).
func (t *Tokenizer) bpeText(id int32) string {
	if id < t.bpe.nVocab {
		return t.tokens[id].text
	}
	if i := int(id - t.bpe.nVocab); i < len(t.bpe.extra) {
		return t.bpe.extra[i]
	}
	return fmt.Sprintf("<sym %d>", id)
}
