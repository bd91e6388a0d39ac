package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/minfer/minfer/core/quant"
)

// Writer builds a GGUF version 3 file: metadata in the order first Set, tensor infos
// and data in the order added, each tensor's data aligned to the alignment (default
// 32, or SetAlignment / general.alignment).
//
// Tensors come either as bytes (AddTensor; the Writer keeps the slice, which must stay
// unchanged until the write) or as a callback (AddTensorFunc) that streams the bytes
// at write time, so a file larger than memory can be written. A Writer is not safe for
// concurrent use. The first error from Set, SetAlignment or AddTensor* is also kept and
// returned by WriteTo, so a chain of calls may check only the final write.
type Writer struct {
	alignment uint64
	kvs       []KV
	kvIndex   map[string]int
	tensors   []wtensor
	tIndex    map[string]bool
	err       error
}

type wtensor struct {
	info  TensorInfo
	data  []byte
	write func(io.Writer) error
}

// NewWriter returns an empty Writer with the default alignment.
func NewWriter() *Writer {
	return &Writer{alignment: DefaultAlignment, kvIndex: map[string]int{}, tIndex: map[string]bool{}}
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return err
}

// SetAlignment sets the data alignment (a power of two) and records it as the uint32
// key general.alignment, as llama.cpp expects.
func (w *Writer) SetAlignment(n uint64) error {
	if n > 1<<30 {
		return w.fail(fmt.Errorf("gguf: alignment %d is not a power of two ≤ 2^30", n))
	}
	return w.Set(KeyAlignment, uint32(n))
}

// Set adds key with value v (see NewValue for the accepted Go types), or replaces the
// value of an existing key in place. Setting general.alignment also sets the
// alignment. Tensor offsets are computed at write time, so the order of Set and
// AddTensor calls does not matter.
func (w *Writer) Set(key string, v any) error {
	val, err := NewValue(v)
	if err != nil {
		return w.fail(fmt.Errorf("gguf: key %q: %w", key, err))
	}
	if key == KeyAlignment {
		a, err := alignmentOf(val)
		if err != nil {
			return w.fail(fmt.Errorf("gguf: %w", err))
		}
		if len(w.tensors) > 0 && a != w.alignment {
			return w.fail(fmt.Errorf("gguf: key %q: alignment changed after tensors were added", key))
		}
		w.alignment = a
	}
	if i, ok := w.kvIndex[key]; ok {
		w.kvs[i].Value = val
		return nil
	}
	w.kvIndex[key] = len(w.kvs)
	w.kvs = append(w.kvs, KV{Key: key, Value: val})
	return nil
}

// Delete removes key if present.
func (w *Writer) Delete(key string) {
	i, ok := w.kvIndex[key]
	if !ok {
		return
	}
	w.kvs = append(w.kvs[:i], w.kvs[i+1:]...)
	delete(w.kvIndex, key)
	for j := i; j < len(w.kvs); j++ {
		w.kvIndex[w.kvs[j].Key] = j
	}
	if key == KeyAlignment && len(w.tensors) == 0 {
		w.alignment = DefaultAlignment
	}
}

// AddTensor adds a tensor whose bytes are data, exactly the size Type and dims imply
// (dims in ggml order, dims[0] the row length). The Writer keeps data (no copy) until
// the write.
func (w *Writer) AddTensor(name string, t quant.Type, dims []uint64, data []byte) error {
	info, err := w.addInfo(name, t, dims)
	if err != nil {
		return err
	}
	if uint64(len(data)) != info.Size {
		return w.fail(fmt.Errorf("gguf: tensor %q: %d bytes of data, want %d for %s %v", name, len(data), info.Size, t, dims))
	}
	w.tensors = append(w.tensors, wtensor{info: info, data: data})
	return nil
}

// AddTensorFunc adds a tensor whose bytes are produced at write time: write is called
// once, in tensor order, and must write exactly the tensor's size in bytes to its
// argument (a write of the wrong length fails the whole write). Use it to stream
// tensors that do not fit in memory.
func (w *Writer) AddTensorFunc(name string, t quant.Type, dims []uint64, write func(io.Writer) error) error {
	info, err := w.addInfo(name, t, dims)
	if err != nil {
		return err
	}
	if write == nil {
		return w.fail(fmt.Errorf("gguf: tensor %q: nil write function", name))
	}
	w.tensors = append(w.tensors, wtensor{info: info, write: write})
	return nil
}

func (w *Writer) addInfo(name string, t quant.Type, dims []uint64) (TensorInfo, error) {
	if w.tIndex[name] {
		return TensorInfo{}, w.fail(fmt.Errorf("gguf: duplicate tensor %q", name))
	}
	size, err := tensorSize(t, dims)
	if err != nil {
		return TensorInfo{}, w.fail(fmt.Errorf("gguf: tensor %q: %w", name, err))
	}
	w.tIndex[name] = true
	return TensorInfo{Name: name, Type: t, Dims: append([]uint64(nil), dims...), Size: size}, nil
}

// Tensors returns the tensor infos with the offsets the write will give them.
func (w *Writer) Tensors() []TensorInfo {
	out := make([]TensorInfo, len(w.tensors))
	off := uint64(0)
	for i, t := range w.tensors {
		out[i] = t.info
		out[i].Offset = off
		off, _ = alignUp(off+t.info.Size, w.alignment)
	}
	return out
}

// WriteTo writes the file to dst and returns the bytes written. It returns the first
// error of an earlier Set/AddTensor call, of dst, or of a tensor's write function.
func (w *Writer) WriteTo(dst io.Writer) (int64, error) {
	if w.err != nil {
		return 0, w.err
	}
	cw := &countWriter{w: bufio.NewWriterSize(dst, 1<<20)}
	err := w.write(cw)
	if err == nil {
		err = cw.w.Flush()
	}
	return cw.n, err
}

// WriteFile writes the file to path (created or truncated, mode 0644). On error the
// partial file is removed.
func (w *Writer) WriteFile(path string) error {
	fh, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	_, err = w.WriteTo(fh)
	if cerr := fh.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("gguf: %w", cerr)
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

type countWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

func (c *countWriter) u32(v uint32) { c.Write(binary.LittleEndian.AppendUint32(nil, v)) }
func (c *countWriter) u64(v uint64) { c.Write(binary.LittleEndian.AppendUint64(nil, v)) }
func (c *countWriter) str(s string) { c.u64(uint64(len(s))); c.w.WriteString(s); c.n += int64(len(s)) }

func (c *countWriter) pad(align uint64) {
	if r := uint64(c.n) % align; r != 0 {
		c.Write(make([]byte, align-r))
	}
}

func (w *Writer) write(c *countWriter) error {
	c.Write([]byte(Magic))
	c.u32(3)
	c.u64(uint64(len(w.tensors)))
	c.u64(uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		c.str(kv.Key)
		c.u32(uint32(kv.Value.Type))
		c.value(kv.Value)
	}
	for _, t := range w.Tensors() {
		c.str(t.Name)
		c.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			c.u64(d)
		}
		c.u32(uint32(t.Type))
		c.u64(t.Offset)
	}
	if len(w.tensors) > 0 {
		c.pad(w.alignment) // llama.cpp leaves a tensor-less (vocab-only) file unpadded
	}
	if c.err != nil {
		return fmt.Errorf("gguf: write header: %w", c.err)
	}
	for _, t := range w.tensors {
		start := c.n
		if t.write != nil {
			if err := t.write(c); err != nil && c.err == nil {
				return fmt.Errorf("gguf: tensor %q: %w", t.info.Name, err)
			}
		} else {
			c.Write(t.data)
		}
		if c.err != nil {
			return fmt.Errorf("gguf: write tensor %q: %w", t.info.Name, c.err)
		}
		if got := uint64(c.n - start); got != t.info.Size {
			return fmt.Errorf("gguf: tensor %q: wrote %d bytes, want %d", t.info.Name, got, t.info.Size)
		}
		c.pad(w.alignment)
	}
	if c.err != nil {
		return fmt.Errorf("gguf: write: %w", c.err)
	}
	return nil
}

// value writes v's payload (its type id was written by the caller).
func (c *countWriter) value(v Value) {
	le := binary.LittleEndian
	var b []byte
	switch x := v.V.(type) {
	case uint8:
		b = []byte{x}
	case int8:
		b = []byte{byte(x)}
	case bool:
		b = []byte{0}
		if x {
			b[0] = 1
		}
	case uint16:
		b = le.AppendUint16(nil, x)
	case int16:
		b = le.AppendUint16(nil, uint16(x))
	case uint32:
		b = le.AppendUint32(nil, x)
	case int32:
		b = le.AppendUint32(nil, uint32(x))
	case float32:
		b = le.AppendUint32(nil, math.Float32bits(x))
	case uint64:
		b = le.AppendUint64(nil, x)
	case int64:
		b = le.AppendUint64(nil, uint64(x))
	case float64:
		b = le.AppendUint64(nil, math.Float64bits(x))
	case string:
		c.str(x)
		return
	default:
		c.array(v)
		return
	}
	c.Write(b)
}

func (c *countWriter) array(v Value) {
	n := v.Len()
	c.u32(uint32(v.Elem))
	c.u64(uint64(n))
	if s, ok := v.V.([]string); ok {
		for _, x := range s {
			c.str(x)
		}
		return
	}
	if s, ok := v.V.([]Value); ok {
		for _, x := range s {
			c.array(x) // items of an array of arrays carry no type tag of their own
		}
		return
	}
	c.Write(encodeFixedArray(v))
}

// encodeFixedArray encodes the items of an array of fixed-size values.
func encodeFixedArray(v Value) []byte {
	le := binary.LittleEndian
	n := v.Len()
	b := make([]byte, 0, n*v.Elem.fixedSize())
	switch s := v.V.(type) {
	case []uint8:
		b = append(b, s...)
	case []int8:
		for _, x := range s {
			b = append(b, byte(x))
		}
	case []bool:
		for _, x := range s {
			if x {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		}
	case []uint16:
		for _, x := range s {
			b = le.AppendUint16(b, x)
		}
	case []int16:
		for _, x := range s {
			b = le.AppendUint16(b, uint16(x))
		}
	case []uint32:
		for _, x := range s {
			b = le.AppendUint32(b, x)
		}
	case []int32:
		for _, x := range s {
			b = le.AppendUint32(b, uint32(x))
		}
	case []float32:
		for _, x := range s {
			b = le.AppendUint32(b, math.Float32bits(x))
		}
	case []uint64:
		for _, x := range s {
			b = le.AppendUint64(b, x)
		}
	case []int64:
		for _, x := range s {
			b = le.AppendUint64(b, uint64(x))
		}
	case []float64:
		for _, x := range s {
			b = le.AppendUint64(b, math.Float64bits(x))
		}
	default:
		panic(fmt.Sprintf("BUG: gguf: encodeFixedArray of %T", v.V))
	}
	return b
}
