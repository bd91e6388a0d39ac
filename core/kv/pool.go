package kv

import (
	"errors"
	"fmt"
	"sync"
)

// ErrPoolFull is wrapped by the error of a sequence that needs KV memory the pool
// cannot give, even after taking back the blocks of idle sequences (a server answers
// 503: the request may succeed once others end). It is not ErrFull: the sequence fits
// its context, the machine's budget is what is spent.
var ErrPoolFull = errors.New("kv pool full")

// DefaultBlock is the positions per block of a Pool made with block 0: a cache grows
// by at least this many positions at a time.
const DefaultBlock = 256

// Pool is KV memory as a budget of fixed-size blocks of positions shared by the
// sequences of a server: a sequence's caches take blocks as it grows and give them back
// when they are freed, so n slots do not reserve n whole contexts up front. Blocks are
// counted in positions of one sequence's caches (target and draft together: a block
// of a pair costs both caches' bytes for Block positions).
//
// A sequence that ended keeps its blocks while nothing else needs them (its cached
// prefix serves the next request on its slot), registered as a Holder; a Take that
// finds too few free blocks takes them back from idle holders, oldest first, before it
// fails with ErrPoolFull. A Pool is safe for concurrent use.
type Pool struct {
	block, total int
	bytes        int64 // bytes of one block, for metrics

	mu   sync.Mutex
	used int
	idle []Holder // oldest first
}

// Holder is an idle sequence whose blocks the pool may take back: Release frees its
// caches (giving their blocks back to the pool, which it must do with GiveLocked: the
// pool's lock is held) and forgets what they held.
type Holder interface {
	ReleaseLocked()
}

// NewPool makes a pool of blocks blocks of block positions each (block 0:
// DefaultBlock); blockBytes is the memory of one block, for Bytes and UsedBytes.
func NewPool(block, blocks int, blockBytes int64) (*Pool, error) {
	if block == 0 {
		block = DefaultBlock
	}
	if block < 1 || blocks < 1 {
		return nil, fmt.Errorf("kv: pool of %d blocks of %d positions: want at least one of at least one", blocks, block)
	}
	return &Pool{block: block, total: blocks, bytes: blockBytes}, nil
}

// Block is the positions per block.
func (p *Pool) Block() int { return p.block }

// Blocks is the number of blocks, and Used the number taken.
func (p *Pool) Blocks() int { return p.total }

func (p *Pool) Used() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}

// Bytes is the pool's memory budget and UsedBytes the memory of its taken blocks.
func (p *Pool) Bytes() int64 { return int64(p.total) * p.bytes }

func (p *Pool) UsedBytes() int64 { return int64(p.Used()) * p.bytes }

// BlocksFor is the number of blocks that hold n positions.
func (p *Pool) BlocksFor(n int) int { return (n + p.block - 1) / p.block }

// Take takes n blocks, taking back idle holders' blocks if too few are free. It fails,
// taking nothing, with an error wrapping ErrPoolFull, or ErrFull when n is more than
// the whole pool (no wait would help: for the request, the context is too small).
func (p *Pool) Take(n int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n > p.total { // waiting would not help
		return fmt.Errorf("kv: %w: %d blocks of %d positions asked, the whole pool is %d", ErrFull, n, p.block, p.total)
	}
	for p.used+n > p.total && len(p.idle) > 0 {
		h := p.idle[0]
		p.idle = p.idle[1:]
		h.ReleaseLocked()
	}
	if p.used+n > p.total {
		return fmt.Errorf("kv: %w: %d blocks of %d positions asked, %d of %d in use by running sequences", ErrPoolFull, n, p.block, p.used, p.total)
	}
	p.used += n
	return nil
}

// GiveLocked gives n blocks back; the caller holds the pool's lock (Holder.ReleaseLocked).
func (p *Pool) GiveLocked(n int) {
	if n < 0 || n > p.used {
		panic(fmt.Sprintf("BUG: kv: pool gets %d blocks back, %d are taken", n, p.used))
	}
	p.used -= n
}

// Give gives n blocks back.
func (p *Pool) Give(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.GiveLocked(n)
}

// Idle registers h as idle: its blocks may be taken back until Busy(h).
func (p *Pool) Idle(h Holder) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, h)
}

// Busy takes h off the idle list before it uses its caches again. It reports whether
// h was still there; false means the pool took its blocks back (or it never was idle).
func (p *Pool) Busy(h Holder) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.idle {
		if x == h {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			return true
		}
	}
	return false
}
