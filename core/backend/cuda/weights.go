package cuda

import (
	"encoding/binary"
	"fmt"
	"math"

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

// packed is a weight rearranged for the device.
type packed struct{ q, d, e []byte }

// pack splits GGUF blocks into the layout arrays as the weight-type table says. Types the kernels cannot read are
// dequantized to F32 (exact, at 4 bytes per value); one-row weights (norms, biases)
// always become F32 since the vector kernels read float32.
func pack(t quant.Type, rows, cols int, data []byte) (string, packed, error) {
	wt, native := wtypeOf(t)
	if !native || rows == 1 && t != quant.F32 {
		f := make([]float32, rows*cols)
		if err := quant.Dequantize(t, f, data); err != nil {
			return "", packed{}, fmt.Errorf("no CUDA kernel for %v and cannot dequantize it: %w", t, err)
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
	p := packed{q: make([]byte, nb*sp.qLen), d: make([]byte, nb*2)}
	if sp.eLen > 0 {
		p.e = make([]byte, nb*sp.eLen)
	}
	for i := range nb {
		b := data[i*bs : (i+1)*bs]
		copy(p.d[2*i:], b[sp.dOff:sp.dOff+2])
		copy(p.q[i*sp.qLen:], b[sp.qOff:sp.qOff+sp.qLen])
		if sp.eLen > 0 {
			copy(p.e[i*sp.eLen:], b[sp.eOff:sp.eOff+sp.eLen])
		}
	}
	return wt.layout, p, nil
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
