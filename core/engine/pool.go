package engine

import (
	"fmt"

	"github.com/minfer/minfer/core/kv"
)

// KV memory from a pool (Config.Pool). A pooled session allocates no cache up front.
// A request takes, when it starts, the blocks for its prompt and the tokens it may
// generate (max_tokens, when bounded, plus a round's draft), so a bounded request never
// grows again; an unbounded one grows at the start of a round that would not fit,
// doubling, its caches reallocated and the tokens they held recomputed (one prefill of
// the sequence so far: with row identity the recomputed entries have the bits the first
// ones had, so the output is the same). At its end the session keeps its blocks, and
// with them its cached prefix for the slot's next request, until the pool needs them
// for another sequence (kv.Pool.Take takes back idle sessions' blocks, oldest first);
// a request the pool cannot serve fails with kv.ErrPoolFull, never a wrong answer.
//
// With Config.Paging (backends that page: the CPU) the caches are paged views of one
// arena per model (paging.go): a cache takes arena blocks as it writes and never moves,
// so growing costs no recomputation, and sessions share prompt prefixes. The pool then
// counts physical blocks: a request reserves, per cache, only the blocks it will write
// itself (its tokens past a shared prefix, and a copy of the prefix's partly filled
// last block), a block shared by several caches costs the budget once, and what a
// request reserved and did not write goes back when it ends. Without it (a backend
// that keeps whole caches: CUDA) paging is by cache: a sequence's cache is one
// allocation of whole blocks, reallocated and recomputed as above when it grows. Either
// way the pool is the budget: memory is taken as sequences grow, returned when they
// end, and bounded over all of them.

var _ kv.Holder = (*Session)(nil)

// ErrPoolFull is wrapped by the error of a request the KV pool cannot serve now
// (kv.ErrPoolFull): a server answers 503.
var ErrPoolFull = kv.ErrPoolFull

// seqs are the session's real models.
func (s *Session) seqs() []*seq {
	var out []*seq
	for _, m := range []lm{s.target, s.draft} {
		if sq, ok := m.(*seq); ok {
			out = append(out, sq)
		}
	}
	return out
}

// capacity is the positions the session's caches all hold room for (paged caches:
// the blocks its largest cache references or holds in reserve).
func (s *Session) capacity() int {
	if s.paging != nil {
		return min(s.pagedBlocks()*s.pool.Block(), s.Ctx())
	}
	room := -1
	for _, sq := range s.seqs() {
		n := 0
		if sq.c != nil {
			n = sq.c.Ctx()
		}
		if room < 0 || n < room {
			room = n
		}
	}
	return max(room, 0)
}

// reserve makes the caches hold room for n positions (at most the context), taking
// blocks from the pool: the room rounded up to whole blocks, at least double what the
// caches held. Without a pool the caches hold the whole context already.
func (s *Session) reserve(n int) error {
	if s.pool != nil && s.paging != nil {
		return s.reservePaged(n)
	}
	have := s.capacity()
	if s.pool == nil || n <= have {
		return nil
	}
	b := s.pool.Block()
	room := min(s.Ctx(), max(n, 2*have))
	room = min(s.Ctx(), s.pool.BlocksFor(room)*b)
	need := s.pool.BlocksFor(room) - s.blocks
	if err := s.pool.Take(need); err != nil {
		return fmt.Errorf("engine: %d more positions (%d in the caches): %w", n-have, have, err)
	}
	s.blocks += need // (a cache that failed to grow keeps its old room, within these)
	for _, sq := range s.seqs() {
		if sq.c != nil && sq.c.Ctx() >= room {
			continue
		}
		if err := s.regrow(sq, room); err != nil {
			return err
		}
	}
	return nil
}

// reservePaged makes each paged cache reserve the arena blocks it will take to hold n
// positions (at most the context): those it writes itself, past what it shares. The
// pool takes idle sessions' blocks back while the arenas have too few to lend.
func (s *Session) reservePaged(n int) error {
	if err := s.pagedCaches(); err != nil {
		return err
	}
	n = min(n, s.Ctx())
	err := s.pool.Reserve(func() error {
		for _, sq := range s.seqs() {
			if err := sq.c.Reserve(n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("engine: room for %d positions (%d in the cache): %w", n, s.target.len(), err)
	}
	return nil
}

// pagedCaches makes the empty paged caches of a session that has none (new, or the
// pool took them back).
func (s *Session) pagedCaches() error {
	for _, sq := range s.seqs() {
		if sq.c == nil {
			c, err := s.paging.blocks(s, sq).NewCache(s.Ctx())
			if err != nil {
				return err
			}
			sq.c = c
		}
	}
	return nil
}

// unreserve gives back what the paged caches reserved and did not write (a request
// that ended).
func (s *Session) unreserve() {
	if s.paging == nil {
		return
	}
	for _, sq := range s.seqs() {
		if sq.c != nil {
			sq.c.Unreserve()
		}
	}
}

// pagedBlocks is the blocks the session's largest paged cache references (shared ones
// included) or holds in reserve.
func (s *Session) pagedBlocks() int {
	n := 0
	for _, sq := range s.seqs() {
		if sq.c != nil {
			n = max(n, sq.c.Holds()+sq.c.Reserved())
		}
	}
	return n
}

// regrow reallocates sq's cache with room positions and recomputes what it held, the
// sequence's first sq.len() tokens.
func (s *Session) regrow(sq *seq, room int) error {
	nc, err := sq.m.NewKV(room, sq.kt)
	if err != nil {
		return fmt.Errorf("engine: growing the KV cache to %d positions: %w", room, err)
	}
	ids := s.hist[:sq.len()]
	tmp := &seq{m: sq.m, c: nc, logical: room, kt: sq.kt}
	for len(ids) > 0 {
		n := min(len(ids), s.batch)
		if err := tmp.fill(ids[:n]); err != nil {
			nc.Close()
			return fmt.Errorf("engine: recomputing the KV cache after growing it: %w", err)
		}
		ids = ids[n:]
	}
	if sq.c != nil {
		sq.c.Close()
	}
	sq.c = nc
	return nil
}

// freeCaches frees the caches and returns the blocks they held.
func (s *Session) freeCaches() int {
	for _, sq := range s.seqs() {
		if sq.c != nil {
			sq.c.Close()
		}
		if s.pool != nil {
			sq.c = nil
		}
	}
	n := s.blocks
	s.blocks = 0
	return n
}

// ReleaseLocked is the pool taking an idle session's blocks back: the caches are
// freed and the session forgets its sequence (its next request prefills in full).
func (s *Session) ReleaseLocked() {
	if s.paging != nil {
		s.paging.withdraw(s)
	}
	s.pool.GiveLocked(s.freeCaches())
	s.hist = s.hist[:0]
	s.reclaims.Add(1)
}

// Reclaims counts the times the pool took the session's blocks back while it was idle
// (each time it forgot its sequence). A caller that keeps its own record of what the
// session holds (a server's cached prefix) reads it before and after: a change means
// the record is stale. Safe to call from any goroutine.
func (s *Session) Reclaims() uint64 { return s.reclaims.Load() }

// PoolBlocks is the number of pool blocks the session holds (0 without a pool; paged
// caches: the blocks its largest cache references, a shared one included, or holds in
// reserve).
func (s *Session) PoolBlocks() int {
	if s.paging != nil {
		return s.pagedBlocks()
	}
	return s.blocks
}
