// Package gguf reads and writes GGUF files (versions 2 and 3), the model format of
// llama.cpp: a header, typed metadata key/value pairs, tensor infos, then the tensor
// data, each tensor aligned to general.alignment (default 32) bytes.
//
// Reading: Open maps a file read-only and Parse reads a byte slice; both check every
// length, count, offset and dimension against the file size before using it, so a
// truncated or hostile file returns an error naming the problem (never a panic, never
// an allocation larger than the file warrants). Tensor data is not copied:
// File.TensorData returns a view of the mapped file.
//
// Writing: Writer collects metadata and tensors (in memory or streamed by a callback)
// and writes a version 3 file that Parse and llama.cpp's gguf-py read back unchanged.
//
// The package uses only the standard library and core/quant (for tensor type sizes).
package gguf

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/minfer/minfer/core/quant"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the data alignment when general.alignment is absent.
const DefaultAlignment = 32

// KeyAlignment is the metadata key that sets the data alignment (a uint32).
const KeyAlignment = "general.alignment"

// MaxDims is the most dimensions a tensor may have (GGML_MAX_DIMS).
const MaxDims = 4

// ErrNotFound is wrapped by the Get* accessors when a key is absent.
var ErrNotFound = errors.New("not found")

// KV is one metadata key/value pair.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor.
type TensorInfo struct {
	Name string
	Type quant.Type
	// Dims in ggml order: Dims[0] is the row length (ne0), the fastest-varying index.
	Dims []uint64
	// Offset of the tensor's first byte relative to the data section (File.DataOffset).
	Offset uint64
	// Size in bytes, computed from Type and Dims.
	Size uint64
}

// Elements is the number of values in the tensor (the product of Dims).
func (t *TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Rows is the number of rows of Dims[0] values (the product of Dims[1:]).
func (t *TensorInfo) Rows() uint64 {
	n := uint64(1)
	for _, d := range t.Dims[min(1, len(t.Dims)):] {
		n *= d
	}
	return n
}

// File is a parsed GGUF file. Its fields are read-only. A File from Open holds a
// read-only memory map until Close; tensor data views die with it. Methods are safe
// for concurrent use until Close.
type File struct {
	Version   uint32
	Alignment uint64
	// DataOffset is the absolute file offset of the data section.
	DataOffset uint64
	KVs        []KV         // in file order
	Tensors    []TensorInfo // in file order

	data    []byte // the whole file (mapped or caller's slice)
	kvIndex map[string]int
	tIndex  map[string]int
	unmap   func() error
}

// Size is the file size in bytes.
func (f *File) Size() int64 { return int64(len(f.data)) }

// Close releases the memory map of a File from Open (a no-op for Parse). After Close,
// TensorData returns nil and slices it returned earlier must not be touched. Close is
// idempotent.
func (f *File) Close() error {
	f.data = nil
	if f.unmap == nil {
		return nil
	}
	u := f.unmap
	f.unmap = nil
	return u()
}

// TensorData returns the bytes of t (t.Size of them) as a view of the file: no copy.
// The slice is read-only (writing to a mapped file faults) and its capacity ends with
// the tensor. It returns nil for a tensor not from this file or after Close.
func (f *File) TensorData(t *TensorInfo) []byte {
	if t == nil || f.data == nil {
		return nil
	}
	start := f.DataOffset + t.Offset
	end := start + t.Size
	if start < f.DataOffset || end < start || end > uint64(len(f.data)) {
		return nil
	}
	return f.data[start:end:end]
}

// Tensor finds a tensor by name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Get returns the value of key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.KVs[i].Value, true
}

// Has reports whether key is present.
func (f *File) Has(key string) bool { _, ok := f.kvIndex[key]; return ok }

// Arch is general.architecture, or "" when absent or not a string.
func (f *File) Arch() string {
	s, _ := f.GetString("general.architecture")
	return s
}

func (f *File) lookup(key string) (Value, error) {
	v, ok := f.Get(key)
	if !ok {
		return Value{}, fmt.Errorf("gguf: key %s: %w", Quote(key), ErrNotFound)
	}
	return v, nil
}

func wrongType(key string, v Value, want string) error {
	return fmt.Errorf("gguf: key %s is %s, want %s", Quote(key), v.typeName(), want)
}

// GetString returns a string value.
func (f *File) GetString(key string) (string, error) {
	v, err := f.lookup(key)
	if err != nil {
		return "", err
	}
	s, ok := v.V.(string)
	if !ok {
		return "", wrongType(key, v, "string")
	}
	return s, nil
}

// GetUint returns a value of any integer type that is ≥ 0.
func (f *File) GetUint(key string) (uint64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	u, ok := v.Uint()
	if !ok {
		if v.Type.isInt() {
			return 0, fmt.Errorf("gguf: key %s is negative (%s)", Quote(key), v)
		}
		return 0, wrongType(key, v, "an unsigned integer")
	}
	return u, nil
}

// GetInt returns a value of any integer type that fits in int64.
func (f *File) GetInt(key string) (int64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	i, ok := v.Int()
	if !ok {
		if v.Type.isInt() {
			return 0, fmt.Errorf("gguf: key %s: %s overflows int64", Quote(key), v)
		}
		return 0, wrongType(key, v, "an integer")
	}
	return i, nil
}

// GetFloat returns a float32 or float64 value.
func (f *File) GetFloat(key string) (float64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	x, ok := v.Float()
	if !ok {
		return 0, wrongType(key, v, "f32 or f64")
	}
	return x, nil
}

// GetBool returns a bool value.
func (f *File) GetBool(key string) (bool, error) {
	v, err := f.lookup(key)
	if err != nil {
		return false, err
	}
	b, ok := v.V.(bool)
	if !ok {
		return false, wrongType(key, v, "bool")
	}
	return b, nil
}

// GetStrings returns an array of strings. The slice is shared with the File; do not
// modify it.
func (f *File) GetStrings(key string) ([]string, error) {
	v, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	s, ok := v.V.([]string)
	if !ok {
		return nil, wrongType(key, v, "[string]")
	}
	return s, nil
}

// GetFloats returns an array of f32 (shared with the File; do not modify) or of f64
// (converted to a new []float32).
func (f *File) GetFloats(key string) ([]float32, error) {
	v, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	switch s := v.V.(type) {
	case []float32:
		return s, nil
	case []float64:
		out := make([]float32, len(s))
		for i, x := range s {
			out[i] = float32(x)
		}
		return out, nil
	}
	return nil, wrongType(key, v, "[f32] or [f64]")
}

// GetInts returns an array of any integer type as a new []int64.
func (f *File) GetInts(key string) ([]int64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	if v.Type != TypeArray || !v.Elem.isInt() {
		return nil, wrongType(key, v, "an integer array")
	}
	n := v.Len()
	out := make([]int64, n)
	for i := range n {
		x, ok := v.Index(i).Int()
		if !ok {
			return nil, fmt.Errorf("gguf: key %s: item %d overflows int64", Quote(key), i)
		}
		out[i] = x
	}
	return out, nil
}

// tensorSize computes the byte size of a tensor, checking the type, the row length
// against the block size and the element count and size against overflow.
func tensorSize(t quant.Type, dims []uint64) (uint64, error) {
	if !t.Known() {
		return 0, fmt.Errorf("unknown tensor type %d", uint32(t))
	}
	if len(dims) > MaxDims {
		return 0, fmt.Errorf("%d dimensions (max %d)", len(dims), MaxDims)
	}
	elems := uint64(1)
	for i, d := range dims {
		if d > math.MaxInt64 {
			return 0, fmt.Errorf("dimension %d is %d (max %d)", i, d, int64(math.MaxInt64))
		}
		if d != 0 && elems > math.MaxInt64/d {
			return 0, fmt.Errorf("dimensions %v: element count overflows int64", dims)
		}
		elems *= d
	}
	bs, bb := uint64(t.BlockSize()), uint64(t.BlockBytes())
	ne0 := uint64(1)
	if len(dims) > 0 {
		ne0 = dims[0]
	}
	if ne0%bs != 0 {
		return 0, fmt.Errorf("row length %d is not a multiple of the %s block size %d", ne0, t, bs)
	}
	blocks := elems / bs
	if bb != 0 && blocks > math.MaxInt64/bb {
		return 0, fmt.Errorf("dimensions %v: byte size overflows int64", dims)
	}
	return blocks * bb, nil
}

// alignmentOf validates a general.alignment value: a u32 (llama.cpp and gguf-py read
// it as one) that is a power of two, at most 2^30.
func alignmentOf(v Value) (uint64, error) {
	if v.Type != TypeUint32 {
		return 0, fmt.Errorf("key %q is %s, want u32", KeyAlignment, v.typeName())
	}
	a := uint64(v.V.(uint32))
	if a == 0 || a&(a-1) != 0 || a > 1<<30 {
		return 0, fmt.Errorf("key %q: %d is not a power of two ≤ 2^30", KeyAlignment, a)
	}
	return a, nil
}

// alignUp rounds n up to a multiple of a (a power of two); ok is false on overflow.
func alignUp(n, a uint64) (uint64, bool) {
	r := (n + a - 1) &^ (a - 1)
	return r, r >= n
}

// MaxQuoted is how many bytes of a name from a file Quote shows.
const MaxQuoted = 200

// Quote quotes a name read from a file (a key, a tensor name, an architecture) for an
// error message, cut to MaxQuoted bytes with its full length said: a hostile file's
// 2.7 MB key must not become a 2.7 MB error.
func Quote(s string) string {
	if len(s) <= MaxQuoted {
		return strconv.Quote(s)
	}
	cut := MaxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("… (%d bytes)", len(s))
}
