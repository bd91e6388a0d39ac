// Package quant is the one table of tensor block formats minfer knows: their GGML type
// ids, block sizes and byte sizes, and for each format its dequantizer, reference
// quantizer and CPU dot kernels.
//
// A tensor row of n values of type t occupies n/t.BlockSize() blocks of
// t.BlockBytes() bytes each; n must be a multiple of the block size.
package quant

import (
	"fmt"
	"strings"
)

// Type is a GGML tensor type id, exactly as stored in a GGUF tensor info.
type Type uint32

// GGML type ids (ggml.h, enum ggml_type). Ids 4 and 5 (Q4_2, Q4_3) were removed upstream.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
)

// QK_K is the super-block size of the K-quants.
const QK_K = 256

// Traits are the per-format facts. Dequant and Quantize are nil where minfer cannot
// (yet) convert that format; such tensors can still be read, sized and inspected.
type Traits struct {
	Name       string // ggml's lower-case name: "f32", "q4_k", …
	BlockSize  int    // values per block
	BlockBytes int    // bytes per block
	// Dequant writes len(dst) values decoded from src, which holds exactly
	// len(dst)/BlockSize blocks. len(dst) is a multiple of BlockSize.
	Dequant func(dst []float32, src []byte)
	// Quantize encodes src (a multiple of BlockSize values) into dst, which holds
	// exactly len(src)/BlockSize blocks. It is the reference quantizer (ggml's
	// quantize_row_*_ref; for IQ4_NL and IQ4_XS the quantize_iq4_* that llama-quantize
	// runs, which searches the scale; IQ3_S's is quantize_iq3_s): deterministic, no
	// importance matrix. nil for the IQ2/IQ1/IQ3_XXS codebook types.
	Quantize func(dst []byte, src []float32)

	// VecDotType is the format ggml's CPU backend converts activations to before a dot
	// with a weight row of this type (Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K
	// for the K-quants, and the type itself for F32/F16/BF16). Meaningful only where
	// VecDot is non-nil.
	VecDotType Type
	// VecDot returns the dot product of one weight row w (n values of this type) with one
	// activation row x (n values of VecDotType), ggml's ggml_vec_dot_<t>_<vdt>: integer
	// dot products per block, scaled per block in float32. n must be a multiple of the
	// block sizes of both types and w, x must hold at least the row's bytes (callers check;
	// a short slice panics). The float operations are those of ggml's x86 (AVX2/VNNI)
	// kernel, in its order, so results match llama.cpp's CPU backend bit for bit; they
	// are the same on every CPU (SIMD and pure-Go paths agree exactly). Safe for
	// concurrent use. For many rows at once use DotTile (same bits, faster).
	VecDot func(n int, w, x []byte) float32
	// FromFloat converts an activation row to this (VecDot) type the way ggml's CPU
	// backend does (its from_float): for Q8_0/Q8_1 that is the x86 SIMD quantizer, which
	// scales by 127/amax and rounds half to even, unlike Quantize's reference rounding;
	// for the others it equals Quantize. nil where the type is never a VecDotType.
	FromFloat func(dst []byte, src []float32)
}

// table holds every known type; entries' Dequant/Quantize are filled by the
// per-format files of this package in their init functions.
var table = map[Type]*Traits{
	F32:     {Name: "f32", BlockSize: 1, BlockBytes: 4},
	F16:     {Name: "f16", BlockSize: 1, BlockBytes: 2},
	Q4_0:    {Name: "q4_0", BlockSize: 32, BlockBytes: 18},
	Q4_1:    {Name: "q4_1", BlockSize: 32, BlockBytes: 20},
	Q5_0:    {Name: "q5_0", BlockSize: 32, BlockBytes: 22},
	Q5_1:    {Name: "q5_1", BlockSize: 32, BlockBytes: 24},
	Q8_0:    {Name: "q8_0", BlockSize: 32, BlockBytes: 34},
	Q8_1:    {Name: "q8_1", BlockSize: 32, BlockBytes: 36},
	Q2_K:    {Name: "q2_k", BlockSize: QK_K, BlockBytes: 84},
	Q3_K:    {Name: "q3_k", BlockSize: QK_K, BlockBytes: 110},
	Q4_K:    {Name: "q4_k", BlockSize: QK_K, BlockBytes: 144},
	Q5_K:    {Name: "q5_k", BlockSize: QK_K, BlockBytes: 176},
	Q6_K:    {Name: "q6_k", BlockSize: QK_K, BlockBytes: 210},
	Q8_K:    {Name: "q8_k", BlockSize: QK_K, BlockBytes: 292},
	IQ2_XXS: {Name: "iq2_xxs", BlockSize: QK_K, BlockBytes: 66},
	IQ2_XS:  {Name: "iq2_xs", BlockSize: QK_K, BlockBytes: 74},
	IQ3_XXS: {Name: "iq3_xxs", BlockSize: QK_K, BlockBytes: 98},
	IQ1_S:   {Name: "iq1_s", BlockSize: QK_K, BlockBytes: 50},
	IQ4_NL:  {Name: "iq4_nl", BlockSize: 32, BlockBytes: 18},
	IQ3_S:   {Name: "iq3_s", BlockSize: QK_K, BlockBytes: 110},
	IQ2_S:   {Name: "iq2_s", BlockSize: QK_K, BlockBytes: 82},
	IQ4_XS:  {Name: "iq4_xs", BlockSize: QK_K, BlockBytes: 136},
	I8:      {Name: "i8", BlockSize: 1, BlockBytes: 1},
	I16:     {Name: "i16", BlockSize: 1, BlockBytes: 2},
	I32:     {Name: "i32", BlockSize: 1, BlockBytes: 4},
	I64:     {Name: "i64", BlockSize: 1, BlockBytes: 8},
	F64:     {Name: "f64", BlockSize: 1, BlockBytes: 8},
	IQ1_M:   {Name: "iq1_m", BlockSize: QK_K, BlockBytes: 56},
	BF16:    {Name: "bf16", BlockSize: 1, BlockBytes: 2},
	TQ1_0:   {Name: "tq1_0", BlockSize: QK_K, BlockBytes: 54},
	TQ2_0:   {Name: "tq2_0", BlockSize: QK_K, BlockBytes: 66},
	MXFP4:   {Name: "mxfp4", BlockSize: 32, BlockBytes: 17},
}

// Lookup returns the traits of t, or false for an unknown type id.
func (t Type) Lookup() (*Traits, bool) {
	tr, ok := table[t]
	return tr, ok
}

// Known reports whether t is a type id minfer can size.
func (t Type) Known() bool { _, ok := table[t]; return ok }

// String is ggml's upper-case name ("Q4_K"), or "type(N)" for an unknown id.
func (t Type) String() string {
	if tr, ok := table[t]; ok {
		return strings.ToUpper(tr.Name)
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of values per block (1 for plain types); 0 if unknown.
func (t Type) BlockSize() int {
	if tr, ok := table[t]; ok {
		return tr.BlockSize
	}
	return 0
}

// BlockBytes is the number of bytes per block; 0 if unknown.
func (t Type) BlockBytes() int {
	if tr, ok := table[t]; ok {
		return tr.BlockBytes
	}
	return 0
}

// RowBytes is the byte size of n values of type t. It fails for an unknown type or
// when n is not a multiple of the block size.
func (t Type) RowBytes(n int) (int, error) {
	tr, ok := table[t]
	if !ok {
		return 0, fmt.Errorf("quant: unknown tensor type %d", uint32(t))
	}
	if n < 0 || n%tr.BlockSize != 0 {
		return 0, fmt.Errorf("quant: %d values of %s: not a multiple of its block size %d", n, t, tr.BlockSize)
	}
	return n / tr.BlockSize * tr.BlockBytes, nil
}

// ParseType maps a name ("q4_k", "Q8_0", "f16") to its type.
func ParseType(name string) (Type, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	for t, tr := range table {
		if tr.Name == n {
			return t, nil
		}
	}
	return 0, fmt.Errorf("quant: unknown tensor type %q", name)
}

// Types lists every known type in id order.
func Types() []Type {
	out := make([]Type, 0, len(table))
	for t := range table {
		out = append(out, t)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Dequantize decodes len(dst) values of type t from src. It fails for a type with no
// dequantizer, a length that is not a multiple of the block size, or a short src.
func Dequantize(t Type, dst []float32, src []byte) error {
	tr, ok := table[t]
	if !ok || tr.Dequant == nil {
		return fmt.Errorf("quant: no dequantizer for %s", t)
	}
	need, err := t.RowBytes(len(dst))
	if err != nil {
		return err
	}
	if len(src) < need {
		return fmt.Errorf("quant: %d values of %s need %d bytes, have %d", len(dst), t, need, len(src))
	}
	tr.Dequant(dst, src[:need])
	return nil
}

// Quantize encodes src as type t into dst (which must hold RowBytes(len(src)) bytes).
func Quantize(t Type, dst []byte, src []float32) error {
	tr, ok := table[t]
	if !ok || tr.Quantize == nil {
		return fmt.Errorf("quant: no quantizer for %s", t)
	}
	need, err := t.RowBytes(len(src))
	if err != nil {
		return err
	}
	if len(dst) < need {
		return fmt.Errorf("quant: %d values of %s need %d bytes, have %d", len(src), t, need, len(dst))
	}
	tr.Quantize(dst[:need], src)
	return nil
}
