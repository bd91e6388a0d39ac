package kv

import (
	"fmt"
	"sync"

	"github.com/minfer/minfer/core/backend"
)

// Blocks is KV memory as an arena of fixed-size blocks (a backend.KVArena) from which
// paged caches take what they hold: true paging. A paged cache's positions live in the
// blocks of its block table, in any order, so it grows a block at a time and never
// moves; and caches share blocks: Cache.Share makes a cache start with another's first
// positions (a common prompt prefix: a system prompt, an earlier chat turn) by taking
// references to its blocks instead of computing them. A shared block is read-only: a
// cache about to write into one copies it first (copy on write; only the last, partial
// block of a shared prefix is ever copied, as positions below a cache's length are
// never rewritten). A block returns to the arena when no cache holds it.
//
// Blocks is safe for concurrent use by its caches' goroutines; the block data is
// written only by forwards, which the engine runs one at a time per backend (Prepare,
// which copies a shared block, must run inside that exclusion).
type Blocks struct {
	arena backend.KVArena
	spec  backend.KVSpec // its caches' shape but Ctx
	block int

	mu   sync.Mutex
	ref  []int32 // per block: the caches holding it
	free []int32 // blocks with no reference, the next taken last
}

// NewBlocks allocates an arena of blocks blocks of block positions on p for caches of
// spec's shape (spec.Ctx is not used).
func NewBlocks(p backend.Pager, spec backend.KVSpec, block, blocks int) (*Blocks, error) {
	spec.Ctx = block
	if err := CheckSpec(spec); err != nil {
		return nil, err
	}
	if blocks < 1 {
		return nil, fmt.Errorf("kv: an arena of %d blocks", blocks)
	}
	a, err := p.NewKVArena(spec, block, blocks)
	if err != nil {
		return nil, fmt.Errorf("kv: allocating %d blocks of %d positions: %w", blocks, block, err)
	}
	bs := &Blocks{arena: a, spec: spec, block: block, ref: make([]int32, blocks)}
	for i := blocks - 1; i >= 0; i-- {
		bs.free = append(bs.free, int32(i))
	}
	return bs, nil
}

// Block is the positions per block, Blocks the arena's number of blocks.
func (bs *Blocks) Block() int  { return bs.block }
func (bs *Blocks) Blocks() int { return len(bs.ref) }

// Used is the number of blocks some cache holds (a shared block counts once).
func (bs *Blocks) Used() int {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return len(bs.ref) - len(bs.free)
}

// BlockBytes is the memory of one block, Bytes the arena's.
func (bs *Blocks) BlockBytes() int64 { return bs.arena.Bytes() / int64(len(bs.ref)) }
func (bs *Blocks) Bytes() int64      { return bs.arena.Bytes() }

// Arena is the backend storage (to free with the backend's Free once no cache is used).
func (bs *Blocks) Arena() backend.KVArena { return bs.arena }

// NewCache returns an empty paged cache of ctx positions holding no block yet.
func (bs *Blocks) NewCache(ctx int) (*Cache, error) {
	spec := bs.spec
	spec.Ctx = ctx
	if err := CheckSpec(spec); err != nil {
		return nil, err
	}
	dev, err := bs.arena.View(ctx)
	if err != nil {
		return nil, fmt.Errorf("kv: a paged cache of %d positions: %w", ctx, err)
	}
	return &Cache{dev: dev, spec: spec, id: nextID.Add(1), blocks: bs}, nil
}

// takeLocked takes a free block with one reference.
func (bs *Blocks) takeLocked() (int32, error) {
	if len(bs.free) == 0 {
		return 0, fmt.Errorf("kv: %w: all %d blocks of %d positions are held", ErrPoolFull, len(bs.ref), bs.block)
	}
	b := bs.free[len(bs.free)-1]
	bs.free = bs.free[:len(bs.free)-1]
	bs.ref[b] = 1
	return b, nil
}

// dropLocked gives back one reference to each of table's blocks.
func (bs *Blocks) dropLocked(table []int32) {
	for _, b := range table {
		if bs.ref[b] <= 0 {
			panic(fmt.Sprintf("BUG: kv: block %d dropped with %d references", b, bs.ref[b]))
		}
		bs.ref[b]--
		if bs.ref[b] == 0 {
			bs.free = append(bs.free, b)
		}
	}
}

// prepare makes c's table map positions [c.n, c.n+n) to blocks that c alone holds:
// new blocks past its table, and a private copy of any shared block in the range. It
// fails with ErrPoolFull, changing nothing that c reads, when the arena has too few
// free blocks.
func (bs *Blocks) prepare(c *Cache, n int) error {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	first, end := c.n/bs.block, (c.n+n+bs.block-1)/bs.block
	need := max(end-len(c.table), 0)
	for i := first; i < min(end, len(c.table)); i++ {
		if bs.ref[c.table[i]] > 1 {
			need++
		}
	}
	if need == 0 {
		return nil
	}
	if need > len(bs.free) {
		return fmt.Errorf("kv: %w: %d blocks of %d positions wanted, %d of %d free", ErrPoolFull, need, bs.block, len(bs.free), len(bs.ref))
	}
	for i := first; i < min(end, len(c.table)); i++ {
		if old := c.table[i]; bs.ref[old] > 1 { // copy on write
			b, _ := bs.takeLocked()
			if err := bs.arena.CopyBlock(int(b), int(old)); err != nil {
				bs.dropLocked([]int32{b})
				return fmt.Errorf("kv: copying a shared block: %w", err)
			}
			c.table[i] = b
			bs.dropLocked([]int32{old})
		}
	}
	for len(c.table) < end {
		b, _ := bs.takeLocked()
		c.table = append(c.table, b)
	}
	return bs.arena.SetTable(c.dev, c.table)
}

// truncate gives back the blocks of c's table past its first n positions.
func (bs *Blocks) truncate(c *Cache, n int) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	keep := (n + bs.block - 1) / bs.block
	if keep >= len(c.table) {
		return
	}
	bs.dropLocked(c.table[keep:])
	c.table = c.table[:keep]
	if err := bs.arena.SetTable(c.dev, c.table); err != nil {
		panic("BUG: kv: a shorter table refused: " + err.Error())
	}
}

// share makes c hold src's first n positions, c's own blocks given back.
func (bs *Blocks) share(c, src *Cache, n int) error {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if src.blocks != bs {
		return fmt.Errorf("BUG: kv: sharing a cache of another arena")
	}
	if n < 0 || n > len(src.table)*bs.block || n > c.spec.Ctx {
		return fmt.Errorf("kv: sharing %d positions of a cache mapping %d (room %d)", n, len(src.table)*bs.block, c.spec.Ctx)
	}
	k := (n + bs.block - 1) / bs.block
	shared := append([]int32(nil), src.table[:k]...)
	for _, b := range shared {
		bs.ref[b]++
	}
	bs.dropLocked(c.table)
	c.table, c.n = shared, n
	return bs.arena.SetTable(c.dev, c.table)
}

// close gives back all of c's blocks.
func (bs *Blocks) close(c *Cache) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	bs.dropLocked(c.table)
	c.table = nil
}

// Holds reports c's block table length: the blocks it references (shared or not).
func (c *Cache) Holds() int {
	if c.blocks == nil {
		return 0
	}
	c.blocks.mu.Lock()
	defer c.blocks.mu.Unlock()
	return len(c.table)
}
