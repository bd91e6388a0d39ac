package gguf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ValueType is a GGUF metadata value type id (gguf.h, enum gguf_type).
type ValueType uint32

// The GGUF metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var typeNames = [...]string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"}

// String is a short name: "u32", "string", "array", ….
func (t ValueType) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// valid reports whether t is one of the thirteen GGUF value types.
func (t ValueType) valid() bool { return t <= TypeFloat64 }

// fixedSize is the encoded size of a scalar of type t, 0 for string and array.
func (t ValueType) fixedSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes a value of type t can occupy in a file: a string is at
// least its 8-byte length, an array its 4-byte element type and 8-byte count. Parsing
// uses it to refuse counts the rest of the file cannot hold before allocating.
func (t ValueType) minSize() uint64 {
	switch t {
	case TypeString:
		return 8
	case TypeArray:
		return 12
	}
	return uint64(t.fixedSize())
}

func (t ValueType) isInt() bool {
	switch t {
	case TypeUint8, TypeInt8, TypeUint16, TypeInt16, TypeUint32, TypeInt32, TypeUint64, TypeInt64:
		return true
	}
	return false
}

// Value is one typed GGUF metadata value.
//
// V holds, by Type:
//
//	TypeUint8 … TypeFloat64 scalars: uint8, int8, uint16, int16, uint32, int32, float32,
//	                                 bool, string, uint64, int64, float64
//	TypeArray: a slice of the element type Elem: []uint8, []int8, []uint16, []int16,
//	           []uint32, []int32, []float32, []bool, []string, []uint64, []int64,
//	           []float64, or []Value (each an array itself) when Elem is TypeArray.
//
// Elem is meaningful only for arrays. Values returned by Parse own their memory (strings
// are copied out of the file), so they stay valid after File.Close. NewValue builds a
// Value from a Go value.
type Value struct {
	Type ValueType
	Elem ValueType
	V    any
}

// NewValue converts a Go value to a Value: the sized integer and float types, bool,
// string, slices of those, []Value (an array of arrays) and Value itself. A Go int
// becomes int32 when it fits and int64 otherwise, and a uint becomes uint32 or uint64
// likewise ([]int and []uint follow the same rule for the whole slice); llama.cpp checks
// exact types of the keys it reads, so prefer the sized type it expects (uint32 for
// counts, float32 for epsilons).
func NewValue(v any) (Value, error) {
	switch x := v.(type) {
	case Value:
		return x, x.check(0)
	case uint8:
		return Value{Type: TypeUint8, V: x}, nil
	case int8:
		return Value{Type: TypeInt8, V: x}, nil
	case uint16:
		return Value{Type: TypeUint16, V: x}, nil
	case int16:
		return Value{Type: TypeInt16, V: x}, nil
	case uint32:
		return Value{Type: TypeUint32, V: x}, nil
	case int32:
		return Value{Type: TypeInt32, V: x}, nil
	case float32:
		return Value{Type: TypeFloat32, V: x}, nil
	case bool:
		return Value{Type: TypeBool, V: x}, nil
	case string:
		return Value{Type: TypeString, V: x}, nil
	case uint64:
		return Value{Type: TypeUint64, V: x}, nil
	case int64:
		return Value{Type: TypeInt64, V: x}, nil
	case float64:
		return Value{Type: TypeFloat64, V: x}, nil
	case int:
		if x >= math.MinInt32 && x <= math.MaxInt32 {
			return Value{Type: TypeInt32, V: int32(x)}, nil
		}
		return Value{Type: TypeInt64, V: int64(x)}, nil
	case uint:
		if x <= math.MaxUint32 {
			return Value{Type: TypeUint32, V: uint32(x)}, nil
		}
		return Value{Type: TypeUint64, V: uint64(x)}, nil
	case []uint8:
		return arrayOf(TypeUint8, x), nil
	case []int8:
		return arrayOf(TypeInt8, x), nil
	case []uint16:
		return arrayOf(TypeUint16, x), nil
	case []int16:
		return arrayOf(TypeInt16, x), nil
	case []uint32:
		return arrayOf(TypeUint32, x), nil
	case []int32:
		return arrayOf(TypeInt32, x), nil
	case []float32:
		return arrayOf(TypeFloat32, x), nil
	case []bool:
		return arrayOf(TypeBool, x), nil
	case []string:
		return arrayOf(TypeString, x), nil
	case []uint64:
		return arrayOf(TypeUint64, x), nil
	case []int64:
		return arrayOf(TypeInt64, x), nil
	case []float64:
		return arrayOf(TypeFloat64, x), nil
	case []int:
		return intSlice(x), nil
	case []uint:
		return uintSlice(x), nil
	case []Value:
		a := arrayOf(TypeArray, x)
		return a, a.check(0)
	}
	return Value{}, fmt.Errorf("unsupported Go type %T", v)
}

func arrayOf[T any](elem ValueType, s []T) Value {
	if s == nil {
		s = []T{}
	}
	return Value{Type: TypeArray, Elem: elem, V: s}
}

func intSlice(x []int) Value {
	fits := true
	for _, v := range x {
		if v < math.MinInt32 || v > math.MaxInt32 {
			fits = false
			break
		}
	}
	if fits {
		out := make([]int32, len(x))
		for i, v := range x {
			out[i] = int32(v)
		}
		return arrayOf(TypeInt32, out)
	}
	out := make([]int64, len(x))
	for i, v := range x {
		out[i] = int64(v)
	}
	return arrayOf(TypeInt64, out)
}

func uintSlice(x []uint) Value {
	fits := true
	for _, v := range x {
		if v > math.MaxUint32 {
			fits = false
			break
		}
	}
	if fits {
		out := make([]uint32, len(x))
		for i, v := range x {
			out[i] = uint32(v)
		}
		return arrayOf(TypeUint32, out)
	}
	out := make([]uint64, len(x))
	for i, v := range x {
		out[i] = uint64(v)
	}
	return arrayOf(TypeUint64, out)
}

// maxDepth bounds the nesting of arrays of arrays (parsing recurses once per level).
const maxDepth = 16

// check verifies that V has the Go type Type (and Elem) promise.
func (v Value) check(depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("arrays nested deeper than %d", maxDepth)
	}
	want := goTypeOf(v.Type, v.Elem)
	if want == "" {
		return fmt.Errorf("invalid value type %d (element %d)", uint32(v.Type), uint32(v.Elem))
	}
	if got := fmt.Sprintf("%T", v.V); got != want {
		return fmt.Errorf("value of type %s holds Go %s, want %s", v.typeName(), got, want)
	}
	if v.Type == TypeArray && v.Elem == TypeArray {
		for i, e := range v.V.([]Value) {
			if e.Type != TypeArray {
				return fmt.Errorf("item %d of an array of arrays is %s", i, e.Type)
			}
			if err := e.check(depth + 1); err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
		}
	}
	return nil
}

func goTypeOf(t, elem ValueType) string {
	scalar := [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "", "uint64", "int64", "float64"}
	if !t.valid() {
		return ""
	}
	if t != TypeArray {
		return scalar[t]
	}
	if elem == TypeArray {
		return "[]gguf.Value"
	}
	if !elem.valid() {
		return ""
	}
	return "[]" + scalar[elem]
}

// typeName is "u32" for a scalar and "[u32]" for an array of u32 ("[[…]]" nested).
func (v Value) typeName() string {
	if v.Type != TypeArray {
		return v.Type.String()
	}
	if v.Elem == TypeArray {
		return "[array]"
	}
	return "[" + v.Elem.String() + "]"
}

// TypeName is a short description of the value's type: "u32", "string", "[string]",
// "[array]".
func (v Value) TypeName() string { return v.typeName() }

// Len is the number of items of an array value, 0 for a scalar.
func (v Value) Len() int {
	if v.Type != TypeArray {
		return 0
	}
	switch s := v.V.(type) {
	case []uint8:
		return len(s)
	case []int8:
		return len(s)
	case []uint16:
		return len(s)
	case []int16:
		return len(s)
	case []uint32:
		return len(s)
	case []int32:
		return len(s)
	case []float32:
		return len(s)
	case []bool:
		return len(s)
	case []string:
		return len(s)
	case []uint64:
		return len(s)
	case []int64:
		return len(s)
	case []float64:
		return len(s)
	case []Value:
		return len(s)
	}
	return 0
}

// Index returns item i of an array value as a scalar Value (or a nested array Value).
// It panics if v is not an array or i is out of range, like a slice index.
func (v Value) Index(i int) Value {
	switch s := v.V.(type) {
	case []uint8:
		return Value{Type: TypeUint8, V: s[i]}
	case []int8:
		return Value{Type: TypeInt8, V: s[i]}
	case []uint16:
		return Value{Type: TypeUint16, V: s[i]}
	case []int16:
		return Value{Type: TypeInt16, V: s[i]}
	case []uint32:
		return Value{Type: TypeUint32, V: s[i]}
	case []int32:
		return Value{Type: TypeInt32, V: s[i]}
	case []float32:
		return Value{Type: TypeFloat32, V: s[i]}
	case []bool:
		return Value{Type: TypeBool, V: s[i]}
	case []string:
		return Value{Type: TypeString, V: s[i]}
	case []uint64:
		return Value{Type: TypeUint64, V: s[i]}
	case []int64:
		return Value{Type: TypeInt64, V: s[i]}
	case []float64:
		return Value{Type: TypeFloat64, V: s[i]}
	case []Value:
		return s[i]
	}
	panic(fmt.Sprintf("BUG: gguf: Index on a %s value", v.typeName()))
}

// Uint returns an integer scalar as uint64; false for a negative or non-integer value.
func (v Value) Uint() (uint64, bool) {
	switch x := v.V.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	}
	if i, ok := v.signed(); ok && i >= 0 {
		return uint64(i), true
	}
	return 0, false
}

// Int returns an integer scalar as int64; false for a non-integer value or a uint64
// above math.MaxInt64.
func (v Value) Int() (int64, bool) {
	switch x := v.V.(type) {
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	}
	return v.signed()
}

func (v Value) signed() (int64, bool) {
	switch x := v.V.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// Float returns a float32 or float64 scalar as float64.
func (v Value) Float() (float64, bool) {
	switch x := v.V.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// String formats a scalar in Go syntax (strings quoted) and an array in full as
// "[a, b, …]"; see Summary for a bounded form.
func (v Value) String() string { return v.Summary(-1) }

// Summary formats v like String but shows at most max items of an array (max < 0: all),
// followed by "… (N items)" when some were left out.
func (v Value) Summary(max int) string {
	if v.Type != TypeArray {
		return formatScalar(v.V)
	}
	n := v.Len()
	show := n
	if max >= 0 && show > max {
		show = max
	}
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < show; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(v.Index(i).Summary(max))
	}
	if show < n {
		if show > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "… (%d items)", n)
	}
	b.WriteByte(']')
	return b.String()
}

func formatScalar(x any) string {
	switch x := x.(type) {
	case string:
		return strconv.Quote(x)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(x)
}
