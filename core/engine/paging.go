package engine

import (
	"fmt"
	"sync"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
)

// Paging gives the pooled sessions of a model pair (a server's slots, Config.Paging)
// paged caches and shares prompt prefixes between them. Each model's caches are views
// of one arena of kv.Blocks, so a cache grows a block at a time and never moves or
// recomputes. A session that starts a request looks at the
// prompts the other sessions' target caches hold (each published when its prefill
// ends, withdrawn before its cache changes below it: the next prefill, a reclaim, a
// reset, a close) and, when one shares a longer prefix with its prompt than its own
// cache does, starts its target cache from that one's blocks (kv.Cache.Share: read-only
// references, the partial last block copied when it writes) instead of computing them:
// a system prompt shared by requests on several slots is computed once. With row
// identity the shared entries have the bits the session would have computed, so the
// output is the same (tested). The draft model's cache shares the same way, what its
// prefill left in it (the prompt's first positions, as far as the request drafted).
//
// The pool is the budget, counted in physical blocks (kv.Pool.Page): a session
// reserves only the blocks it writes itself, past the prefix it shares, so sharing
// saves the prefix's prefill, its memory and its budget — a tight pool admits more
// requests that share a system prompt.
type Paging struct {
	target, draft *kv.Blocks
	b             []backend.Backend // the arenas' backends, to free them

	mu   sync.Mutex
	held map[*Session]held // published prompt prefixes
}

// held is what a session published: its target cache holds ids at positions 0..len-1
// and its draft cache (when dc is set) ids[:dn], unchanged until it withdraws them.
type held struct {
	ids []int32
	c   *kv.Cache
	dn  int
	dc  *kv.Cache
}

// NewPaging makes the arenas for pool's sessions on target (and draft, when not nil):
// as many blocks of pool.Block() positions as the pool's, of element types kt and
// dkt, the pool their budget (kv.Pool.Page). It returns nil and no error where the
// backend does not page (backend.Pager: the CPU does; CUDA keeps whole caches) or
// captures graphs.
func NewPaging(pool *kv.Pool, target, draft *model.Model, kt, dkt backend.KVType) (*Paging, error) {
	for _, m := range []*model.Model{target, draft} {
		if m == nil {
			continue
		}
		if _, ok := m.Backend().(backend.Pager); !ok || m.CapturesGraphs() {
			return nil, nil
		}
	}
	p := &Paging{held: map[*Session]held{}}
	var err error
	n := pool.Blocks()
	if p.target, err = target.NewBlocks(pool.Block(), n, kt); err != nil {
		return nil, fmt.Errorf("engine: paged KV for %s: %w", target.Name, err)
	}
	p.b = append(p.b, target.Backend())
	if draft != nil {
		if p.draft, err = draft.NewBlocks(pool.Block(), n, dkt); err != nil {
			p.Close()
			return nil, fmt.Errorf("engine: paged KV for %s: %w", draft.Name, err)
		}
		p.b = append(p.b, draft.Backend())
	}
	arenas := []*kv.Blocks{p.target}
	if p.draft != nil {
		arenas = append(arenas, p.draft)
	}
	if err := pool.Page(arenas...); err != nil {
		p.Close()
		return nil, fmt.Errorf("engine: paged KV: %w", err)
	}
	return p, nil
}

// Close frees the arenas; every session on them must be closed first.
func (p *Paging) Close() {
	for i, bs := range []*kv.Blocks{p.target, p.draft} {
		if bs != nil && i < len(p.b) {
			p.b[i].Free(bs.Arena())
		}
	}
	p.target, p.draft = nil, nil
}

// UsedBytes is the memory of the arenas' blocks some cache holds (a block shared by
// several caches counted once).
func (p *Paging) UsedBytes() int64 {
	var n int64
	for _, bs := range []*kv.Blocks{p.target, p.draft} {
		if bs != nil {
			n += int64(bs.Used()) * bs.BlockBytes()
		}
	}
	return n
}

// Target is the target model's arena (for its block counts), Draft the draft's (nil
// without a draft model).
func (p *Paging) Target() *kv.Blocks { return p.target }
func (p *Paging) Draft() *kv.Blocks  { return p.draft }

// blocks is the arena of sq's model.
func (p *Paging) blocks(s *Session, sq *seq) *kv.Blocks {
	if lm(sq) == s.draft {
		return p.draft
	}
	return p.target
}

// publish records that s's target cache holds ids (which s must not change until
// withdraw).
func (p *Paging) publish(s *Session, ids []int32, c *kv.Cache) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.held[s]
	h.ids, h.c, h.dc = append(h.ids[:0], ids...), c, nil
	p.held[s] = h
}

// publishDraft records that s's draft cache holds the first n of the ids publish
// recorded.
func (p *Paging) publishDraft(s *Session, n int, c *kv.Cache) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h, ok := p.held[s]; ok && h.c != nil && n <= len(h.ids) {
		h.dn, h.dc = n, c
		p.held[s] = h
	}
}

// withdraw forgets what s published, before its cache changes below it.
func (p *Paging) withdraw(s *Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h, ok := p.held[s]; ok {
		h.c, h.dc = nil, nil
		p.held[s] = h
	}
}

// forget drops s (closed).
func (p *Paging) forget(s *Session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.held, s)
}

// share makes c start with the longest prefix of prompt[:limit] that another session's
// target cache holds, if longer than keep, and returns the positions c now holds
// (keep when nothing longer is held).
// With draft, the same for the draft caches.
func (p *Paging) share(s *Session, c *kv.Cache, prompt []int32, keep, limit int, draft bool) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	best, from := keep, (*kv.Cache)(nil)
	for o, h := range p.held {
		src, ids := h.c, h.ids
		if draft {
			src, ids = h.dc, h.ids[:min(h.dn, len(h.ids))]
		}
		if o == s || src == nil {
			continue
		}
		n := 0
		for n < len(ids) && n < limit && ids[n] == prompt[n] {
			n++
		}
		if n > best {
			best, from = n, src
		}
	}
	if from == nil {
		return keep, nil
	}
	if err := c.Share(from, best); err != nil {
		return 0, err
	}
	return best, nil
}
