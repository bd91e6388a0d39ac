package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/quant"
	"github.com/minfer/minfer/cuda/driver"
)

// Weight is a matrix resident on the device in one of the kernel layouts (common.cuh):
// q holds the values, d the per-block scales, e the Q5_0 high bits.
type Weight struct {
	name       string
	t          quant.Type // the type it was given
	layout     string     // kernel suffix: "q4_k", "f32", …
	rows, cols int
	q, d, e    driver.DevicePtr
	bytes      int64
}

// Type is the type the weight was made from (its device layout may differ).
func (w *Weight) Type() quant.Type { return w.t }

// Rows is the number of rows.
func (w *Weight) Rows() int { return w.rows }

// Cols is the number of values per row.
func (w *Weight) Cols() int { return w.cols }

// Layout names the device layout ("q4_k", "f32" for a dequantized fallback, …).
func (w *Weight) Layout() string { return w.layout }

// HeldAs is the type the device holds the values in (backend.Rounded): the weight's
// own, F32 for a dequantized vector or a matrix beyond F16's range, F16 for a matrix
// of a type without kernels.
func (w *Weight) HeldAs() quant.Type {
	if wt, ok := wtypeOf(w.t); ok && wt.layout == w.layout {
		return w.t
	}
	if f16, _ := wtypeOf(quant.F16); w.layout == f16.layout {
		return quant.F16
	}
	return quant.F32
}

var _ backend.Rounded = (*Weight)(nil)

// packed is a weight rearranged for the device.
type packed struct{ q, d, e []byte }

// pack splits GGUF blocks into the layout arrays as the weight-type table says.
// One-row weights (norms, biases) always become F32, since the vector kernels read
// float32. A matrix of a type without CUDA kernels is never expanded to F32 (4 bytes a
// value: a 3-bit 7B would take ~30 GB): it becomes an F16 copy, read by the F16
// kernels (NewWeight warns once per type what that costs), unless a value is beyond
// F16's range, which keeps the exact F32. A type the CPU cannot decode either fails
// naming it. A BF16 matrix with a value beyond F16's range is held as F32 too (the
// prefill GEMM reads an f16 copy of the weights).
func pack(t quant.Type, rows, cols int, data []byte) (string, packed, error) {
	wt, native := wtypeOf(t)
	if native && t == quant.BF16 && rows > 1 && !bf16FitsF16(data) {
		native = false
	}
	if !native || rows == 1 && t != quant.F32 {
		f := make([]float32, rows*cols)
		if err := quant.Dequantize(t, f, data); err != nil {
			return "", packed{}, fmt.Errorf("no CUDA kernel for %v and cannot dequantize it: %w", t, err)
		}
		if rows > 1 && fitsF16(f) {
			out := make([]byte, 2*len(f))
			quant.F32RowToF16(out, f)
			f16, _ := wtypeOf(quant.F16)
			return f16.layout, packed{q: out}, nil
		}
		out := make([]byte, 4*len(f))
		for i, v := range f {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
		return "f32", packed{q: out}, nil
	}
	sp := wt.split
	if sp == nil {
		return wt.layout, packed{q: data}, nil // as stored
	}
	bs := t.BlockBytes()
	nb := len(data) / bs
	db := sp.dBytes()
	p := packed{q: make([]byte, nb*sp.qLen), d: make([]byte, nb*db)}
	if sp.eLen > 0 {
		p.e = make([]byte, nb*sp.eLen)
	}
	for i := range nb {
		b := data[i*bs : (i+1)*bs]
		copy(p.d[db*i:], b[sp.dOff:sp.dOff+db])
		copy(p.q[i*sp.qLen:], b[sp.qOff:sp.qOff+sp.qLen])
		if sp.halves {
			nibbleHalves(p.q[i*sp.qLen : (i+1)*sp.qLen])
		}
		switch {
		case sp.eFrom != nil:
			sp.eFrom(b, p.e[i*sp.eLen:(i+1)*sp.eLen])
		case sp.eLen > 0:
			copy(p.e[i*sp.eLen:], b[sp.eOff:sp.eOff+sp.eLen])
		}
	}
	return wt.layout, p, nil
}

// nibbleHalves reorders each 4-byte word of q (groups of 4-bit indices, byte i of a
// 16-byte group holding value i low and 16 + i high) so that bits 4n … 4n+3 of the
// word hold its byte n's low nibble for n < 4 and byte n−4's high nibble for n ≥ 4:
// the word's low half is values 4k … 4k+3 of the group, its high half 16+4k … 16+4k+3.
func nibbleHalves(q []byte) {
	for w := 0; w+4 <= len(q); w += 4 {
		var lo, hi uint32
		for n := range 4 {
			lo |= uint32(q[w+n]&0xF) << (4 * n)
			hi |= uint32(q[w+n]>>4) << (4 * n)
		}
		binary.LittleEndian.PutUint32(q[w:], lo|hi<<16)
	}
}

// bf16FitsF16 reports whether every BF16 value of data is finite and within binary16's range.
func bf16FitsF16(data []byte) bool {
	for i := 0; i+1 < len(data); i += 2 {
		v := math.Float32frombits(uint32(binary.LittleEndian.Uint16(data[i:])) << 16)
		if !(math.Abs(float64(v)) <= 65504) {
			return false
		}
	}
	return true
}

// fitsF16 reports whether every value is finite and within binary16's range.
func fitsF16(f []float32) bool {
	for _, v := range f {
		if !(math.Abs(float64(v)) <= 65504) {
			return false
		}
	}
	return true
}

// NewWeight uploads a rows × cols weight of type t from its GGUF bytes (copied; data
// need not outlive the call). It fails clearly when the type has no kernel and cannot
// be dequantized, when the size is wrong, or when the weight does not fit in memory.
func (b *Backend) NewWeight(name string, t quant.Type, rows, cols int, data []byte) (backend.Weight, error) {
	if rows < 1 || cols < 1 {
		return nil, fmt.Errorf("cuda: weight %q: shape %d × %d", name, rows, cols)
	}
	rb, err := t.RowBytes(cols)
	if err != nil {
		return nil, fmt.Errorf("cuda: weight %q: %w", name, err)
	}
	if int64(len(data)) != int64(rb)*int64(rows) {
		return nil, fmt.Errorf("cuda: weight %q: %d bytes, want %d for %d × %d %v", name, len(data), int64(rb)*int64(rows), rows, cols, t)
	}
	layout, p, err := pack(t, rows, cols, data)
	if err != nil {
		return nil, fmt.Errorf("cuda: weight %q: %w", name, err)
	}
	defer b.enter()()
	if wt, native := wtypeOf(t); (!native || wt.layout != layout) && rows > 1 && !b.warned[t] {
		if b.warned == nil {
			b.warned = map[quant.Type]bool{}
		}
		b.warned[t] = true
		why := "has no CUDA kernel yet"
		if native {
			why = "has a matrix with values beyond F16's range (the prefill GEMM reads F16)"
		}
		fmt.Fprintf(b.log, "cuda: %v %s: its matrices are held as %s copies (%.1f× the file's bytes) and decode at that type's speed\n",
			t, why, strings.ToUpper(layout), float64(len(p.q))/float64(len(data)))
	}
	w := &Weight{name: name, t: t, layout: layout, rows: rows, cols: cols}
	what := fmt.Sprintf("weight %q (%v %d × %d)", name, t, rows, cols)
	for _, part := range []struct {
		dst *driver.DevicePtr
		src []byte
	}{{&w.q, p.q}, {&w.d, p.d}, {&w.e, p.e}} {
		if len(part.src) == 0 {
			continue
		}
		ptr, err := b.alloc(what, int64(len(part.src)))
		if err == nil {
			err = driver.CopyHtoD(ptr, part.src)
			*part.dst = ptr
		}
		if err != nil {
			b.free(w.q)
			b.free(w.d)
			b.free(w.e)
			return nil, err
		}
		w.bytes += int64(len(part.src))
	}
	before := b.uploaded
	b.uploaded += w.bytes
	if before>>30 != b.uploaded>>30 {
		fmt.Fprintf(b.log, "cuda: uploaded %.1f GiB of weights\n", float64(b.uploaded)/(1<<30))
	}
	return w, nil
}
