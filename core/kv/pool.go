package kv

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
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
// Whole caches (one allocation per sequence) take their blocks with Take. Paged caches
// (Page: the arenas of kv.Blocks, one per model, each of the pool's size) are counted
// in physical blocks instead: a block shared by several caches costs the budget once,
// and a sequence reserves only the blocks it writes itself (Blocks, Cache.Reserve),
// so a shared prompt prefix saves budget as well as prefill; a shared block whose
// first holder the pool took back lives on, counted, while others reference it.
//
// A sequence that ended keeps its blocks while nothing else needs them (its cached
// prefix serves the next request on its slot), registered as a Holder; a Take or
// Reserve that finds too few free blocks takes them back from idle holders, oldest
// first, before it fails with ErrPoolFull. A Pool is safe for concurrent use.
type Pool struct {
	block, total int
	bytes        int64 // bytes of one block, for metrics

	mu     sync.Mutex
	taken  atomic.Int64 // blocks Take lent (written under mu; arenas read it)
	idle   []Holder     // oldest first
	arenas []*Blocks    // paged caches' arenas (Page)
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

// Page makes the pool the budget of paged caches' arenas (one per model of a pair),
// each of the pool's block size and number of blocks: from then on its admission and
// counts include what their caches hold and reserve. Call it before any cache of
// theirs exists.
func (p *Pool) Page(arenas ...*Blocks) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, bs := range arenas {
		if bs.Block() != p.block || bs.Blocks() != p.total {
			return fmt.Errorf("kv: an arena of %d blocks of %d positions for a pool of %d of %d", bs.Blocks(), bs.Block(), p.total, p.block)
		}
		if bs.pool != nil {
			return fmt.Errorf("BUG: kv: an arena paged by two pools")
		}
	}
	for _, bs := range arenas {
		bs.pool = p
		p.arenas = append(p.arenas, bs)
	}
	return nil
}

// Blocks is the number of blocks, and Used the number in use: taken, and with paged
// arenas the blocks held (a shared block once) or reserved in the fullest arena.
func (p *Pool) Blocks() int { return p.total }

func (p *Pool) Used() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.usedLocked()
}

func (p *Pool) usedLocked() int {
	n := 0
	for _, bs := range p.arenas {
		n = max(n, bs.committed())
	}
	return int(p.taken.Load()) + n
}

// Bytes is the pool's memory budget and UsedBytes the memory its blocks in use stand
// for: taken, held and reserved (each paged arena's blocks at their own size).
func (p *Pool) Bytes() int64 { return int64(p.total) * p.bytes }

func (p *Pool) UsedBytes() int64 {
	n := p.taken.Load() * p.bytes
	for _, bs := range p.arenas {
		n += int64(bs.committed()) * bs.BlockBytes()
	}
	return n
}

// PhysicalBytes is the memory of the blocks taken and of those paged caches hold, a
// block shared by several caches counted once (reservations not yet written are not
// counted); SharedBytes is the memory sharing saves: the blocks held counted once per
// extra cache holding them.
func (p *Pool) PhysicalBytes() int64 {
	n := p.taken.Load() * p.bytes
	for _, bs := range p.arenas {
		n += int64(bs.Used()) * bs.BlockBytes()
	}
	return n
}

func (p *Pool) SharedBytes() int64 {
	var n int64
	for _, bs := range p.arenas {
		bs.mu.Lock()
		shared := bs.refs - (len(bs.ref) - len(bs.free))
		bs.mu.Unlock()
		n += int64(shared) * bs.BlockBytes()
	}
	return n
}

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
	for p.usedLocked()+n > p.total && p.releaseOldestLocked() {
	}
	if used := p.usedLocked(); used+n > p.total {
		return fmt.Errorf("kv: %w: %d blocks of %d positions asked, %d of %d in use by running sequences", ErrPoolFull, n, p.block, used, p.total)
	}
	p.taken.Add(int64(n))
	return nil
}

// Reserve runs reserve, which reserves blocks of the pool's arenas (Cache.Reserve),
// under the pool's lock, taking back idle holders' blocks, oldest first, while it fails
// with ErrPoolFull; it returns reserve's last error. reserve must be idempotent (a
// reserve only grows to what is asked: Cache.Reserve is).
func (p *Pool) Reserve(reserve func() error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		err := reserve()
		if !errors.Is(err, ErrPoolFull) || !p.releaseOldestLocked() {
			return err
		}
	}
}

// releaseOldestLocked takes the oldest idle holder's blocks back; false when none is idle.
func (p *Pool) releaseOldestLocked() bool {
	if len(p.idle) == 0 {
		return false
	}
	h := p.idle[0]
	p.idle = p.idle[1:]
	h.ReleaseLocked()
	return true
}

// GiveLocked gives n blocks back; the caller holds the pool's lock (Holder.ReleaseLocked).
func (p *Pool) GiveLocked(n int) {
	if taken := int(p.taken.Load()); n < 0 || n > taken {
		panic(fmt.Sprintf("BUG: kv: pool gets %d blocks back, %d are taken", n, taken))
	}
	p.taken.Add(-int64(n))
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
