package kv

import (
	"errors"
	"slices"
	"testing"

	"github.com/minfer/minfer/core/backend"
)

// fakeArena records tables and copies; its blocks hold no data.
type fakeArena struct {
	block, n int
	copies   [][2]int
}

func (a *fakeArena) NewKVArena(spec backend.KVSpec, block, blocks int) (backend.KVArena, error) {
	a.block, a.n = block, blocks
	return a, nil
}
func (a *fakeArena) Block() int                       { return a.block }
func (a *fakeArena) Blocks() int                      { return a.n }
func (a *fakeArena) Bytes() int64                     { return int64(a.n) * 100 }
func (a *fakeArena) View(ctx int) (backend.KV, error) { return &fakeView{ctx: ctx}, nil }
func (a *fakeArena) SetTable(v backend.KV, t []int32) error {
	v.(*fakeView).table = slices.Clone(t)
	return nil
}
func (a *fakeArena) CopyBlock(dst, src int) error {
	a.copies = append(a.copies, [2]int{dst, src})
	return nil
}

type fakeView struct {
	ctx   int
	table []int32
}

func (v *fakeView) Spec() backend.KVSpec { return backend.KVSpec{Ctx: v.ctx} }
func (v *fakeView) Bytes() int64         { return 0 }

// TestBlocksAccounting: paged caches take blocks as they grow and give them back on
// truncate, reset and close; a shared prefix costs its blocks once, a write into a
// shared block copies it first; an arena without enough free blocks refuses with
// ErrPoolFull and changes nothing.
func TestBlocksAccounting(t *testing.T) {
	fa := &fakeArena{}
	bs, err := NewBlocks(fa, backend.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 32}, 4, 6)
	if err != nil {
		t.Fatal(err)
	}
	newCache := func() *Cache {
		c, err := bs.NewCache(32)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	grow := func(c *Cache, n int) error {
		if err := c.Prepare(n); err != nil {
			return err
		}
		return c.Append(n)
	}
	a := newCache()
	if err := grow(a, 10); err != nil { // 3 blocks
		t.Fatal(err)
	}
	if got := bs.Used(); got != 3 {
		t.Fatalf("10 positions: %d blocks used, want 3", got)
	}
	b := newCache()
	if err := b.Share(a, 10); err != nil {
		t.Fatal(err)
	}
	if got, want := b.Bytes(), 3*bs.BlockBytes(); bs.Used() != 3 || got != want {
		t.Fatalf("shared: %d blocks used, the sharer's bytes %d; want 3 and %d", bs.Used(), got, want)
	}
	if err := grow(b, 1); err != nil { // position 10: into shared block 2, copied
		t.Fatal(err)
	}
	if len(fa.copies) != 1 || bs.Used() != 4 {
		t.Fatalf("write into the shared partial block: copies %v, %d blocks used; want one copy and 4", fa.copies, bs.Used())
	}
	at := a.dev.(*fakeView).table
	bt := b.dev.(*fakeView).table
	if !slices.Equal(at[:2], bt[:2]) || at[2] == bt[2] {
		t.Fatalf("tables %v and %v: want the first two blocks shared, the third each its own", at, bt)
	}
	c := newCache()
	if err := grow(c, 9); !errors.Is(err, ErrPoolFull) { // 3 blocks, 2 free
		t.Fatalf("9 positions with 2 free blocks: err %v, want ErrPoolFull", err)
	}
	if c.Len() != 0 || c.Holds() != 0 || bs.Used() != 4 {
		t.Fatalf("a refused cache holds %d positions and %d blocks, %d used; want none and 4", c.Len(), c.Holds(), bs.Used())
	}
	if err := a.Truncate(4); err != nil { // keeps block 0 only
		t.Fatal(err)
	}
	if got := bs.Used(); got != 3 { // a: 0; b: 0, 1, its 2 (block 1 held by b alone now)
		t.Fatalf("after a's truncation: %d blocks used, want 3", got)
	}
	a.Close()
	b.Reset()
	if got := bs.Used(); got != 0 {
		t.Fatalf("after close and reset: %d blocks used, want 0", got)
	}
	if err := grow(c, 24); err != nil { // the whole arena
		t.Fatal(err)
	}
	c.Close()
	if got := bs.Used(); got != 0 {
		t.Fatalf("after the last close: %d blocks used, want 0", got)
	}
}
