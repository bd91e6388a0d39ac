// Package cpu is minfer's pure-Go backend: every op of core/backend executed at once on
// the calling goroutine plus a pool of worker goroutines. It is the reference that defines
// correctness for the other backends.
//
// # Numerics
//
// The ops follow llama.cpp's CPU backend (ggml-cpu) closely enough that logits track
// llama.cpp's on the same GGUF file:
//
//   - MatMul quantizes each activation row once to the weight type's vec-dot type
//     exactly as ggml's x86 code does (Q8_0/Q8_1 with round-half-even and id = 127/amax,
//     Q8_K with the reference quantizer, F16 by round-to-nearest-even) and calls the
//     integer block dot of core/quant. F16 and F32 weights use the summation order of
//     llama.cpp's batched (tinyBLAS, AVX-512) path: 16 FMA lanes then a tree reduction,
//     or ggml_vec_dot_f16/f32's order where tinyBLAS does not apply.
//   - Attention is ggml's one-chunk flash attention: Q converted to the K cache's
//     vec-dot type, online softmax in float32, V accumulated in F16 (F16 cache) or
//     float32 (Q8_0 cache).
//   - RoPE computes theta = pos·base^(-2i/dims) by ggml's float32 recurrence, and its
//     cos/sin with glibc's cosf/sinf (sincosf.go), which libm gives ggml: they are not
//     correctly rounded, and the one-ulp differences reach the logits.
//   - RMSNorm sums squares in float64, SwiGLU uses ggml's vectorised expf; RoPE's
//     rotation and the softmax sum are FMA-contracted as GCC compiles ggml.
//
// With these, the logits of every quantized synthetic golden (Q8_0, Q4_0, Q4_K_M, Q6_K:
// the last prompt position and every greedy step) equal llama.cpp's bit for bit, and the
// llama/qwen2 F16 ones to ≤ 2e-6 (TestGoldenExact; core/model's golden tests cover all
// files). Known differences: llama.cpp runs F16/F32 matmuls of one row (the last layer
// of a prompt, every decode step) in ggml_vec_dot's order and of several rows in
// tinyBLAS's; one order for every nt is what row identity needs, so single-row F16/F32
// results differ from llama.cpp's in the last bits (qwen3-f16: 6e-4 in the logits).
//
// # Row identity
//
// Every op computes each output row with exactly the same operations whatever nt is
// (work is split between goroutines by whole output values, never inside a sum), so an
// nt-row call equals nt 1-row calls bit for bit; Caps().IdentityRows is 0 (unbounded).
//
// # Concurrency
//
// A Backend is used by one goroutine at a time, as core/backend requires; it owns a pool
// of Threads-1 helper goroutines that Close stops.
package cpu

import (
	"errors"
	"fmt"
	"sync"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/quant"
)

// Options configure a CPU backend.
type Options struct {
	// Threads is the number of goroutines an op runs on (the caller included).
	// 0 means one per physical core (PhysicalCores).
	Threads int
	// Order is which ggml build's float rounding the ops reproduce (OrderAVX512 when
	// zero).
	Order Order
}

// Backend executes core/backend's ops on the CPU. Make one with New.
type Backend struct {
	threads int
	order   Order
	pool    *pool

	mu     sync.Mutex // guards err only: ops run on one goroutine, workers record errors
	err    error
	closed bool

	// Scratch reused across calls so the hot paths do not allocate.
	actBuf   []byte         // quantized activation rows of MatMul
	prep     quant.TilePrep // MatMul's activation rows in core/quant's tile layout
	workers  []scratch      // per worker scratch of Attention and RoPE
	attnJobs []attnJob      // AttentionSeqs' per-sequence jobs, reused
	ropeJobs []ropeJob      // RoPEStoreKVSeqs' per-sequence jobs, reused
	parts    []lsePart      // RowStats: every chunk's summary of the call's rows
}

// scratch is one worker's private buffers.
type scratch struct {
	q     []byte    // a query row converted to the K cache's vec-dot type
	acc   []float32 // attention accumulator (float32, or F16 values held in float32)
	v     []float32 // a dequantized V row (Q8_0 cache)
	cache []float32 // RoPE cos/sin cache
	// attendF16's AVX-512 path: one head's scores, and per key the softmax's ms and vs,
	// the exponential and whether the maximum rose there; four heads' ms and vs
	// interleaved and their accumulators (attendF16Z4)
	s, ms, vs, e   []float32
	rise           []bool
	ms4, vs4, acc4 []float32
	lse            []float32 // RowStats: a chunk's exponentials
}

var _ backend.Backend = (*Backend)(nil)

// New makes a CPU backend. Threads ≤ 0 means PhysicalCores().
func New(opts Options) *Backend {
	n := opts.Threads
	if n <= 0 {
		n = PhysicalCores()
	}
	b := &Backend{threads: n, order: opts.Order, pool: newPool(n)}
	b.workers = make([]scratch, n)
	return b
}

// Order is the float rounding order the backend reproduces.
func (b *Backend) Order() Order { return b.order }

// Threads is the number of goroutines ops run on.
func (b *Backend) Threads() int { return b.threads }

// Name is "cpu".
func (b *Backend) Name() string { return "cpu" }

// Caps: the CPU backend is bitwise row-identical for every nt.
func (b *Backend) Caps() backend.Caps { return backend.Caps{IdentityRows: 0} }

// fail records the first error of the current batch of ops.
func (b *Backend) fail(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.mu.Unlock()
}

func (b *Backend) failf(format string, args ...any) {
	b.fail(fmt.Errorf("cpu: "+format, args...))
}

// takeErr returns and clears the pending error.
func (b *Backend) takeErr() error {
	b.mu.Lock()
	err := b.err
	b.err = nil
	b.mu.Unlock()
	return err
}

// Sync returns the first error recorded since the last Sync, TopK or ReadF32; the CPU
// has no queued work to wait for.
func (b *Backend) Sync() error {
	if b.closed {
		return errClosed
	}
	return b.takeErr()
}

var errClosed = errors.New("cpu: backend is closed")

// Close stops the worker goroutines. Buffers, weights and KV caches become unusable;
// weight data (e.g. an mmap) is not owned by the backend and is not unmapped.
func (b *Backend) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.pool.close()
	b.actBuf = nil
	b.prep = quant.TilePrep{}
	b.workers = nil
	return nil
}

// Free releases a buffer, weight or KV early. Using it afterwards is a BUG panic.
func (b *Backend) Free(x any) {
	switch v := x.(type) {
	case *F32:
		v.data, v.freed = nil, true
	case *I32:
		v.data, v.freed = nil, true
	case *Weight:
		v.data, v.f32, v.f16, v.vec, v.tileScales, v.freed = nil, nil, nil, nil, nil, true
	case *KV:
		v.k, v.v, v.k16, v.v16, v.table, v.freed = nil, nil, nil, nil, nil, true
	case *KVArena:
		st := &v.store
		if !st.freed {
			k, vv := st.raw()
			releaseKV(k)
			releaseKV(vv)
		}
		st.k, st.v, st.k16, st.v16, st.freed = nil, nil, nil, nil, true
	case nil:
	default:
		panic(fmt.Sprintf("BUG: cpu: Free of %T, not a cpu backend object", x))
	}
}

// F32 is a float32 buffer of the CPU backend.
type F32 struct {
	data  []float32
	freed bool
}

// Len is the number of elements.
func (f *F32) Len() int { return len(f.data) }

// Data exposes the buffer's elements (for tests and host-side code of this package's
// callers that know they run on the CPU). It is nil after Free.
func (f *F32) Data() []float32 { return f.data }

// I32 is an int32 buffer of the CPU backend.
type I32 struct {
	data  []int32
	freed bool
}

// Len is the number of elements.
func (i *I32) Len() int { return len(i.data) }

// NewF32 allocates n zeroed float32 values.
func (b *Backend) NewF32(n int) (backend.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("cpu: NewF32(%d): negative length", n)
	}
	return &F32{data: make([]float32, n)}, nil
}

// NewI32 allocates n zeroed int32 values.
func (b *Backend) NewI32(n int) (backend.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("cpu: NewI32(%d): negative length", n)
	}
	return &I32{data: make([]int32, n)}, nil
}

// f32 returns the elements of a float32 buffer holding at least need values.
func f32(buf backend.Buffer, need int, what string) []float32 {
	f, ok := buf.(*F32)
	if !ok {
		panic(fmt.Sprintf("BUG: cpu: %s: %T is not a cpu F32 buffer", what, buf))
	}
	if f.freed {
		panic(fmt.Sprintf("BUG: cpu: %s: buffer used after Free", what))
	}
	if need < 0 || len(f.data) < need {
		panic(fmt.Sprintf("BUG: cpu: %s: buffer of %d float32 values, need %d", what, len(f.data), need))
	}
	return f.data[:need]
}

// i32 returns the elements of an int32 buffer holding at least need values.
func i32(buf backend.Buffer, need int, what string) []int32 {
	f, ok := buf.(*I32)
	if !ok {
		panic(fmt.Sprintf("BUG: cpu: %s: %T is not a cpu I32 buffer", what, buf))
	}
	if f.freed {
		panic(fmt.Sprintf("BUG: cpu: %s: buffer used after Free", what))
	}
	if need < 0 || len(f.data) < need {
		panic(fmt.Sprintf("BUG: cpu: %s: buffer of %d int32 values, need %d", what, len(f.data), need))
	}
	return f.data[:need]
}

func checkNT(nt int, what string) {
	if nt < 1 {
		panic(fmt.Sprintf("BUG: cpu: %s: nt = %d, want ≥ 1", what, nt))
	}
}

// WriteF32 copies src into dst[off:].
func (b *Backend) WriteF32(dst backend.Buffer, off int, src []float32) {
	if off < 0 {
		panic(fmt.Sprintf("BUG: cpu: WriteF32: negative offset %d", off))
	}
	d := f32(dst, off+len(src), "WriteF32")
	copy(d[off:], src)
}

// WriteI32 copies src into dst[off:].
func (b *Backend) WriteI32(dst backend.Buffer, off int, src []int32) {
	if off < 0 {
		panic(fmt.Sprintf("BUG: cpu: WriteI32: negative offset %d", off))
	}
	d := i32(dst, off+len(src), "WriteI32")
	copy(d[off:], src)
}

// ReadF32 copies src[off:off+len(dst)] to dst and returns the first pending error.
func (b *Backend) ReadF32(src backend.Buffer, off int, dst []float32) error {
	if b.closed {
		return errClosed
	}
	if off < 0 {
		panic(fmt.Sprintf("BUG: cpu: ReadF32: negative offset %d", off))
	}
	s := f32(src, off+len(dst), "ReadF32")
	copy(dst, s[off:])
	return b.takeErr()
}
