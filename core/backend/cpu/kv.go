package cpu

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/minfer/minfer/core/backend"
)

// maxKVBytes bounds one cache (both K and V) so a corrupt context length fails clearly
// instead of exhausting memory.
const maxKVBytes = 1 << 40

// KV is one sequence's key/value cache. Each (layer, kv head, position) holds one head
// vector of HeadDim values, F16 or Q8_0 blocks. Storage is blocks of block positions
// laid out [block][layer][kv head][pos in block], so that attention reads a head's
// keys contiguously within a block; position p is in block table[p/block]. A whole
// cache (NewKV) is one block of Ctx positions; a view of a KVArena shares the arena's
// blocks through its own table.
type KV struct {
	spec     backend.KVSpec
	vecBytes int      // bytes of one head vector
	k, v     []byte   // Q8_0 storage
	k16, v16 []uint16 // F16 storage
	block    int      // positions per block
	table    []int32  // physical block of each logical block
	arena    *KVArena // nil: a whole cache
	freed    bool
}

var _ backend.KV = (*KV)(nil)

// KVArena is the CPU's pool of KV blocks (backend.KVArena): the storage its views
// (KV with arena set) share.
type KVArena struct {
	store KV // the blocks, as one cache of blocks*block positions' storage
	n     int
}

var (
	_ backend.Pager   = (*Backend)(nil)
	_ backend.KVArena = (*KVArena)(nil)
)

// Spec is the shape the cache was made with.
func (kv *KV) Spec() backend.KVSpec { return kv.spec }

// Bytes is the memory of K and V together: a view's is that of the blocks its table
// holds.
func (kv *KV) Bytes() int64 {
	s := kv.spec
	return 2 * int64(s.Layers) * int64(s.KVHeads) * int64(kv.block) * int64(len(kv.table)) * int64(kv.vecBytes)
}

// vec is the index of the head vector (layer, head, pos) in vector units.
func (kv *KV) vec(layer, head, pos int) int {
	b := int(kv.table[pos/kv.block])
	return ((b*kv.spec.Layers+layer)*kv.spec.KVHeads+head)*kv.block + pos%kv.block
}

// mapped is the number of positions the table maps (ops may touch positions below).
func (kv *KV) mapped() int { return min(len(kv.table)*kv.block, kv.spec.Ctx) }

// runs calls fn for the contiguous runs of (layer, head)'s head vectors that hold
// positions 0..n-1, in order: positions i..i+c-1 are vectors v..v+c-1.
func (kv *KV) runs(layer, head, n int, fn func(v, i, c int)) {
	for i := 0; i < n; i += kv.block {
		fn(kv.vec(layer, head, i), i, min(kv.block, n-i))
	}
}

// NewKV allocates a zeroed cache. It fails for non-positive sizes, an unknown type, a
// HeadDim that is odd or (for Q8_0) not a multiple of 32, or a size over 1 TiB.
func (b *Backend) NewKV(spec backend.KVSpec) (backend.KV, error) {
	if b.closed {
		return nil, errClosed
	}
	if spec.Layers < 1 || spec.KVHeads < 1 || spec.HeadDim < 1 || spec.Ctx < 1 {
		return nil, fmt.Errorf("cpu: KV cache %+v: layers, kv heads, head dim and context must be ≥ 1", spec)
	}
	if spec.HeadDim%2 != 0 {
		return nil, fmt.Errorf("cpu: KV cache: head dim %d is odd", spec.HeadDim)
	}
	kv, err := newStore(spec, false)
	if err != nil {
		return nil, err
	}
	kv.block, kv.table = spec.Ctx, []int32{0}
	return kv, nil
}

// newStore allocates the zeroed storage of spec.Ctx positions (unmapped: no table):
// on the Go heap, or for an arena (reserve) as reserved memory (reserveKV) whose pages
// the system backs only once written.
func newStore(spec backend.KVSpec, reserve bool) (*KV, error) {
	kv := &KV{spec: spec}
	switch spec.Type {
	case backend.KVF16:
		kv.vecBytes = 2 * spec.HeadDim
	case backend.KVQ8_0:
		if spec.HeadDim%32 != 0 {
			return nil, fmt.Errorf("cpu: KV cache: q8_0 needs a head dim that is a multiple of 32, got %d", spec.HeadDim)
		}
		kv.vecBytes = spec.HeadDim / 32 * q8_0Bytes
	default:
		return nil, fmt.Errorf("cpu: KV cache: unknown element type %d", int(spec.Type))
	}
	vecs := int64(spec.Layers) * int64(spec.KVHeads) * int64(spec.Ctx)
	if vecs > maxKVBytes/2/int64(kv.vecBytes) {
		return nil, fmt.Errorf("cpu: KV cache %+v: %d layers × %d heads × %d positions is too large", spec, spec.Layers, spec.KVHeads, spec.Ctx)
	}
	n := int(vecs)
	var k, v []byte
	if reserve {
		var err error
		if k, err = reserveKV(n * kv.vecBytes); err != nil {
			return nil, fmt.Errorf("cpu: KV arena of %d MiB: %w", 2*int64(n)*int64(kv.vecBytes)>>20, err)
		}
		if v, err = reserveKV(n * kv.vecBytes); err != nil {
			releaseKV(k)
			return nil, fmt.Errorf("cpu: KV arena of %d MiB: %w", 2*int64(n)*int64(kv.vecBytes)>>20, err)
		}
	}
	if spec.Type == backend.KVF16 {
		if reserve {
			kv.k16 = unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(k))), n*spec.HeadDim)
			kv.v16 = unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(v))), n*spec.HeadDim)
		} else {
			kv.k16 = make([]uint16, n*spec.HeadDim)
			kv.v16 = make([]uint16, n*spec.HeadDim)
		}
	} else if reserve {
		kv.k, kv.v = k, v
	} else {
		kv.k = make([]byte, n*kv.vecBytes)
		kv.v = make([]byte, n*kv.vecBytes)
	}
	return kv, nil
}

// raw is the storage's K and V memory as bytes (for releaseKV).
func (kv *KV) raw() (k, v []byte) {
	if kv.k16 != nil {
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(kv.k16))), 2*len(kv.k16)),
			unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(kv.v16))), 2*len(kv.v16))
	}
	return kv.k, kv.v
}

// NewKVArena allocates blocks zeroed blocks of block positions (backend.Pager).
func (b *Backend) NewKVArena(spec backend.KVSpec, block, blocks int) (backend.KVArena, error) {
	if b.closed {
		return nil, errClosed
	}
	if block < 1 || blocks < 1 || int64(block)*int64(blocks) > 1<<31 {
		return nil, fmt.Errorf("cpu: KV arena of %d blocks of %d positions", blocks, block)
	}
	spec.Ctx = block * blocks
	if spec.Layers < 1 || spec.KVHeads < 1 || spec.HeadDim < 1 || spec.HeadDim%2 != 0 {
		return nil, fmt.Errorf("cpu: KV arena %+v: layers, kv heads and an even head dim ≥ 1 wanted", spec)
	}
	st, err := newStore(spec, true)
	if err != nil {
		return nil, err
	}
	st.block = block
	return &KVArena{store: *st, n: blocks}, nil
}

func (a *KVArena) Block() int  { return a.store.block }
func (a *KVArena) Blocks() int { return a.n }

func (a *KVArena) Bytes() int64 {
	s := a.store.spec
	return 2 * int64(s.Layers) * int64(s.KVHeads) * int64(s.Ctx) * int64(a.store.vecBytes)
}

// View returns a cache of ctx positions on the arena's blocks, with an empty table.
func (a *KVArena) View(ctx int) (backend.KV, error) {
	if a.store.freed {
		return nil, errors.New("cpu: KV arena used after Free")
	}
	if ctx < 1 {
		return nil, fmt.Errorf("cpu: KV view of %d positions", ctx)
	}
	v := a.store
	v.spec.Ctx, v.table, v.arena = ctx, nil, a
	return &v, nil
}

// SetTable gives view its block table.
func (a *KVArena) SetTable(view backend.KV, table []int32) error {
	v := kvOf(view, "SetTable")
	if v.arena != a {
		return errors.New("BUG: cpu: SetTable: the cache is not a view of this arena")
	}
	if len(table) > (v.spec.Ctx+a.store.block-1)/a.store.block {
		return fmt.Errorf("BUG: cpu: SetTable: %d blocks for a view of %d positions", len(table), v.spec.Ctx)
	}
	for _, b := range table {
		if b < 0 || int(b) >= a.n {
			return fmt.Errorf("BUG: cpu: SetTable: block %d outside the arena's %d", b, a.n)
		}
	}
	v.table = table
	return nil
}

// CopyBlock copies block src into block dst.
func (a *KVArena) CopyBlock(dst, src int) error {
	if a.store.freed {
		return errors.New("cpu: KV arena used after Free")
	}
	if dst < 0 || src < 0 || dst >= a.n || src >= a.n {
		return fmt.Errorf("BUG: cpu: CopyBlock %d ← %d outside the arena's %d blocks", dst, src, a.n)
	}
	st := &a.store
	vecs := st.spec.Layers * st.spec.KVHeads * st.block // head vectors per block
	if st.k16 != nil {
		n := vecs * st.spec.HeadDim
		copy(st.k16[dst*n:(dst+1)*n], st.k16[src*n:])
		copy(st.v16[dst*n:(dst+1)*n], st.v16[src*n:])
		return nil
	}
	n := vecs * st.vecBytes
	copy(st.k[dst*n:(dst+1)*n], st.k[src*n:])
	copy(st.v[dst*n:(dst+1)*n], st.v[src*n:])
	return nil
}

func kvOf(x backend.KV, what string) *KV {
	kv, ok := x.(*KV)
	if !ok {
		panic(fmt.Sprintf("BUG: cpu: %s: %T is not a cpu KV cache", what, x))
	}
	if kv.freed || kv.arena != nil && kv.arena.store.freed {
		panic(fmt.Sprintf("BUG: cpu: %s: KV cache used after Free", what))
	}
	return kv
}

// checkAttn validates the op's attention shape against the cache; errors are data
// errors (model metadata), recorded rather than panicking.
func checkAttn(kv *KV, layer int, a backend.Attn) error {
	s := kv.spec
	switch {
	case layer < 0 || layer >= s.Layers:
		return fmt.Errorf("layer %d outside [0, %d)", layer, s.Layers)
	case a.HeadDim != s.HeadDim:
		return fmt.Errorf("head dim %d, cache has %d", a.HeadDim, s.HeadDim)
	case a.KVHeads != s.KVHeads:
		return fmt.Errorf("%d kv heads, cache has %d", a.KVHeads, s.KVHeads)
	case a.Heads < 1 || a.Heads%a.KVHeads != 0:
		return fmt.Errorf("%d heads is not a multiple of %d kv heads", a.Heads, a.KVHeads)
	}
	return nil
}
