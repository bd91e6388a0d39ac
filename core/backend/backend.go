// Package backend defines the seam between the architectures in core/model and the
// devices that run them: buffers and a closed list of coarse, fused operations. The CPU
// backend (core/backend/cpu) executes each op at once and is the reference that defines
// correctness; the CUDA backend (core/backend/cuda) enqueues kernels on a stream and may
// capture a whole decode step into a graph.
//
// # Shapes
//
// Activations are row-major float32 matrices of nt rows (tokens) by n columns,
// living in a Buffer. A Weight is a matrix of Rows × Cols values in a block format of
// core/quant, row-major, each row Cols values (Cols is a multiple of the type's block
// size). Vectors (norm weights, biases) are Weights with Rows == 1.
//
// # Execution model
//
// Ops do not return errors: they are enqueued (CUDA) or executed (CPU) in order on the
// backend's one stream. A failure is recorded and returned by the next Sync, TopK or Read.
// Passing buffers too small for the stated shapes is a programming error (BUG panic).
// Every op reads its positions from an I32 Buffer (not a host slice) so a CUDA graph
// captured once can be replayed with new positions.
//
// # Row identity
//
// For every op, row i of an nt-row call must produce exactly the bits that a 1-row call
// on row i alone would produce (no batch-dependent summation order). Backends that cannot
// keep that beyond some nt say so in Caps.IdentityRows.
//
// # Concurrency
//
// A Backend is used by one goroutine at a time (the engine serialises forwards). Buffers,
// Weights and KV caches belong to the backend that made them and must not be shared
// with another backend.
package backend

import (
	"fmt"

	"github.com/minfer/minfer/core/quant"
)

// Buffer is device memory owned by a backend: Len elements of its element type.
type Buffer interface {
	Len() int
}

// Weight is an immutable matrix of Rows × Cols values of Type, resident on the backend.
type Weight interface {
	Type() quant.Type
	Rows() int
	Cols() int
}

// Rounded is implemented by weights a backend holds as a copy in another type than
// their own (the CUDA backend keeps a type it has no kernels for as an F16 copy): Embed
// then returns each value rounded through HeldAs (quant.F16: its binary16 rounding),
// and MatMul computes with those values. A weight that does not implement Rounded, or
// whose HeldAs is its Type or F32, is held exactly.
type Rounded interface {
	HeldAs() quant.Type
}

// KVType is the element type of a KV cache.
type KVType int

const (
	KVF16  KVType = iota // IEEE half per element
	KVQ8_0               // ggml Q8_0 blocks of 32 values along head_dim
)

func (t KVType) String() string {
	switch t {
	case KVF16:
		return "f16"
	case KVQ8_0:
		return "q8_0"
	}
	return "kv?"
}

// KVSpec sizes a KV cache for one sequence.
type KVSpec struct {
	Layers  int
	KVHeads int
	HeadDim int
	Ctx     int // positions 0..Ctx-1
	Type    KVType
}

// KV is the device storage of one sequence's keys and values for every layer. Entry
// (layer, pos) is written by RoPEStoreKV; core/kv does the bookkeeping of how many
// positions are valid. Rolling back is free: positions beyond the valid length are
// simply overwritten later.
type KV interface {
	Spec() KVSpec
	Bytes() int64
}

// Pager is implemented by backends whose KV caches can be paged (the CPU): a cache is
// then a view of an arena of fixed-size blocks, reading and writing position p in
// block table[p/block] of its block table, so a cache's blocks need not be contiguous
// and several caches may share blocks (a common prompt prefix, read-only: core/kv
// counts references and copies a shared block before a cache writes into it). Every
// op that takes a KV works on a view as on a whole cache, with the same bits. Backends
// without it (CUDA) keep one contiguous cache per sequence.
type Pager interface {
	// NewKVArena allocates blocks blocks of block positions for caches of spec's
	// layers, KV heads, head size and type (spec.Ctx is not used).
	NewKVArena(spec KVSpec, block, blocks int) (KVArena, error)
}

// KVArena is a Pager's pool of KV blocks. Free releases it (its views must not be
// used afterwards). An arena and its views are used under the backend's ops'
// concurrency rules: no change to a view's table while an op that reads it runs.
type KVArena interface {
	// Block is the positions per block and Blocks the number of blocks.
	Block() int
	Blocks() int
	// Bytes is the arena's memory (keys and values of every block).
	Bytes() int64
	// View returns a KV of ctx positions whose table is empty: an op may touch
	// position p only once SetTable gave it a table of more than p/Block() entries.
	View(ctx int) (KV, error)
	// SetTable makes view read and write position p in block table[p/Block()]; the
	// view keeps table (the caller changes it only through another SetTable). Entries
	// must be blocks of the arena, at most ctx/Block() rounded up of them.
	SetTable(view KV, table []int32) error
	// CopyBlock copies block src's keys and values (every layer) into block dst.
	CopyBlock(dst, src int) error
}

// RoPEMode selects which value pairs rotate together.
type RoPEMode int

const (
	RoPENormal RoPEMode = iota // pairs (2i, 2i+1): llama
	RoPENeoX                   // pairs (i, i+HeadDim/2): qwen2, qwen3
)

// RoPE describes rotary embedding. Freq scaling follows llama.cpp's rope_ext with
// ext_factor 0: theta_i = pos * Base^(-2i/Dims) * FreqScale (plus the per-dimension
// factors of FreqFactors when non-nil, which divide theta_i, as for llama3 rope scaling).
type RoPE struct {
	Mode        RoPEMode
	Dims        int // rotated dimensions per head (== HeadDim for every supported arch)
	Base        float32
	FreqScale   float32   // 1 for no linear scaling
	FreqFactors []float32 // len Dims/2, or nil
}

// Attn describes grouped-query attention over the cache.
type Attn struct {
	Heads   int
	KVHeads int // Heads % KVHeads == 0; head h reads KV head h/(Heads/KVHeads)
	HeadDim int
	Scale   float32 // usually 1/sqrt(HeadDim)
}

// Caps are what a backend declares about itself.
type Caps struct {
	// IdentityRows is the largest nt for which the row identity above is bitwise;
	// 0 means unbounded.
	IdentityRows int
	// Queued: ops are enqueued and run later, on a device (a CUDA stream), so the host
	// waiting between two ops costs a round trip; false where each op runs at once (the
	// CPU). The engine runs a round's draft steps as one chain (DraftChainer) only where
	// ops are queued: at once, a chain saves nothing and runs the steps past a min_conf
	// cut for nothing.
	Queued bool
}

// Backend is a device executing the closed list of ops below.
//
// In every op, nt ≥ 1 is the number of rows, and buffers hold at least the stated
// number of elements. dst may alias a source only where the op says so.
type Backend interface {
	Name() string
	Caps() Caps

	// NewWeight makes a Rows × Cols weight of type t from its raw GGUF bytes (exactly
	// t.RowBytes(cols) * rows bytes). The CPU backend may keep a reference to data (an
	// mmap view) instead of copying; data must stay valid until Close.
	NewWeight(name string, t quant.Type, rows, cols int, data []byte) (Weight, error)
	// NewF32 and NewI32 allocate zeroed buffers of n elements.
	NewF32(n int) (Buffer, error)
	NewI32(n int) (Buffer, error)
	// NewKV allocates one sequence's KV cache.
	NewKV(spec KVSpec) (KV, error)
	// Free releases a buffer, weight or KV early; using it afterwards is a BUG.
	Free(x any)

	// WriteF32/WriteI32 copy host values into dst[off:]. ReadF32 copies src[off:off+len(dst)]
	// to the host after finishing all enqueued work; it returns the first pending error.
	WriteF32(dst Buffer, off int, src []float32)
	WriteI32(dst Buffer, off int, src []int32)
	ReadF32(src Buffer, off int, dst []float32) error

	// Embed: dst[nt][table.Cols] = dequantized rows table[ids[i]]. ids: I32[nt].
	// An id outside [0, table.Rows) is recorded as an error.
	Embed(dst Buffer, table Weight, ids Buffer, nt int)
	// RMSNorm: dst[i] = x[i] / sqrt(mean(x[i]²) + eps) * w, rows of n = w.Cols. dst may be x.
	RMSNorm(dst, x Buffer, w Weight, nt int, eps float32)
	// MatMul: dst[nt][w.Rows] = x[nt][w.Cols] · wᵀ. The CPU backend quantizes x per row
	// as ggml does (Q8_0 for Q4_0/Q4_1/Q5_x/Q8_0 weights, Q8_K for K-quants, F16 for F16
	// weights) so results track llama.cpp. dst must not alias x.
	MatMul(dst Buffer, w Weight, x Buffer, nt int)
	// AddBias: x[i] += b for each of nt rows of b.Cols values.
	AddBias(x Buffer, b Weight, nt int)
	// HeadNorm: per-head RMSNorm of x[nt][heads*w.Cols] in place, weight w (1 × HeadDim).
	HeadNorm(x Buffer, w Weight, nt, heads int, eps float32)
	// RoPEStoreKV rotates q[nt][a.Heads*HeadDim] in place, rotates k[nt][a.KVHeads*HeadDim]
	// in place, and stores k and v[nt][a.KVHeads*HeadDim] into kv at (layer, pos[i]).
	// pos: I32[nt].
	RoPEStoreKV(q, k, v Buffer, kv KV, layer int, pos Buffer, nt int, r RoPE, a Attn)
	// Attention: dst[nt][a.Heads*HeadDim] = causal softmax(q·Kᵀ·Scale)·V over cache
	// positions 0..pos[i] of layer (the cache must already hold them, including row i's own
	// entry). Scores and softmax in float32; K/V read in the cache's type.
	Attention(dst, q Buffer, kv KV, layer int, pos Buffer, nt int, a Attn)
	// SwiGLU: dst[i] = silu(gate[i]) * up[i] over nt rows of n values. dst may be gate.
	SwiGLU(dst, gate, up Buffer, nt, n int)
	// Add: dst[j] += x[j] for j < n (the residual add).
	Add(dst, x Buffer, n int)
	// CopyRows: dst[dstRow*cols : (dstRow+n)*cols] = src[srcRow*cols : (srcRow+n)*cols]
	// (selecting e.g. the last row of a prefill before the classifier, or gathering and
	// scattering one sequence's rows of a batch). dst must not be src.
	CopyRows(dst Buffer, dstRow int, src Buffer, srcRow, n, cols int)
	// TopK writes, for each of nt rows of logits[nt][n], the k largest values and their
	// column ids in descending order (ties: lower id first) into ids[r*k+j] and vals[r*k+j],
	// on the host. k == 1 is argmax. It waits for the work before it and returns the first
	// pending error.
	TopK(logits Buffer, nt, n, k int, ids []int32, vals []float32) error

	// Sync waits for all enqueued work and returns the first pending error.
	Sync() error
	// Close frees everything the backend owns.
	Close() error
}

// SeqAttention is one sequence's share of a MultiAttention call: its rows' queries Q
// (and, for RoPEStoreKVSeqs, keys K and values V) and positions Pos, starting at row
// Row of those buffers; its cache and row count; and (for AttentionSeqs) where its
// output goes: rows DstRow … DstRow+NT-1 of Dst. Several sequences may share buffers
// (a batched forward passes the batch's own, each sequence at its rows' offset) as
// long as their rows do not overlap; Row and DstRow 0 are buffers holding one
// sequence's rows.
type SeqAttention struct {
	Dst, Q, K, V Buffer
	KV           KV
	Pos          Buffer
	NT           int
	Row, DstRow  int
}

// MultiAttention is implemented by backends that can run the RoPE-and-store and the
// attention of several sequences' rows, each against its own cache and positions, as
// one op each: exactly RoPEStoreKV and Attention on each sequence's rows alone (the
// same bits), for every s, in any order (the sequences' rows and caches must not
// overlap). A batched forward (core/model ForwardBatch) needs it: every layer then
// costs two ops for all its sequences instead of two per sequence, and the rows stay
// in the batch's buffers (no gather and scatter).
type MultiAttention interface {
	RoPEStoreKVSeqs(seqs []SeqAttention, layer int, r RoPE, a Attn)
	AttentionSeqs(seqs []SeqAttention, layer int, a Attn)
}

// RowStatser is implemented by backends that can summarise logits rows where they live,
// so a sampler that needs only a row's best candidates and its normaliser never costs a
// copy of the whole row (150k floats for Qwen) to the host.
//
// RowStats computes, for each row r < nt of logits[nt][n], on the host side of the call:
//   - ids[r*k+j], vals[r*k+j] for j < k: the row's k best values and their column ids,
//     exactly as TopK (descending, ties to the lower id, NaN below every number);
//     0 ≤ k ≤ n, and k == 0 computes no candidates (ids and vals may then be empty);
//   - maxv[r]: the row's largest value, NaN ignored (−Inf when the row holds no number);
//   - lse[r]: log Σ exp(row) over the whole row, max-subtracted and accumulated in
//     float32 in an order that depends only on n (so a row gives the same bits in any
//     nt); NaN when the row holds a NaN, +Inf when it holds +Inf, −Inf when every value
//     is −Inf;
//   - picked[r]: logits[r][pick[r]] when pick[r] ≥ 0 (0 when pick[r] < 0).
//
// ids and vals hold at least nt*k values, maxv, lse, picked and pick at least nt (too
// short is a BUG panic). A pick[r] ≥ n or k outside [0, n] is an error. It waits for
// the work before it and returns the first pending error; it must not be called inside
// a graph capture.
type RowStatser interface {
	RowStats(logits Buffer, nt, n, k int, pick []int32, ids []int32, vals []float32, maxv, lse, picked []float32) error
}

// CheckRowStats validates the arguments of a RowStats call of the backend named who
// (for its messages) as the contract states: slices too short for nt rows and k
// candidates are a BUG panic; k outside [0, n] or a picked column ≥ n is an error.
func CheckRowStats(who string, nt, n, k int, pick, ids []int32, vals, maxv, lse, picked []float32) error {
	if len(ids) < nt*k || len(vals) < nt*k || len(maxv) < nt || len(lse) < nt || len(picked) < nt || len(pick) < nt {
		panic(fmt.Sprintf("BUG: %s: RowStats: %d rows, k %d: ids/vals/maxv/lse/picked/pick hold %d/%d/%d/%d/%d/%d",
			who, nt, k, len(ids), len(vals), len(maxv), len(lse), len(picked), len(pick)))
	}
	if k < 0 || k > n {
		return fmt.Errorf("%s: RowStats: k = %d outside [0, %d]", who, k, n)
	}
	for r, c := range pick[:nt] {
		if int(c) >= n {
			return fmt.Errorf("%s: RowStats: row %d: picked column %d outside [0, %d)", who, r, c, n)
		}
	}
	return nil
}

// Graphs is implemented by backends that can record a sequence of ops once and replay
// it (CUDA graphs). The model calls Run for a forward of a given shape: the first call
// for a key calls record, which enqueues ops as usual, and captures them; later calls
// with the same key replay the capture without calling record. Everything a replay
// reads that changes between calls (token ids, positions) must come from buffers
// written with WriteI32/WriteF32 before Run, and record must use the same buffers on
// every call with that key. An empty key runs record without capturing it (a shape
// not worth keeping a graph for).
type Graphs interface {
	Run(key string, record func()) error
}

// SeqGraphs is implemented by backends whose graphs can replay a batched forward — one
// whose attention runs through MultiAttention — on other caches than the ones it was
// captured with. RunSeqs is Graphs.Run for such a record: kvs are the caches its
// MultiAttention calls name (each call any of them, in any order), and a replay runs
// with kvs[j] in place of the cache that was at position j when the key was captured.
// Everything else record uses (buffers, ops, rows per cache) must be the same for a
// key, and so must each position's cache shape (KVSpec); positions come from buffers,
// as for Run. The backend may run a key's first calls without capturing (a batch of
// sequences rarely repeats its shape exactly) and may drop graphs it has not replayed
// for a while; an empty key runs record without capturing it.
type SeqGraphs interface {
	RunSeqs(key string, kvs []KV, record func()) error
}

// DraftChainer is implemented by backends that can take a draft step's greedy token
// where the logits live and feed it to the next step's forward without the host: the
// d draft steps of a speculative round then run back to back on the device, and the
// host reads the d picks once, at the end (core/model DraftChain). Without it each
// step waits for the host to read its token before the next step is enqueued.
type DraftChainer interface {
	// NewPicks allocates the device record of the picks of a chain of up to d steps
	// (its layout is the backend's; Free releases it).
	NewPicks(d int) (Buffer, error)
	// DraftPick enqueues the greedy pick of the one row logits[0:n]: its best column id
	// and value and the row's log-sum-exp, exactly the bits RowStats with k = 1 gives
	// for the row (IDs[0], Vals[0], LSE[0]). It stores them as pick step (0 ≤ step < d)
	// of picks and writes the id into next[0] (an I32 buffer: a forward that embeds
	// next then runs the picked token). It may be called inside a graph capture.
	DraftPick(logits Buffer, n int, next, picks Buffer, step int)
	// CopyI32 enqueues dst[dstOff:dstOff+n] = src[srcOff:srcOff+n] (I32 buffers, not
	// the same one) on the device: a chain's step positions, written in one table before
	// it, reach the step's position buffer without a host write inside the chain (a
	// copy from pageable host memory may wait for the stream: the round trip the chain
	// is there to avoid).
	CopyI32(dst Buffer, dstOff int, src Buffer, srcOff, n int)
	// ReadPicks waits for the enqueued work and copies picks 0…d-1 to the host (ids,
	// vals, lse hold at least d values; shorter is a BUG panic). It returns the first
	// pending error, and must not be called inside a graph capture.
	ReadPicks(picks Buffer, d int, ids []int32, vals, lse []float32) error
}
