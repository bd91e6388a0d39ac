// Package kv keeps the bookkeeping of one sequence's KV cache: how many positions of the
// device storage (a backend.KV) are valid, appending, rolling back to a position, and
// memory accounting. The device storage itself is written by the model's forward pass
// (backend.RoPEStoreKV); this package only decides which positions count.
//
// Rolling back is free: positions at or beyond Len are simply overwritten by the next
// forward. A Cache is used by one goroutine at a time.
package kv

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/minfer/minfer/core/backend"
)

// ErrFull is wrapped by every "context full" error, so callers can tell a full cache
// from other failures with errors.Is.
var ErrFull = errors.New("context full")

// Allocator is the part of a backend that makes and frees KV storage
// (backend.Backend satisfies it).
type Allocator interface {
	NewKV(spec backend.KVSpec) (backend.KV, error)
	Free(x any)
}

// Cache is one sequence's KV cache: device storage for Spec().Ctx positions of which
// the first Len() are valid. A whole cache (New) owns storage for all of them; a paged
// cache (Blocks.NewCache) holds blocks of an arena as it grows, maybe shared.
type Cache struct {
	alloc Allocator
	dev   backend.KV
	spec  backend.KVSpec
	n     int
	id    uint64
	// paged caches: the arena and the block table (guarded by blocks.mu)
	blocks *Blocks
	table  []int32
	resv   int // blocks reserved and not taken yet
	end    int // the length the reserve is for
	hw     int // the length the arena knows of (Len, or what the forward Prepare readied writes)
}

var nextID atomic.Uint64

// CheckSpec reports what is wrong with spec for a cache, if anything (New checks it).
func CheckSpec(spec backend.KVSpec) error {
	if spec.Layers <= 0 || spec.KVHeads <= 0 || spec.HeadDim <= 0 || spec.Ctx <= 0 {
		return fmt.Errorf("kv: invalid spec %+v", spec)
	}
	if spec.Type == backend.KVQ8_0 && spec.HeadDim%32 != 0 {
		return fmt.Errorf("kv: q8_0 cache needs a head size that is a multiple of 32, have %d", spec.HeadDim)
	}
	return nil
}

// New allocates the device storage for spec on a and returns an empty cache.
func New(a Allocator, spec backend.KVSpec) (*Cache, error) {
	if err := CheckSpec(spec); err != nil {
		return nil, err
	}
	dev, err := a.NewKV(spec)
	if err != nil {
		return nil, fmt.Errorf("kv: allocating %s cache of %d positions: %w", spec.Type, spec.Ctx, err)
	}
	return &Cache{alloc: a, dev: dev, spec: spec, id: nextID.Add(1)}, nil
}

// Device is the backend storage the forward pass writes into.
func (c *Cache) Device() backend.KV { return c.dev }

// ID is unique per Cache in this process (graph keys use it to tell caches apart).
func (c *Cache) ID() uint64 { return c.id }

// Spec is the cache's shape.
func (c *Cache) Spec() backend.KVSpec { return c.spec }

// Len is the number of valid positions (the next token goes to position Len).
func (c *Cache) Len() int { return c.n }

// Ctx is the number of positions the cache holds.
func (c *Cache) Ctx() int { return c.spec.Ctx }

// Room is the number of positions still free.
func (c *Cache) Room() int { return c.spec.Ctx - c.n }

// Check returns a context-full error (wrapping ErrFull) if n more positions do not fit.
func (c *Cache) Check(n int) error {
	if n < 0 {
		return fmt.Errorf("BUG: kv: negative append %d", n)
	}
	if c.n+n > c.spec.Ctx {
		return fmt.Errorf("kv: %w (%d tokens): %d in use, %d more asked", ErrFull, c.spec.Ctx, c.n, n)
	}
	return nil
}

// Prepare readies storage for the next n positions before a forward writes them: a
// paged cache takes the blocks they need and copies a shared block they fall in
// (ErrPoolFull when the arena has too few free). A whole cache has nothing to do. The
// caller runs it where the cache's forwards run (the backend's exclusion), since it
// may copy block data.
func (c *Cache) Prepare(n int) error {
	if err := c.Check(n); err != nil {
		return err
	}
	if c.blocks == nil || n == 0 {
		return nil
	}
	return c.blocks.prepare(c, n)
}

// Reserve makes a paged cache reserve, in its arena, the blocks it will take to grow
// to n positions (from Len: new blocks, and copies of the shared blocks it must not
// write in place), so that Prepare up to n positions finds them. A reserve only grows
// (Unreserve gives it back; truncating to 0, Share and Close do too); a block a
// rollback frees goes back to it. A rollback into a block another cache holds more of
// may make a write there need a copy: reserve again after one (a new prompt's prefill
// does; a speculative rollback stays past what others share). It fails, reserving nothing more, with ErrPoolFull when the
// arena has too few blocks to lend (a Pool's Reserve takes back idle sequences' blocks
// first) and with ErrFull when the whole arena is too few. A whole cache has nothing
// to do.
func (c *Cache) Reserve(n int) error {
	if c.blocks == nil {
		return nil
	}
	return c.blocks.reserve(c, min(n, c.spec.Ctx))
}

// Unreserve gives back the blocks a paged cache reserved and did not take.
func (c *Cache) Unreserve() {
	if c.blocks != nil {
		c.blocks.mu.Lock()
		defer c.blocks.mu.Unlock()
		c.blocks.unreserveLocked(c)
	}
}

// Paged reports whether the cache is a paged one (Blocks.NewCache).
func (c *Cache) Paged() bool { return c.blocks != nil }

// Share makes c, a paged cache of the same arena, hold src's first n positions by
// referencing src's blocks (read-only until one of them writes: copy on write), giving
// back what c held and reserved. Both caches stay usable on their own; c's next forward starts at
// position n. src may be used by another goroutine meanwhile, as long as its first n
// positions are valid and do not change during the call (Share reads its block table
// under the arena's lock, never its length).
func (c *Cache) Share(src *Cache, n int) error {
	if c.blocks == nil || c == src {
		return fmt.Errorf("BUG: kv: Share needs two paged caches")
	}
	return c.blocks.share(c, src, n)
}

// Append marks n more positions valid (after a forward wrote them). It fails, changing
// nothing, if they do not fit.
func (c *Cache) Append(n int) error {
	if err := c.Check(n); err != nil {
		return err
	}
	c.n += n
	return nil
}

// Truncate rolls the cache back to its first n positions (speculative rollback, or
// re-using a shared prompt prefix). n must be within [0, Len].
func (c *Cache) Truncate(n int) error {
	if n < 0 || n > c.n {
		return fmt.Errorf("kv: truncate to %d outside [0, %d]", n, c.n)
	}
	c.n = n
	if c.blocks != nil {
		c.blocks.truncate(c, n)
	}
	return nil
}

// Reset empties the cache.
func (c *Cache) Reset() {
	c.n = 0
	if c.blocks != nil {
		c.blocks.truncate(c, 0)
	}
}

// Bytes is the device memory the cache occupies (a paged cache: the blocks it holds,
// shared ones included).
func (c *Cache) Bytes() int64 {
	if c.blocks != nil {
		return int64(c.Holds()) * c.blocks.BlockBytes()
	}
	return c.dev.Bytes()
}

// UsedBytes is the memory of the valid positions.
func (c *Cache) UsedBytes() int64 { return SpecBytes(c.spec) * int64(c.n) / int64(c.spec.Ctx) }

// Close frees the device storage (a paged cache gives its blocks back); the Cache
// must not be used afterwards.
func (c *Cache) Close() {
	if c.blocks != nil {
		if c.dev != nil {
			c.blocks.close(c)
			c.dev = nil
		}
		return
	}
	if c.dev != nil {
		c.alloc.Free(c.dev)
		c.dev = nil
	}
}

// SpecBytes is the memory a cache of spec needs (keys and values of every layer), the
// same formula the backends allocate by: F16 2 bytes per value, Q8_0 34 bytes per 32.
func SpecBytes(s backend.KVSpec) int64 {
	vals := int64(s.Layers) * 2 * int64(s.Ctx) * int64(s.KVHeads) * int64(s.HeadDim)
	switch s.Type {
	case backend.KVQ8_0:
		return vals / 32 * 34
	default:
		return vals * 2
	}
}

// ParseType maps "f16" or "q8_0" (as given to --kv) to a KV element type.
func ParseType(s string) (backend.KVType, error) {
	switch s {
	case "f16", "F16", "":
		return backend.KVF16, nil
	case "q8_0", "Q8_0":
		return backend.KVQ8_0, nil
	}
	return 0, fmt.Errorf("kv: unknown cache type %q (want f16 or q8_0)", s)
}
