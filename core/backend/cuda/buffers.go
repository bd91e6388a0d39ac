package cuda

import (
	"fmt"
	"unsafe"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/cuda/driver"
)

// Buffer is n elements of 4 bytes (float32 or int32) in device memory.
//
// A float buffer may carry an 8-bit shadow: its first q8n values quantized in blocks of
// 32 (int8 values at q8, float scales after them), as the mat-vec kernels read them.
// Producers (RMSNorm, SwiGLU, Attention) write it alongside their output and MatMul
// quantizes into it, so the activations of several matmuls on one input are quantized
// once. The shadow is valid while nothing wrote the buffer since (gen) and no graph
// capture or replay intervened (epoch): host-side bookkeeping cannot see a replay.
type Buffer struct {
	p   driver.DevicePtr
	n   int
	i32 bool

	gen            uint64
	q8             driver.DevicePtr
	q8n            int
	q8gen, q8epoch uint64
}

// Len is the number of elements.
func (x *Buffer) Len() int { return x.n }

func (b *Backend) newBuf(n int, i32 bool) (backend.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("cuda: buffer of %d elements: negative length", n)
	}
	defer b.enter()()
	p, err := b.alloc(fmt.Sprintf("buffer of %d elements", n), int64(max(n, 1))*4)
	if err != nil {
		return nil, err
	}
	if err := b.stream.Memset32(p, 0, max(n, 1)); err != nil {
		b.free(p)
		return nil, err
	}
	return &Buffer{p: p, n: n, i32: i32}, nil
}

// NewF32 allocates a zeroed float32 buffer of n elements.
func (b *Backend) NewF32(n int) (backend.Buffer, error) { return b.newBuf(n, false) }

// NewI32 allocates a zeroed int32 buffer of n elements.
func (b *Backend) NewI32(n int) (backend.Buffer, error) { return b.newBuf(n, true) }

// buf checks a buffer belongs to this backend, has the element type and holds need
// elements; anything else is a programming error.
func buf(x backend.Buffer, need int, i32 bool, what string) *Buffer {
	d, ok := x.(*Buffer)
	if !ok || d == nil {
		panic(fmt.Sprintf("BUG: cuda: %s: buffer %T is not a CUDA buffer", what, x))
	}
	if d.i32 != i32 {
		panic(fmt.Sprintf("BUG: cuda: %s: wrong element type", what))
	}
	if d.p == 0 {
		panic(fmt.Sprintf("BUG: cuda: %s: buffer used after Free", what))
	}
	if need > d.n {
		panic(fmt.Sprintf("BUG: cuda: %s: buffer holds %d elements, need %d", what, d.n, need))
	}
	return d
}

func f32(x backend.Buffer, need int, what string) *Buffer { return buf(x, need, false, what) }
func i32(x backend.Buffer, need int, what string) *Buffer { return buf(x, need, true, what) }

// wrote records that an op (enqueued now) writes x, which stales its shadow.
func (x *Buffer) wrote() { x.gen++ }

// shadow returns x's 8-bit shadow arrays (allocating them on first use), sized for the
// whole buffer; 0 on allocation failure (recorded).
func (b *Backend) shadow(x *Buffer) (q, d driver.DevicePtr) {
	if x.q8 == 0 {
		n := ceilDiv(x.n, 32) * 32
		p, err := b.alloc("activation shadow", int64(n)+int64(n/32)*4)
		if err != nil {
			b.fail(err)
			return 0, 0
		}
		x.q8 = p
	}
	return x.q8, x.q8 + driver.DevicePtr(ceilDiv(x.n, 32)*32)
}

// shadowValid reports whether x's shadow holds its first n values as they are now.
func (b *Backend) shadowValid(x *Buffer, n int) bool {
	return x.q8 != 0 && x.q8gen == x.gen && x.q8epoch == b.epoch && x.q8n >= n
}

// setShadow records that the op just enqueued wrote x's first n values' shadow.
func (b *Backend) setShadow(x *Buffer, n int) {
	x.q8gen, x.q8epoch, x.q8n = x.gen, b.epoch, n
}

// at is the address of element i.
func (x *Buffer) at(i int) driver.DevicePtr { return x.p + driver.DevicePtr(4*i) }

// WriteF32 copies src into dst[off:] (enqueued; src may be reused on return).
func (b *Backend) WriteF32(dst backend.Buffer, off int, src []float32) {
	d := f32(dst, off+len(src), "WriteF32")
	if len(src) == 0 {
		return
	}
	defer b.enter()()
	d.wrote()
	b.fail(b.stream.CopyHtoD(d.at(off), unsafe.Pointer(&src[0]), 4*len(src)))
}

// WriteI32 copies src into dst[off:] (enqueued; src may be reused on return).
func (b *Backend) WriteI32(dst backend.Buffer, off int, src []int32) {
	d := i32(dst, off+len(src), "WriteI32")
	if len(src) == 0 {
		return
	}
	defer b.enter()()
	b.fail(b.stream.CopyHtoD(d.at(off), unsafe.Pointer(&src[0]), 4*len(src)))
}

// maxPinnedRead bounds the pinned staging memory ReadF32 grows to (8 rows of a 152k
// vocabulary's logits fit); larger reads copy synchronously to pageable memory.
const maxPinnedRead = 16 << 20

// ReadF32 waits for enqueued work, then copies src[off:off+len(dst)] to dst.
func (b *Backend) ReadF32(src backend.Buffer, off int, dst []float32) error {
	if b.closed {
		return errClosed
	}
	s := f32(src, off+len(dst), "ReadF32")
	defer b.enter()()
	n := 4 * len(dst)
	if n > 0 && n <= maxPinnedRead && !b.capturing {
		// Through pinned memory: the copy is enqueued behind the work and takeErr's one
		// synchronisation covers both.
		if b.growHost(hostData + n); b.host != nil && b.host.Len() >= hostData+n {
			if err := b.stream.CopyDtoH(b.host.Ptr(hostData), s.at(off), n); err == nil {
				if err := b.takeErr(); err != nil {
					return err
				}
				copy(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), n), b.host.Bytes()[hostData:hostData+n])
				return nil
			}
		}
	}
	if err := b.takeErr(); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return driver.CopyDtoH(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), n), s.at(off))
}

// KV is one sequence's cache: per layer, K and V as [Ctx][KVHeads*HeadDim] halves (F16)
// or int8 values plus f16 scales per 32 values (Q8_0).
type KV struct {
	spec          backend.KVSpec
	k, v          driver.DevicePtr // values
	kd, vd        driver.DevicePtr // Q8_0 scales
	bytes         int64
	layerVals     int64 // bytes of one layer's K values
	layerScales   int64
	chunk, nsplit int // attention: the smallest chunk, the splits (fixed by Ctx)
	maxChunk      int // the largest chunk a row of this cache can have
}

// Spec is the cache's shape.
func (kv *KV) Spec() backend.KVSpec { return kv.spec }

// Bytes is the device memory the cache holds.
func (kv *KV) Bytes() int64 { return kv.bytes }

// NewKV allocates one sequence's cache after checking it fits in free device memory.
func (b *Backend) NewKV(spec backend.KVSpec) (backend.KV, error) {
	if spec.Layers < 1 || spec.KVHeads < 1 || spec.HeadDim < 1 || spec.Ctx < 1 {
		return nil, fmt.Errorf("cuda: KV cache %+v: every size must be positive", spec)
	}
	if spec.HeadDim > 512 {
		return nil, fmt.Errorf("cuda: KV cache: head dim %d above the supported 512", spec.HeadDim)
	}
	kv := &KV{spec: spec}
	vals := int64(spec.Ctx) * int64(spec.KVHeads) * int64(spec.HeadDim)
	switch spec.Type {
	case backend.KVF16:
		kv.layerVals = 2 * vals
	case backend.KVQ8_0:
		if spec.HeadDim%32 != 0 {
			return nil, fmt.Errorf("cuda: Q8_0 KV cache needs a head dim multiple of 32, got %d", spec.HeadDim)
		}
		kv.layerVals, kv.layerScales = vals, vals/32*2
	default:
		return nil, fmt.Errorf("cuda: KV cache type %v not supported", spec.Type)
	}
	// A block of the per-head split-K attention (the kernels every launch can fall back
	// to) holds a head's query and the scores of its largest split in shared memory: 4
	// bytes a position, ctx / 32 of them past 1,024 positions.
	kv.maxChunk, kv.nsplit = b.attnSplit(spec.Ctx)
	if need := attnScoresShared(1, spec.HeadDim, kv.maxChunk); need > b.attnShared {
		return nil, fmt.Errorf("cuda: KV cache of %d positions: attention would need %d KiB of shared memory a block (splits of %d positions), above the %d KiB this device allows; use a shorter context",
			spec.Ctx, ceilDiv(need, 1024), kv.maxChunk, b.attnShared/1024)
	}
	per := kv.layerVals + kv.layerScales
	kv.bytes = 2 * per * int64(spec.Layers)
	defer b.enter()()
	what := fmt.Sprintf("KV cache (%d layers × %d positions, %v)", spec.Layers, spec.Ctx, spec.Type)
	n := kv.layerVals * int64(spec.Layers)
	var err error
	if kv.k, err = b.alloc(what, n); err != nil {
		return nil, err
	}
	if kv.v, err = b.alloc(what, n); err != nil {
		b.free(kv.k)
		return nil, err
	}
	if kv.layerScales > 0 {
		ns := kv.layerScales * int64(spec.Layers)
		if kv.kd, err = b.alloc(what, ns); err == nil {
			kv.vd, err = b.alloc(what, ns)
		}
		if err != nil {
			b.free(kv.k)
			b.free(kv.v)
			b.free(kv.kd)
			return nil, err
		}
	}
	kv.chunk = b.tier.AttnChunk
	fmt.Fprintf(b.log, "cuda: KV cache %.1f MiB (%d layers, ctx %d, %v)\n", mib(kv.bytes), spec.Layers, spec.Ctx, spec.Type)
	return kv, nil
}

// attnSplit picks the attention splits of a cache of ctx positions — AttnMaxSplits,
// fewer for a cache shorter than that many of the tier's smallest chunks — and the
// largest chunk any row of it can have (the shared memory attn_part needs).
func (b *Backend) attnSplit(ctx int) (maxChunk, nsplit int) {
	minChunk := b.tier.AttnChunk
	nsplit = min(b.tier.AttnMaxSplits, ceilDiv(ctx, minChunk))
	return attnChunk(ctx, nsplit, minChunk), nsplit
}

// attnChunk is the positions per attention split of a row that sees p1 positions
// (attn.cu split_chunk): p1 over nsplit splits, rounded up to a multiple of 32, at least
// minChunk. It depends on the row's position and the cache size only, never on nt.
func attnChunk(p1, nsplit, minChunk int) int {
	return max(minChunk, ceilDiv(ceilDiv(p1, nsplit), 32)*32)
}

// Free releases a buffer, weight or KV cache.
func (b *Backend) Free(x any) {
	defer b.enter()()
	switch v := x.(type) {
	case *Buffer:
		b.free(v.p)
		b.free(v.q8)
		v.p, v.q8 = 0, 0
	case *Weight:
		for _, p := range []driver.DevicePtr{v.q, v.d, v.e} {
			b.free(p)
		}
		b.uploaded -= v.bytes
		v.q, v.d, v.e = 0, 0, 0
	case *KV:
		for _, p := range []driver.DevicePtr{v.k, v.v, v.kd, v.vd} {
			b.free(p)
		}
		v.k, v.v, v.kd, v.vd = 0, 0, 0, 0
	default:
		panic(fmt.Sprintf("BUG: cuda: Free(%T)", x))
	}
}

// scratch is a device area reused by an op across calls.
type scratch struct {
	p driver.DevicePtr
	n int64
}

// scratchFor returns at least n bytes of the named scratch area. A grown area's old
// memory is retired, not freed: graphs captured earlier still point at it.
func (b *Backend) scratchFor(name string, n int64) driver.DevicePtr {
	s := b.scratch[name]
	if s != nil && s.n >= n {
		return s.p
	}
	n = max(n, 1<<20)
	if s != nil {
		n = max(n, 2*s.n)
		b.retired = append(b.retired, s.p)
		delete(b.allocs, s.p)
	}
	p, err := b.alloc("scratch "+name, n)
	if err != nil {
		b.fail(err)
		return 0
	}
	b.scratch[name] = &scratch{p: p, n: n}
	return p
}
