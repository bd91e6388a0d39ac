package cpu

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/quant"
)

// Weight is a Rows × Cols matrix of one quant type, backed by the bytes given to
// NewWeight (usually an mmap view: zero copy).
type Weight struct {
	name       string
	typ        quant.Type
	rows, cols int
	rowBytes   int
	data       []byte
	f32        []float32 // F32 weights: data viewed as float32 (nil otherwise)
	f16        []uint16  // F16 weights: data viewed as binary16 bits (nil otherwise)
	bf16       []uint16  // BF16 weights: data viewed as bfloat16 bits (nil otherwise)
	vec        []float32 // 1×n weights not stored as F32 (norms, biases): dequantized once
	tr         *quant.Traits
	mm         matKernel // how MatMul multiplies by this weight; kind == kindNone if it cannot
	// tileScales: Q8_0 weights on a CPU with the AVX-512 tile kernels, the block scales
	// in float32 (quant.TileScales), so that MatMul at 2-8 activation rows reads the
	// weights in place instead of unpacking each chunk per call. 4 bytes per 34-byte
	// block: 12 % of the weight's bytes, on the heap. Made by the first MatMul that
	// uses them (batched decoding, speculative verification), so a one-sequence session
	// that never multiplies 2-8 rows does not pay the memory.
	tileScales []float32
	// repacked: data is a heap copy of the GGUF bytes in core/quant's repacked layout
	// (quant.RepackRows: Q4_0 on AVX2 CPUs without the AVX-512 tile kernels), which its
	// decode kernel reads faster; the same bits as ggml's layout in every op.
	repacked bool
	freed    bool
}

var _ backend.Weight = (*Weight)(nil)

// Type is the weight's block format.
func (w *Weight) Type() quant.Type { return w.typ }

// Rows is the number of rows (output features of a MatMul).
func (w *Weight) Rows() int { return w.rows }

// Cols is the row length (input features of a MatMul).
func (w *Weight) Cols() int { return w.cols }

// Name is the name given to NewWeight (a GGUF tensor name, for error messages).
func (w *Weight) Name() string { return w.name }

// NewWeight wraps rows × cols values of type t stored in data (exactly
// t.RowBytes(cols)·rows bytes). Quantized and F16 data is referenced, not copied, and
// must stay valid until the weight is freed or the backend closed; F32/F16/BF16 data that is
// not aligned for its element type is copied. It fails for an unknown or unsupported
// type, a row length that is not a multiple of the block size, or a wrong byte count.
func (b *Backend) NewWeight(name string, t quant.Type, rows, cols int, data []byte) (backend.Weight, error) {
	if b.closed {
		return nil, errClosed
	}
	tr, ok := t.Lookup()
	if !ok {
		return nil, fmt.Errorf("cpu: weight %q: unknown tensor type %d", name, uint32(t))
	}
	if rows < 1 || cols < 1 {
		return nil, fmt.Errorf("cpu: weight %q: shape %d×%d: rows and cols must be ≥ 1", name, rows, cols)
	}
	rb, err := t.RowBytes(cols)
	if err != nil {
		return nil, fmt.Errorf("cpu: weight %q: %w", name, err)
	}
	if rb > 0 && rows > int(^uint(0)>>1)/rb {
		return nil, fmt.Errorf("cpu: weight %q: shape %d×%d of %s overflows", name, rows, cols, t)
	}
	if want := rb * rows; len(data) != want {
		return nil, fmt.Errorf("cpu: weight %q: %d×%d %s needs %d bytes, got %d", name, rows, cols, t, want, len(data))
	}
	w := &Weight{name: name, typ: t, rows: rows, cols: cols, rowBytes: rb, data: data, tr: tr}
	switch t {
	case quant.F32:
		if uintptr(unsafe.Pointer(unsafe.SliceData(data)))%4 != 0 {
			w.data = append([]byte(nil), data...)
		}
		w.f32 = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(w.data))), rows*cols)
	case quant.F16, quant.BF16:
		if uintptr(unsafe.Pointer(unsafe.SliceData(data)))%2 != 0 {
			w.data = append([]byte(nil), data...)
		}
		v := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(w.data))), rows*cols)
		if t == quant.F16 {
			w.f16 = v
		} else {
			w.bf16 = v
		}
	}
	w.mm = matKernelFor(w, b.order)
	if w.mm.kind == kindQuant && w.mm.tile && rows > 1 && repackWeights(t, cols) {
		// One copy, the file's layout dropped: the weight's memory stays its size
		// (llama.cpp's repacked CPU buffers do the same).
		// On the workers: 0.27 s of one thread for a 0.5B Q4_0 file.
		buf := make([]byte, len(data))
		var mu sync.Mutex
		var repackErr error
		b.pool.chunks(rows, 64, func(_, lo, hi int) {
			if err := quant.RepackRows(t, buf[lo*rb:hi*rb], data[lo*rb:hi*rb], hi-lo, cols); err != nil {
				mu.Lock()
				repackErr = err
				mu.Unlock()
			}
		})
		if err := repackErr; err != nil {
			return nil, fmt.Errorf("cpu: weight %q: %w", name, err)
		}
		w.data, w.repacked = buf, true
	}
	if rows == 1 && w.f32 == nil && tr.Dequant != nil {
		w.vec = make([]float32, cols)
		if err := quant.Dequantize(t, w.vec, data); err != nil {
			return nil, fmt.Errorf("cpu: weight %q: %w", name, err)
		}
	}
	if w.mm.kind == kindNone && tr.Dequant == nil {
		return nil, fmt.Errorf("cpu: weight %q: tensor type %s is not supported (no dot kernel, no dequantizer)", name, t)
	}
	return w, nil
}

// weight unwraps a backend.Weight made by this package.
func weight(x backend.Weight, what string) *Weight {
	w, ok := x.(*Weight)
	if !ok {
		panic(fmt.Sprintf("BUG: cpu: %s: %T is not a cpu weight", what, x))
	}
	if w.freed {
		panic(fmt.Sprintf("BUG: cpu: %s: weight %q used after Free", what, w.name))
	}
	return w
}

// repackWeights says whether NewWeight keeps weights of type t, rows of n values, in
// core/quant's repacked layout (a variable for the tests, which repack on any CPU).
// MINFER_NO_REPACK=1 keeps every weight in the file's layout, read in place: no heap
// copy of the Q4_0 weights beside the mapped file (llama.cpp's --no-repack), at the
// repacked decode's speed (docs/perf-cpu.md, "Repacked Q4_0 for AVX2 decode").
var repackWeights = func(t quant.Type, n int) bool {
	return os.Getenv("MINFER_NO_REPACK") != "1" && quant.RepackUsed(t, n)
}

// row returns the bytes of row r in the GGUF layout: in place, or for a repacked weight
// unrepacked into buf (grown to the row's length) and returned from it.
func (w *Weight) row(r int, buf *[]byte) []byte {
	raw := w.data[r*w.rowBytes : (r+1)*w.rowBytes]
	if !w.repacked {
		return raw
	}
	if cap(*buf) < w.rowBytes {
		*buf = make([]byte, w.rowBytes)
	}
	out := (*buf)[:w.rowBytes]
	if err := quant.UnrepackRows(w.typ, out, raw, 1, w.cols); err != nil {
		panic("BUG: cpu: " + err.Error())
	}
	return out
}
