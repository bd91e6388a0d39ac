package kv

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/minfer/minfer/core/backend"
)

// dataArena is a fakeArena whose blocks hold one value per position, copied by
// CopyBlock: what a cache reads through its table can be checked.
type dataArena struct {
	fakeArena
	data [][]int
}

func (a *dataArena) NewKVArena(spec backend.KVSpec, block, blocks int) (backend.KVArena, error) {
	a.data = make([][]int, blocks)
	for i := range a.data {
		a.data[i] = make([]int, block)
	}
	a.block, a.n = block, blocks
	return a, nil
}

func (a *dataArena) CopyBlock(dst, src int) error {
	copy(a.data[dst], a.data[src])
	return nil
}

// TestBlocksRandomOps: random reserves, writes, rollbacks, shares, unreserves and
// closes of caches on one paged pool (seeded). After every step each cache reads
// exactly the values it wrote or shared (no write in place ever reaches what another
// cache reads), a write within a cache's reserve (made since its last rollback or
// share, as the engine does) never finds the arena spent, the
// references are the tables' blocks, and held + reserved stays within the budget;
// at the end every block and reservation is back.
func TestBlocksRandomOps(t *testing.T) {
	const block, blocks, ctx, caches = 4, 14, 16, 4
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 7))
		fa := &dataArena{}
		bs, err := NewBlocks(fa, backend.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 32}, block, blocks)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := NewPool(block, blocks, 1)
		if err := p.Page(bs); err != nil {
			t.Fatal(err)
		}
		cs := make([]*Cache, caches)
		want := make([][]int, caches)
		for i := range cs {
			cs[i], _ = bs.NewCache(ctx)
		}
		next := 1
		stale := make([]bool, caches) // rolled back or shared since its last Reserve
		for step := range 400 {
			i := r.IntN(caches)
			c := cs[i]
			op := r.IntN(10)
			switch {
			case op < 4: // write k positions, reserving first unless the reserve covers them
				k := 1 + r.IntN(5)
				if c.n+k > ctx {
					continue
				}
				if stale[i] || c.end < c.n+k {
					stale[i] = false
					if err := c.Reserve(min(ctx, c.n+k+r.IntN(6))); errors.Is(err, ErrPoolFull) {
						continue
					} else if err != nil {
						t.Fatalf("seed %d step %d: reserve: %v", seed, step, err)
					}
				}
				if err := c.Prepare(k); err != nil {
					t.Fatalf("seed %d step %d: cache %d writing %d at %d within its reserve (to %d): %v", seed, step, i, k, c.n, c.end, err)
				}
				for q := c.n; q < c.n+k; q++ {
					fa.data[c.table[q/block]][q%block] = next
					want[i] = append(want[i], next)
					next++
				}
				c.Append(k)
			case op < 6: // roll back
				m := r.IntN(c.n + 1)
				c.Truncate(m)
				want[i], stale[i] = want[i][:m], true
			case op < 8: // share another cache's prefix
				j := r.IntN(caches)
				if j == i || cs[j].n == 0 {
					continue
				}
				m := 1 + r.IntN(cs[j].n)
				if err := c.Share(cs[j], m); err != nil {
					t.Fatalf("seed %d step %d: share: %v", seed, step, err)
				}
				want[i], stale[i] = slices.Clone(want[j][:m]), true
			case op < 9: // the request ended
				c.Unreserve()
			default: // taken back
				c.Close()
				cs[i], _ = bs.NewCache(ctx)
				want[i] = nil
			}
			refs := 0
			for k, c := range cs {
				refs += len(c.table)
				for q := range c.n {
					if got := fa.data[c.table[q/block]][q%block]; got != want[k][q] {
						t.Fatalf("seed %d step %d: cache %d position %d reads %d, want %d", seed, step, k, q, got, want[k][q])
					}
				}
			}
			if bs.Refs() != refs || bs.Used()+bs.Reserved() > blocks || p.Used() > blocks {
				t.Fatalf("seed %d step %d: refs %d (tables %d), %d held + %d reserved of %d", seed, step, bs.Refs(), refs, bs.Used(), bs.Reserved(), blocks)
			}
		}
		for _, c := range cs {
			c.Close()
		}
		if bs.Used() != 0 || bs.Reserved() != 0 || bs.Refs() != 0 {
			t.Fatalf("seed %d: after Close %d held, %d reserved, %d references", seed, bs.Used(), bs.Reserved(), bs.Refs())
		}
	}
}
