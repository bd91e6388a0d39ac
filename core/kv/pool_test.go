package kv

import (
	"errors"
	"runtime"
	"testing"

	"github.com/minfer/minfer/core/backend"
)

type holder struct {
	p      *Pool
	blocks int
	freed  bool
}

func (h *holder) ReleaseLocked() { h.p.GiveLocked(h.blocks); h.blocks, h.freed = 0, true }

// TestPool: blocks are counted as they are taken and given back; a Take that finds too
// few free takes idle holders' blocks back, oldest first and no more of them than it
// needs; a busy holder is never touched; what cannot be served now is ErrPoolFull, and
// what could never be is ErrFull.
func TestPool(t *testing.T) {
	p, err := NewPool(0, 10, 100)
	if err != nil {
		t.Fatal(err)
	}
	if p.Block() != DefaultBlock || p.BlocksFor(DefaultBlock+1) != 2 || p.Bytes() != 1000 {
		t.Fatalf("block %d, BlocksFor %d, bytes %d", p.Block(), p.BlocksFor(DefaultBlock+1), p.Bytes())
	}
	a, b, c := &holder{p: p, blocks: 4}, &holder{p: p, blocks: 3}, &holder{p: p, blocks: 3}
	for _, h := range []*holder{a, b, c} {
		if err := p.Take(h.blocks); err != nil {
			t.Fatal(err)
		}
	}
	if p.Used() != 10 || p.UsedBytes() != 1000 {
		t.Fatalf("used %d (%d bytes), want 10", p.Used(), p.UsedBytes())
	}
	if err := p.Take(1); !errors.Is(err, ErrPoolFull) {
		t.Fatalf("full pool, nothing idle: got %v, want ErrPoolFull", err)
	}
	p.Idle(a)
	p.Idle(b)
	if err := p.Take(2); err != nil {
		t.Fatal(err)
	}
	if !a.freed || b.freed || p.Used() != 8 {
		t.Fatalf("after taking 2 with a and b idle: a freed %v, b freed %v, used %d; want a only (oldest), 8 used", a.freed, b.freed, p.Used())
	}
	if p.Busy(a) || !p.Busy(b) {
		t.Fatal("Busy: a was taken back (false), b was still idle (true)")
	}
	if err := p.Take(3); !errors.Is(err, ErrPoolFull) || b.freed {
		t.Fatalf("busy b: got %v, b freed %v; want ErrPoolFull and b kept", err, b.freed)
	}
	if err := p.Take(11); !errors.Is(err, ErrFull) || errors.Is(err, ErrPoolFull) {
		t.Fatalf("more than the pool: got %v, want ErrFull", err)
	}
	p.Give(8)
	if p.Used() != 0 {
		t.Fatalf("used %d after giving everything back", p.Used())
	}
	if _, err := NewPool(16, 0, 1); err == nil {
		t.Fatal("a pool of no blocks: got no error")
	}
}

// cacheHolder is an idle sequence whose paged cache the pool may take back.
type cacheHolder struct{ c *Cache }

func (h *cacheHolder) ReleaseLocked() { h.c.Close() }

// TestPagedPool: a pool paging an arena counts physical blocks. A sharer reserves only
// what it writes past the shared prefix (the copy of the partly filled last block
// included); the cache it shares from writes past the prefix in place, taking no
// block; the pool admits by what is held or reserved, taking an idle holder back only
// when that is too much, and the shared blocks then live on, counted; a rollback's
// blocks return to the reserve; what could never fit is ErrFull; Close gives back
// every block and reservation.
func TestPagedPool(t *testing.T) {
	fa := &fakeArena{}
	bs, err := NewBlocks(fa, backend.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 32}, 4, 8)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPool(4, 8, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Page(bs); err != nil {
		t.Fatal(err)
	}
	newCache := func() *Cache {
		c, err := bs.NewCache(64)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	grow := func(c *Cache, n int) {
		t.Helper()
		if err := c.Prepare(n); err != nil {
			t.Fatal(err)
		}
		if err := c.Append(n); err != nil {
			t.Fatal(err)
		}
	}
	reserve := func(c *Cache, n int) error { return p.Reserve(func() error { return c.Reserve(n) }) }
	check := func(what string, used, reserved, pool int) {
		t.Helper()
		if bs.Used() != used || bs.Reserved() != reserved || p.Used() != pool {
			t.Fatalf("%s: arena holds %d, reserves %d, the pool counts %d; want %d, %d, %d", what, bs.Used(), bs.Reserved(), p.Used(), used, reserved, pool)
		}
	}
	a := newCache()
	if err := reserve(a, 10); err != nil {
		t.Fatal(err)
	}
	check("a reserved 10 positions", 0, 3, 3)
	grow(a, 10)
	check("a wrote them", 3, 0, 3)
	b := newCache()
	if err := b.Share(a, 10); err != nil {
		t.Fatal(err)
	}
	if err := reserve(b, 14); err != nil { // a copy of block 2, and block 3
		t.Fatal(err)
	}
	check("b shares a's 10 and reserves 4 more", 3, 2, 5)
	if got, want := p.SharedBytes(), int64(3*100); got != want { // fakeArena: 100 bytes a block
		t.Errorf("SharedBytes %d, want %d", got, want)
	}
	grow(a, 1) // position 10, in shared block 2, past what b reads: in place
	if len(fa.copies) != 0 {
		t.Fatalf("a wrote past what b reads: copies %v, want none", fa.copies)
	}
	grow(b, 4) // positions 10-13: b copies block 2
	if len(fa.copies) != 1 {
		t.Fatalf("b wrote into the shared block: copies %v, want one", fa.copies)
	}
	check("b wrote its 4", 5, 0, 5)
	c := newCache()
	if err := reserve(c, 16); !errors.Is(err, ErrPoolFull) {
		t.Fatalf("16 positions with 3 blocks to lend, nothing idle: got %v, want ErrPoolFull", err)
	}
	check("a refused reservation", 5, 0, 5)
	p.Idle(&cacheHolder{a})
	if err := reserve(c, 16); err != nil { // takes a back: blocks 0 and 1 live on in b
		t.Fatal(err)
	}
	check("a taken back, c reserved", 4, 4, 8)
	if err := p.Take(1); !errors.Is(err, ErrPoolFull) {
		t.Fatalf("the arena's blocks all held or reserved: Take got %v, want ErrPoolFull", err)
	}
	grow(c, 16)
	if err := c.Truncate(5); err != nil { // blocks 2 and 3 back to c's reserve
		t.Fatal(err)
	}
	check("c rolled back to 5", 6, 2, 8)
	grow(c, 11)
	check("c wrote again", 8, 0, 8)
	d := newCache()
	if err := d.Reserve(40); !errors.Is(err, ErrFull) || errors.Is(err, ErrPoolFull) {
		t.Fatalf("10 blocks of an arena of 8: got %v, want ErrFull", err)
	}
	b.Close()
	c.Close()
	d.Close()
	check("after Close", 0, 0, 0)
}

// TestPagedPoolOrphanedShare: when the cache that filled a shared block lets it go,
// one of its sharers becomes the block's writer and gives back the copy it reserved:
// n caches sharing a block reserve at most n-1 copies, so a pool of whole contexts
// always admits as many running sequences (the budget never counts more than the
// references).
func TestPagedPoolOrphanedShare(t *testing.T) {
	bs, err := NewBlocks(&fakeArena{}, backend.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 32}, 4, 3)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPool(4, 3, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Page(bs); err != nil {
		t.Fatal(err)
	}
	caches := make([]*Cache, 3) // three sequences of one block's context each
	for i := range caches {
		if caches[i], err = bs.NewCache(4); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c := caches[0], caches[1], caches[2]
	if err := a.Reserve(3); err != nil {
		t.Fatal(err)
	}
	if err := a.Prepare(2); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(2); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Cache{b, c} {
		if err := s.Share(a, 2); err != nil {
			t.Fatal(err)
		}
		if err := s.Reserve(4); err != nil { // a copy of the shared block
			t.Fatal(err)
		}
	}
	if bs.Used() != 1 || bs.Reserved() != 2 || p.Used() != 3 {
		t.Fatalf("a and two sharers: %d held, %d reserved, the pool counts %d; want 1, 2, 3", bs.Used(), bs.Reserved(), p.Used())
	}
	a.Close() // b or c writes the block in place now: one copy is enough
	if bs.Used() != 1 || bs.Reserved() != 1 || p.Used() != 2 {
		t.Fatalf("after a let the block go: %d held, %d reserved, the pool counts %d; want 1, 1, 2", bs.Used(), bs.Reserved(), p.Used())
	}
	d, err := bs.NewCache(4)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Reserve(4); err != nil { // the third sequence of a three-context pool
		t.Fatalf("a third sequence beside two sharers: %v", err)
	}
	for _, s := range []*Cache{b, c} {
		if err := s.Prepare(2); err != nil {
			t.Fatal(err)
		}
		if err := s.Append(2); err != nil {
			t.Fatal(err)
		}
	}
	if bs.Used() != 2 || bs.Reserved() != 1 {
		t.Fatalf("both sharers wrote: %d held, %d reserved; want 2 (one copy) and 1 (d's)", bs.Used(), bs.Reserved())
	}
	for _, s := range []*Cache{b, c, d} {
		s.Close()
	}
	if bs.Used() != 0 || bs.Reserved() != 0 || p.Used() != 0 {
		t.Fatalf("after Close: %d held, %d reserved, the pool counts %d; want none", bs.Used(), bs.Reserved(), p.Used())
	}
}

// BenchmarkPagedRound is the KV bookkeeping of one decoding round of a paged session
// on a server of 32 slots all decoding at once (a goroutine each, sharing one pool and
// arena): the round's reserve of room for its next row (engine: Session.reserve, under
// the pool's lock, "pool") or the same reserve on the arena alone ("arena": what a
// round costs without the pool's lock), then the forward's Prepare and Append. Each
// slot's request reserves 100 prompt + 64 generated positions up front, as a bounded
// request does, and starts again when it has written them, so most rounds find their
// reserve already holds their row. ns/op is per round of one slot.
func BenchmarkPagedRound(b *testing.B) {
	const slots, block, request = 32, 256, 164
	for _, mode := range []string{"pool", "arena"} {
		b.Run(mode, func(b *testing.B) {
			bs, err := NewBlocks(&fakeArena{}, backend.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 32}, block, slots)
			if err != nil {
				b.Fatal(err)
			}
			p, err := NewPool(block, slots, 100)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Page(bs); err != nil {
				b.Fatal(err)
			}
			reserve := func(c *Cache, n int) error {
				if mode == "arena" {
					return c.Reserve(n)
				}
				return p.Reserve(func() error { return c.Reserve(n) })
			}
			b.SetParallelism((slots + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				c, err := bs.NewCache(4096)
				if err != nil {
					b.Error(err)
					return
				}
				defer c.Close()
				for pb.Next() {
					if c.Len() == request {
						if err := c.Truncate(0); err != nil {
							b.Error(err)
							return
						}
					}
					if c.Len() == 0 {
						if err := reserve(c, request); err != nil { // the request's prefill
							b.Error(err)
							return
						}
					}
					if err := reserve(c, c.Len()+1); err != nil { // the round's
						b.Error(err)
						return
					}
					if err := c.Prepare(1); err != nil {
						b.Error(err)
						return
					}
					if err := c.Append(1); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
