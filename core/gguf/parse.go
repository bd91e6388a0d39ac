package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/minfer/minfer/core/quant"
)

// Parse reads a GGUF file held in data. The File's tensor data views alias data, which
// the caller must keep unchanged while using them. Errors start with "gguf: " and name
// the problem in one line.
func Parse(data []byte) (*File, error) {
	f, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	return f, nil
}

// reader decodes little-endian values from data, failing (with the offset) instead of
// reading past the end.
type reader struct {
	data []byte
	pos  uint64
}

func (r *reader) remaining() uint64 { return uint64(len(r.data)) - r.pos }

// need fails unless n more bytes are available; what names the item being read.
func (r *reader) need(n uint64, what string) error {
	if n > r.remaining() {
		return fmt.Errorf("%s at offset %d: file truncated (need %d bytes, %d left)", what, r.pos, n, r.remaining())
	}
	return nil
}

func (r *reader) bytes(n uint64, what string) ([]byte, error) {
	if err := r.need(n, what); err != nil {
		return nil, err
	}
	b := r.data[r.pos : r.pos+n]
	r.pos += n
	return b, nil
}

func (r *reader) u32(what string) (uint32, error) {
	b, err := r.bytes(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *reader) u64(what string) (uint64, error) {
	b, err := r.bytes(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// str reads a GGUF string: a uint64 length then that many bytes (copied).
func (r *reader) str(what string) (string, error) {
	n, err := r.u64(strings.TrimSpace(what + " string length"))
	if err != nil {
		return "", err
	}
	if n > r.remaining() {
		if what != "" {
			what += ": "
		}
		return "", fmt.Errorf("%sstring length %d exceeds file (%d bytes left at offset %d)", what, n, r.remaining(), r.pos)
	}
	b := r.data[r.pos : r.pos+n]
	r.pos += n
	return string(b), nil
}

// strings reads n GGUF strings into one backing allocation: a first pass checks every
// length against the file, a second copies the bytes once and slices the items from it
// (a 150k-token vocabulary is then two allocations, not 150k).
func (r *reader) strings(n uint64) ([]string, error) {
	start := r.pos
	for i := range n {
		l, err := r.u64("array item string length")
		if err != nil {
			return nil, err
		}
		if l > r.remaining() {
			return nil, fmt.Errorf("array item %d: string length %d exceeds file (%d bytes left at offset %d)", i, l, r.remaining(), r.pos)
		}
		r.pos += l
	}
	total := r.pos - start - 8*n
	r.pos = start
	var b strings.Builder
	b.Grow(int(total))
	lens := make([]uint64, n)
	for i := range lens {
		lens[i] = binary.LittleEndian.Uint64(r.data[r.pos:])
		b.Write(r.data[r.pos+8 : r.pos+8+lens[i]])
		r.pos += 8 + lens[i]
	}
	all := b.String()
	out := make([]string, n)
	off := uint64(0)
	for i, l := range lens {
		out[i] = all[off : off+l]
		off += l
	}
	return out, nil
}

func parse(data []byte) (*File, error) {
	r := &reader{data: data}
	if len(data) < 4 {
		return nil, fmt.Errorf("file too short for a GGUF header (%d bytes)", len(data))
	}
	if string(data[:4]) != Magic {
		return nil, fmt.Errorf("bad magic %q (not a GGUF file)", data[:4])
	}
	r.pos = 4
	version, err := r.u32("version")
	if err != nil {
		return nil, err
	}
	switch {
	case version == 2 || version == 3:
	case version == 1:
		return nil, fmt.Errorf("unsupported version 1 (GGUF v1 is obsolete; reconvert the model)")
	case version&0xffff == 0 && version>>16 != 0:
		return nil, fmt.Errorf("unsupported version %d (a big-endian GGUF file?)", version)
	default:
		return nil, fmt.Errorf("unsupported version %d", version)
	}
	nTensors, err := r.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := r.u64("metadata count")
	if err != nil {
		return nil, err
	}
	// Every KV takes ≥ 13 bytes (key length, type, 1-byte value), every tensor info
	// ≥ 24 (name length, n_dims, type, offset): refuse counts the file cannot hold.
	if nKV > r.remaining()/13 {
		return nil, fmt.Errorf("metadata count %d exceeds file (%d bytes)", nKV, len(data))
	}
	if nTensors > r.remaining()/24 {
		return nil, fmt.Errorf("tensor count %d exceeds file (%d bytes)", nTensors, len(data))
	}
	f := &File{
		Version:   version,
		Alignment: DefaultAlignment,
		data:      data,
		KVs:       make([]KV, 0, nKV),
		kvIndex:   make(map[string]int, nKV),
	}
	for i := range nKV {
		key, err := r.str(fmt.Sprintf("key #%d", i))
		if err != nil {
			return nil, err
		}
		if _, dup := f.kvIndex[key]; dup {
			return nil, fmt.Errorf("duplicate key %s", Quote(key))
		}
		t, err := r.u32(fmt.Sprintf("key %s: value type", Quote(key)))
		if err != nil {
			return nil, err
		}
		v, err := r.value(ValueType(t), 0)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", Quote(key), err)
		}
		f.kvIndex[key] = len(f.KVs)
		f.KVs = append(f.KVs, KV{Key: key, Value: v})
	}
	if v, ok := f.Get(KeyAlignment); ok {
		if f.Alignment, err = alignmentOf(v); err != nil {
			return nil, err
		}
	}
	if err := f.parseTensors(r, nTensors); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *File) parseTensors(r *reader, n uint64) error {
	f.Tensors = make([]TensorInfo, 0, n)
	f.tIndex = make(map[string]int, n)
	for i := range n {
		name, err := r.str(fmt.Sprintf("tensor #%d name", i))
		if err != nil {
			return err
		}
		if _, dup := f.tIndex[name]; dup {
			return fmt.Errorf("duplicate tensor %s", Quote(name))
		}
		what := fmt.Sprintf("tensor %s", Quote(name))
		nDims, err := r.u32(what + " dimension count")
		if err != nil {
			return err
		}
		if nDims > MaxDims {
			return fmt.Errorf("%s: %d dimensions (max %d)", what, nDims, MaxDims)
		}
		dims := make([]uint64, nDims)
		for j := range dims {
			if dims[j], err = r.u64(what + " dimensions"); err != nil {
				return err
			}
		}
		typ, err := r.u32(what + " type")
		if err != nil {
			return err
		}
		off, err := r.u64(what + " offset")
		if err != nil {
			return err
		}
		size, err := tensorSize(quant.Type(typ), dims)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if off%f.Alignment != 0 {
			return fmt.Errorf("%s: offset %d is not a multiple of the alignment %d", what, off, f.Alignment)
		}
		f.tIndex[name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, TensorInfo{Name: name, Type: quant.Type(typ), Dims: dims, Offset: off, Size: size})
	}
	dataOff, ok := alignUp(r.pos, f.Alignment)
	if !ok {
		return fmt.Errorf("data section offset overflows")
	}
	f.DataOffset = dataOff
	fileSize := uint64(len(f.data))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		end := satAdd(satAdd(dataOff, t.Offset), t.Size)
		if t.Offset > fileSize || t.Size > fileSize || end > fileSize {
			return fmt.Errorf("tensor %s data [%d, %d) out of file bounds (size %d)",
				Quote(t.Name), satAdd(dataOff, t.Offset), satAdd(satAdd(dataOff, t.Offset), t.Size), fileSize)
		}
	}
	return f.checkLayout(fileSize)
}

// checkLayout enforces llama.cpp's layout rule: the tensors' data lie in the order of
// their infos, the first at offset 0 and each at the aligned end of the one before, so
// no two overlap and none sits in a gap; and the file ends within one alignment of the
// last. A file whose offsets alias, whose alignment was changed (every tensor shifts)
// or whose tensor type or shape no longer matches its bytes fails here instead of
// loading garbage.
func (f *File) checkLayout(fileSize uint64) error {
	var want uint64
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset != want {
			prev := "the data section's start"
			if i > 0 {
				prev = fmt.Sprintf("the aligned end of tensor %s before it", Quote(f.Tensors[i-1].Name))
			}
			return fmt.Errorf("tensor %s: data offset %d, want %d (%s): the tensor data overlap, leave a gap, or do not match the tensors' types and shapes",
				Quote(t.Name), t.Offset, want, prev)
		}
		var ok bool
		if want, ok = alignUp(t.Offset+t.Size, f.Alignment); !ok {
			return fmt.Errorf("tensor %s: data end overflows", Quote(t.Name))
		}
	}
	if n := len(f.Tensors); n > 0 {
		last := &f.Tensors[n-1]
		end := f.DataOffset + last.Offset + last.Size
		if fileSize-end >= f.Alignment {
			return fmt.Errorf("%d bytes after the last tensor's data (%s ends at %d of %d): the tensors' types or shapes do not match their data, or the alignment %d is not the file's",
				fileSize-end, Quote(last.Name), end, fileSize, f.Alignment)
		}
	}
	return nil
}

// satAdd adds without wrapping (for error messages about absurd offsets).
func satAdd(a, b uint64) uint64 {
	if a+b < a {
		return math.MaxUint64
	}
	return a + b
}

// value reads one value of type t; depth counts enclosing arrays.
func (r *reader) value(t ValueType, depth int) (Value, error) {
	switch t {
	case TypeString:
		s, err := r.str("")
		return Value{Type: t, V: s}, err
	case TypeArray:
		return r.array(depth + 1)
	}
	if !t.valid() {
		return Value{}, fmt.Errorf("unknown value type %d", uint32(t))
	}
	b, err := r.bytes(uint64(t.fixedSize()), t.String()+" value")
	if err != nil {
		return Value{}, err
	}
	v, err := decodeScalar(t, b)
	return Value{Type: t, V: v}, err
}

func decodeScalar(t ValueType, b []byte) (any, error) {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return b[0], nil
	case TypeInt8:
		return int8(b[0]), nil
	case TypeUint16:
		return le.Uint16(b), nil
	case TypeInt16:
		return int16(le.Uint16(b)), nil
	case TypeUint32:
		return le.Uint32(b), nil
	case TypeInt32:
		return int32(le.Uint32(b)), nil
	case TypeFloat32:
		return math.Float32frombits(le.Uint32(b)), nil
	case TypeBool:
		if b[0] > 1 {
			return nil, fmt.Errorf("bool value %d is neither 0 nor 1", b[0])
		}
		return b[0] == 1, nil
	case TypeUint64:
		return le.Uint64(b), nil
	case TypeInt64:
		return int64(le.Uint64(b)), nil
	case TypeFloat64:
		return math.Float64frombits(le.Uint64(b)), nil
	}
	panic("BUG: gguf: decodeScalar of " + t.String())
}

func (r *reader) array(depth int) (Value, error) {
	if depth > maxDepth {
		return Value{}, fmt.Errorf("arrays nested deeper than %d", maxDepth)
	}
	et, err := r.u32("array element type")
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	if !elem.valid() {
		return Value{}, fmt.Errorf("array of unknown value type %d", et)
	}
	n, err := r.u64("array count")
	if err != nil {
		return Value{}, err
	}
	if n > r.remaining()/elem.minSize() {
		return Value{}, fmt.Errorf("array of %s: count %d exceeds file (%d bytes left at offset %d)", elem, n, r.remaining(), r.pos)
	}
	out := Value{Type: TypeArray, Elem: elem}
	switch elem {
	case TypeString:
		if out.V, err = r.strings(n); err != nil {
			return Value{}, err
		}
	case TypeArray:
		s := make([]Value, n)
		for i := range s {
			if s[i], err = r.array(depth + 1); err != nil {
				return Value{}, fmt.Errorf("array item %d: %w", i, err)
			}
		}
		out.V = s
	default:
		b, err := r.bytes(n*uint64(elem.fixedSize()), "array of "+elem.String())
		if err != nil {
			return Value{}, err
		}
		if out.V, err = decodeFixedArray(elem, b, int(n)); err != nil {
			return Value{}, err
		}
	}
	return out, nil
}

func decodeFixedArray(t ValueType, b []byte, n int) (any, error) {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return append([]uint8{}, b...), nil
	case TypeInt8:
		return decodeEach(n, func(i int) int8 { return int8(b[i]) }), nil
	case TypeUint16:
		return decodeEach(n, func(i int) uint16 { return le.Uint16(b[2*i:]) }), nil
	case TypeInt16:
		return decodeEach(n, func(i int) int16 { return int16(le.Uint16(b[2*i:])) }), nil
	case TypeUint32:
		return decodeEach(n, func(i int) uint32 { return le.Uint32(b[4*i:]) }), nil
	case TypeInt32:
		return decodeEach(n, func(i int) int32 { return int32(le.Uint32(b[4*i:])) }), nil
	case TypeFloat32:
		return decodeEach(n, func(i int) float32 { return math.Float32frombits(le.Uint32(b[4*i:])) }), nil
	case TypeUint64:
		return decodeEach(n, func(i int) uint64 { return le.Uint64(b[8*i:]) }), nil
	case TypeInt64:
		return decodeEach(n, func(i int) int64 { return int64(le.Uint64(b[8*i:])) }), nil
	case TypeFloat64:
		return decodeEach(n, func(i int) float64 { return math.Float64frombits(le.Uint64(b[8*i:])) }), nil
	case TypeBool:
		s := make([]bool, n)
		for i, x := range b {
			if x > 1 {
				return nil, fmt.Errorf("array item %d: bool value %d is neither 0 nor 1", i, x)
			}
			s[i] = x == 1
		}
		return s, nil
	}
	panic("BUG: gguf: decodeFixedArray of " + t.String())
}

func decodeEach[T any](n int, at func(i int) T) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = at(i)
	}
	return s
}
