package kv

import (
	"fmt"
	"slices"
	"sync"

	"github.com/minfer/minfer/core/backend"
)

// Blocks is KV memory as an arena of fixed-size blocks (a backend.KVArena) from which
// paged caches take what they hold: true paging. A paged cache's positions live in the
// blocks of its block table, in any order, so it grows a block at a time and never
// moves; and caches share blocks: Cache.Share makes a cache start with another's first
// positions (a common prompt prefix: a system prompt, an earlier chat turn) by taking
// references to its blocks instead of computing them. A shared block's positions that
// another cache reads are read-only: a cache about to write into a shared block copies
// it first (copy on write), except the block's writer (of its holders, the one that
// holds most of it valid), which writes past what the others read in place. Only the last,
// partly filled block of a shared prefix is ever copied, by its sharers, as positions
// below a cache's length are never rewritten. A block returns to the arena when no
// cache holds it.
//
// The arena is a budget counted in physical blocks: a block held by several caches
// costs it once. A cache reserves (Cache.Reserve) the blocks it will take itself to
// grow to a length — new blocks and the copies of shared ones it must make — and its
// writes then take blocks from that reserve, so a reserved cache never finds the arena
// spent; the arena lends no block that is reserved. Attached to a Pool (Pool.Page),
// the pool's admission, taking back idle sequences, and its counts read the arena's.
//
// Blocks is safe for concurrent use by its caches' goroutines; the block data is
// written only by forwards, which the engine runs one at a time per backend (Prepare,
// which copies a shared block, must run inside that exclusion).
type Blocks struct {
	arena backend.KVArena
	spec  backend.KVSpec // its caches' shape but Ctx
	block int

	pool *Pool // set by Pool.Page: the pool's own takes count against the arena too

	mu   sync.Mutex
	ref  []int32 // per block: the caches holding it
	free []int32 // blocks with no reference, the next taken last
	// per block: the caches holding it, its index in their tables (a shared block
	// sits at the same index in each), the holder that may write into it in place
	// while it is shared (settleLocked), and the positions below which the others
	// read it
	holders [][]*Cache
	idx     []int32
	writer  []*Cache
	hi      []int32
	refs    int // references of all blocks (a block shared by n caches: n)
	// reserved is the blocks caches reserved and have not taken yet (Cache.resv summed)
	reserved int
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
	bs := &Blocks{arena: a, spec: spec, block: block, ref: make([]int32, blocks), holders: make([][]*Cache, blocks), idx: make([]int32, blocks), writer: make([]*Cache, blocks), hi: make([]int32, blocks)}
	for i := blocks - 1; i >= 0; i-- {
		bs.free = append(bs.free, int32(i))
	}
	return bs, nil
}

// Block is the positions per block, Blocks the arena's number of blocks.
func (bs *Blocks) Block() int  { return bs.block }
func (bs *Blocks) Blocks() int { return len(bs.ref) }

// Used is the number of blocks some cache holds (a shared block counts once: physical
// blocks), Reserved the blocks caches reserved and have not taken yet, and Refs the
// references caches hold (a block shared by n caches counted n times: Refs-Used is
// what sharing saves).
func (bs *Blocks) Used() int {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return len(bs.ref) - len(bs.free)
}

func (bs *Blocks) Reserved() int {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return bs.reserved
}

func (bs *Blocks) Refs() int {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return bs.refs
}

// committed is Used+Reserved: the blocks the arena cannot lend.
func (bs *Blocks) committed() int {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return len(bs.ref) - len(bs.free) + bs.reserved
}

// availLocked is the blocks the arena can lend beyond every reservation (and the
// blocks its pool's own Take took).
func (bs *Blocks) availLocked() int {
	n := len(bs.free) - bs.reserved
	if bs.pool != nil {
		n -= int(bs.pool.taken.Load())
	}
	return n
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

// takeLocked takes a free block for c's table index i, with c its one holder and
// writer, from c's reserve first. The caller checked that one is there for c
// (needLocked, availLocked).
func (bs *Blocks) takeLocked(c *Cache, i int) int32 {
	if len(bs.free) == 0 {
		panic("BUG: kv: a block taken from a spent arena")
	}
	b := bs.free[len(bs.free)-1]
	bs.free = bs.free[:len(bs.free)-1]
	bs.ref[b], bs.idx[b], bs.writer[b], bs.hi[b] = 1, int32(i), c, 0
	bs.holders[b] = append(bs.holders[b][:0], c)
	bs.refs++
	if c.resv > 0 {
		c.resv--
		bs.reserved--
	}
	return b
}

// dropLocked gives back c's reference to each of table's blocks and returns how many
// became free.
func (bs *Blocks) dropLocked(c *Cache, table []int32) int {
	freed := 0
	for _, b := range table {
		hs := bs.holders[b]
		k := slices.Index(hs, c)
		if bs.ref[b] <= 0 || k < 0 {
			panic(fmt.Sprintf("BUG: kv: block %d dropped with %d references, the dropping cache not among them", b, bs.ref[b]))
		}
		bs.holders[b] = slices.Delete(hs, k, k+1)
		bs.ref[b]--
		bs.refs--
		if bs.ref[b] == 0 {
			bs.writer[b], bs.hi[b] = nil, 0
			bs.free = append(bs.free, b)
			freed++
			continue
		}
		bs.settleLocked(b)
	}
	return freed
}

// extentLocked is the end of the positions h holds valid in its block b.
func (bs *Blocks) extentLocked(h *Cache, b int32) int {
	return min(h.hw, (int(bs.idx[b])+1)*bs.block)
}

// settleLocked makes b's writer the holder that holds the most of it valid (the
// others read below what it holds, and it writes only past its length: in place)
// and hi what the others read, after b's holders or their lengths changed; and trims
// the holders' reserves to what they still need (the new writer copies nothing).
// Every shared block has a writer among its holders, so n caches sharing a block
// reserve at most n-1 copies of it: the budget never counts more than the references.
func (bs *Blocks) settleLocked(b int32) {
	hs := bs.holders[b]
	w, best := bs.writer[b], -1
	if slices.Contains(hs, w) {
		best = bs.extentLocked(w, b)
	}
	for _, h := range hs {
		if e := bs.extentLocked(h, b); e > best {
			w, best = h, e
		}
	}
	hi := 0
	for _, h := range hs {
		if h != w {
			hi = max(hi, bs.extentLocked(h, b))
		}
	}
	bs.writer[b], bs.hi[b] = w, int32(hi)
	for _, h := range hs {
		bs.trimLocked(h)
	}
}

// trimLocked gives back what h reserved beyond what it takes to grow to the end its
// last Reserve asked for.
func (bs *Blocks) trimLocked(h *Cache) {
	if h.resv == 0 {
		return
	}
	if need := bs.needLocked(h, h.end); need < h.resv {
		bs.reserved -= h.resv - need
		h.resv = need
	}
}

// mustCopyLocked reports whether c must copy its block b before writing at its length:
// b is shared, and c is not its writer or the others read b past c's length.
func (bs *Blocks) mustCopyLocked(c *Cache, b int32) bool {
	return bs.ref[b] > 1 && (bs.writer[b] != c || c.hw < int(bs.hi[b]))
}

// needLocked is the blocks c takes to write positions [c.hw, end): new blocks past its
// table and copies of shared blocks in the range.
func (bs *Blocks) needLocked(c *Cache, end int) int {
	if end <= c.hw {
		return 0
	}
	first, last := c.hw/bs.block, (end+bs.block-1)/bs.block
	need := max(last-len(c.table), 0)
	for i := first; i < min(last, len(c.table)); i++ {
		if bs.mustCopyLocked(c, c.table[i]) {
			need++
		}
	}
	return need
}

// reserve makes c's reserve hold the blocks it takes to grow to end positions, or to
// the end an earlier reserve asked for when that is further (until unreserveLocked).
func (bs *Blocks) reserve(c *Cache, end int) error {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	c.hw = c.n
	end = max(end, c.end)
	need := bs.needLocked(c, end)
	if need <= c.resv {
		c.end = end
		return nil
	}
	if need > len(bs.ref) { // no wait would help
		return fmt.Errorf("kv: %w: %d blocks of %d positions asked, the whole pool is %d", ErrFull, need, bs.block, len(bs.ref))
	}
	if d := need - c.resv; d > bs.availLocked() {
		return fmt.Errorf("kv: %w: %d more blocks of %d positions asked, %d of %d held or reserved", ErrPoolFull, d, bs.block, len(bs.ref)-bs.availLocked(), len(bs.ref))
	}
	bs.reserved += need - c.resv
	c.resv, c.end = need, end
	return nil
}

// unreserveLocked gives back what c reserved and did not take.
func (bs *Blocks) unreserveLocked(c *Cache) {
	bs.reserved -= c.resv
	c.resv, c.end = 0, 0
}

// prepare makes c's table map positions [c.n, c.n+n) to blocks that c may write: new
// blocks past its table, and a private copy of any shared block in the range it may
// not write in place, taken from c's reserve first. It fails with ErrPoolFull,
// changing nothing that c reads, when the arena has too few blocks to lend.
func (bs *Blocks) prepare(c *Cache, n int) error {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	c.hw = c.n
	need := bs.needLocked(c, c.n+n)
	if need > 0 {
		if avail := c.resv + bs.availLocked(); need > avail {
			return fmt.Errorf("kv: %w: %d blocks of %d positions wanted, %d to lend (%d reserved)", ErrPoolFull, need, bs.block, max(avail, 0), c.resv)
		}
	}
	first, end := c.n/bs.block, (c.n+n+bs.block-1)/bs.block
	for i := first; need > 0 && i < min(end, len(c.table)); i++ {
		if old := c.table[i]; bs.mustCopyLocked(c, old) { // copy on write
			resv := c.resv
			b := bs.takeLocked(c, i)
			if err := bs.arena.CopyBlock(int(b), int(old)); err != nil {
				bs.dropLocked(c, []int32{b})
				bs.reserved += resv - c.resv // the reserve stays whole
				c.resv = resv
				return fmt.Errorf("kv: copying a shared block: %w", err)
			}
			c.table[i] = b
			bs.dropLocked(c, []int32{old})
		}
	}
	for len(c.table) < end {
		c.table = append(c.table, bs.takeLocked(c, len(c.table)))
	}
	c.hw = c.n + n // what it holds once the forward wrote
	if need == 0 {
		return nil
	}
	return bs.arena.SetTable(c.dev, c.table)
}

// truncate gives back the blocks of c's table past its first n positions. Those that
// become free go to c's reserve (a cache rolled back after rejected drafts writes them
// again), unless n is 0: an emptied cache reserves nothing.
func (bs *Blocks) truncate(c *Cache, n int) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if n == 0 {
		defer bs.unreserveLocked(c)
	}
	c.hw = n
	keep := (n + bs.block - 1) / bs.block
	if keep > 0 && keep <= len(c.table) && bs.ref[c.table[keep-1]] > 1 {
		bs.settleLocked(c.table[keep-1]) // c may hold less of its last block now
	}
	if keep >= len(c.table) {
		return
	}
	freed := bs.dropLocked(c, c.table[keep:])
	c.resv += freed
	bs.reserved += freed
	c.table = c.table[:keep]
	if err := bs.arena.SetTable(c.dev, c.table); err != nil {
		panic("BUG: kv: a shorter table refused: " + err.Error())
	}
}

// share makes c hold src's first n positions, c's own blocks and reserve given back.
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
	old := c.table
	bs.unreserveLocked(c)
	c.table, c.n, c.hw = shared, n, n
	for _, b := range shared {
		bs.ref[b]++
		bs.refs++
		bs.holders[b] = append(bs.holders[b], c)
	}
	bs.dropLocked(c, old)
	for _, b := range shared {
		bs.settleLocked(b)
	}
	return bs.arena.SetTable(c.dev, c.table)
}

// close gives back all of c's blocks and its reserve.
func (bs *Blocks) close(c *Cache) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	bs.unreserveLocked(c)
	bs.dropLocked(c, c.table)
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

// Reserved is the blocks c reserved and has not taken yet.
func (c *Cache) Reserved() int {
	if c.blocks == nil {
		return 0
	}
	c.blocks.mu.Lock()
	defer c.blocks.mu.Unlock()
	return c.resv
}
