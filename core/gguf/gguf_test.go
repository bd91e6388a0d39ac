package gguf

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/quant"
	"github.com/minfer/minfer/internal/testpath"
)

// testdataGGUFs lists every .gguf under ../shared/testdata.
func testdataGGUFs(t testing.TB) []string {
	t.Helper()
	var out []string
	root := testpath.Dir(t)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".gguf") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 30 {
		t.Fatalf("found %d .gguf files under %s, want ≥ 30", len(out), root)
	}
	return out
}

func TestOpenTestdata(t *testing.T) {
	for _, p := range testdataGGUFs(t) {
		name, _ := filepath.Rel(testpath.Dir(t), p)
		t.Run(name, func(t *testing.T) {
			f, err := Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Version != 3 {
				t.Errorf("version %d, want 3", f.Version)
			}
			if f.Arch() == "" {
				t.Errorf("no general.architecture")
			}
			st, _ := os.Stat(p)
			if f.Size() != st.Size() {
				t.Errorf("Size() = %d, want %d", f.Size(), st.Size())
			}
			if f.DataOffset%f.Alignment != 0 {
				t.Errorf("data offset %d not aligned to %d", f.DataOffset, f.Alignment)
			}
			var total uint64
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				d := f.TensorData(ti)
				if uint64(len(d)) != ti.Size || ti.Size == 0 {
					t.Errorf("%s: %d data bytes, want %d", ti.Name, len(d), ti.Size)
				}
				if f.DataOffset+ti.Offset+ti.Size > uint64(f.Size()) {
					t.Errorf("%s out of bounds", ti.Name)
				}
				if got, ok := f.Tensor(ti.Name); !ok || got != ti {
					t.Errorf("Tensor(%q) did not find it", ti.Name)
				}
				total += ti.Size
			}
			if len(f.Tensors) > 0 {
				// llama.cpp packs tensors back to back: their sizes (padded) fill the data section.
				if total > uint64(f.Size())-f.DataOffset {
					t.Errorf("tensor bytes %d exceed data section %d", total, uint64(f.Size())-f.DataOffset)
				}
			}
			if strings.Contains(p, "ggml-vocab") {
				if len(f.Tensors) != 0 {
					t.Errorf("vocab file has %d tensors, want 0", len(f.Tensors))
				}
				toks, err := f.GetStrings("tokenizer.ggml.tokens")
				if err != nil || len(toks) < 1000 {
					t.Errorf("tokenizer.ggml.tokens: %d tokens, err %v", len(toks), err)
				}
			}
		})
	}
}

func TestKnownValues(t *testing.T) {
	f, err := Open(testpath.Path(t, "models", "synthetic", "synth-qwen2-q4_k_m.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, want := f.Arch(), "qwen2"; got != want {
		t.Errorf("Arch() = %q, want %q", got, want)
	}
	if got, err := f.GetUint("qwen2.block_count"); err != nil || got != 2 {
		t.Errorf("block_count = %d, %v; want 2", got, err)
	}
	if got, err := f.GetUint("general.file_type"); err != nil || got != 15 {
		t.Errorf("file_type = %d, %v; want 15", got, err)
	}
	if got, err := f.GetFloat("qwen2.rope.freq_base"); err != nil || got != 1e6 {
		t.Errorf("rope.freq_base = %g, %v; want 1e6", got, err)
	}
	if _, err := f.GetString("no.such.key"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetString(absent) err = %v, want ErrNotFound", err)
	}
	if _, err := f.GetString("qwen2.block_count"); err == nil || !strings.Contains(err.Error(), "is u32, want string") {
		t.Errorf("GetString(u32 key) err = %v, want a type error", err)
	}
	toks, err := f.GetStrings("tokenizer.ggml.tokens")
	if err != nil || len(toks) != 2048 || toks[2047] != "<|endoftext|>" {
		t.Errorf("tokens: len %d, err %v", len(toks), err)
	}
	types, err := f.GetInts("tokenizer.ggml.token_type")
	if err != nil || len(types) != 2048 {
		t.Errorf("token_type: len %d, err %v", len(types), err)
	}
	ti, ok := f.Tensor("blk.1.ffn_down.weight")
	if !ok {
		t.Fatal("blk.1.ffn_down.weight missing")
	}
	if ti.Type != quant.Q8_0 || !reflect.DeepEqual(ti.Dims, []uint64{704, 256}) || ti.Size != 704/32*34*256 {
		t.Errorf("blk.1.ffn_down.weight = %v %v size %d; want Q8_0 [704 256] size %d", ti.Type, ti.Dims, ti.Size, 704/32*34*256)
	}
}

// TestRewriteIdentical rewrites every test file through Writer and wants the same
// bytes: llama.cpp and our Writer lay out files identically.
func TestRewriteIdentical(t *testing.T) {
	for _, p := range testdataGGUFs(t) {
		name, _ := filepath.Rel(testpath.Dir(t), p)
		t.Run(name, func(t *testing.T) {
			orig, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Parse(orig)
			if err != nil {
				t.Fatal(err)
			}
			w := NewWriter()
			for _, kv := range f.KVs {
				if err := w.Set(kv.Key, kv.Value); err != nil {
					t.Fatal(err)
				}
			}
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, f.TensorData(ti)); err != nil {
					t.Fatal(err)
				}
			}
			var buf bytes.Buffer
			n, err := w.WriteTo(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(buf.Len()) {
				t.Errorf("WriteTo returned %d, wrote %d", n, buf.Len())
			}
			if !bytes.Equal(buf.Bytes(), orig) {
				i := 0
				for i < min(buf.Len(), len(orig)) && buf.Bytes()[i] == orig[i] {
					i++
				}
				t.Errorf("rewritten file differs at byte %d (got %d bytes, want %d)", i, buf.Len(), len(orig))
			}
		})
	}
}

// allValues has one key of every value type, including nested and empty arrays.
func allValues() []KV {
	nested := []Value{
		{Type: TypeArray, Elem: TypeInt32, V: []int32{1, -2, 3}},
		{Type: TypeArray, Elem: TypeString, V: []string{"a", ""}},
		{Type: TypeArray, Elem: TypeArray, V: []Value{{Type: TypeArray, Elem: TypeFloat64, V: []float64{math.Pi}}}},
	}
	return []KV{
		{"general.architecture", Value{Type: TypeString, V: "llama"}},
		{"t.u8", Value{Type: TypeUint8, V: uint8(200)}},
		{"t.i8", Value{Type: TypeInt8, V: int8(-100)}},
		{"t.u16", Value{Type: TypeUint16, V: uint16(60000)}},
		{"t.i16", Value{Type: TypeInt16, V: int16(-30000)}},
		{"t.u32", Value{Type: TypeUint32, V: uint32(4e9)}},
		{"t.i32", Value{Type: TypeInt32, V: int32(-2e9)}},
		{"t.f32", Value{Type: TypeFloat32, V: float32(1e-5)}},
		{"t.bool", Value{Type: TypeBool, V: true}},
		{"t.string", Value{Type: TypeString, V: "héllo\x00world"}},
		{"t.u64", Value{Type: TypeUint64, V: uint64(math.MaxUint64)}},
		{"t.i64", Value{Type: TypeInt64, V: int64(math.MinInt64)}},
		{"t.f64", Value{Type: TypeFloat64, V: -2.5}},
		{"t.a.u8", Value{Type: TypeArray, Elem: TypeUint8, V: []uint8{1, 2, 255}}},
		{"t.a.i8", Value{Type: TypeArray, Elem: TypeInt8, V: []int8{-1, 0, 1}}},
		{"t.a.u16", Value{Type: TypeArray, Elem: TypeUint16, V: []uint16{1, 65535}}},
		{"t.a.i16", Value{Type: TypeArray, Elem: TypeInt16, V: []int16{-32768}}},
		{"t.a.u32", Value{Type: TypeArray, Elem: TypeUint32, V: []uint32{7}}},
		{"t.a.i32", Value{Type: TypeArray, Elem: TypeInt32, V: []int32{-7, 8}}},
		{"t.a.f32", Value{Type: TypeArray, Elem: TypeFloat32, V: []float32{0.5, -0.25}}},
		{"t.a.bool", Value{Type: TypeArray, Elem: TypeBool, V: []bool{true, false, true}}},
		{"t.a.string", Value{Type: TypeArray, Elem: TypeString, V: []string{"x", "", "ü"}}},
		{"t.a.u64", Value{Type: TypeArray, Elem: TypeUint64, V: []uint64{1 << 63}}},
		{"t.a.i64", Value{Type: TypeArray, Elem: TypeInt64, V: []int64{-1 << 40}}},
		{"t.a.f64", Value{Type: TypeArray, Elem: TypeFloat64, V: []float64{1e300}}},
		{"t.a.empty", Value{Type: TypeArray, Elem: TypeFloat32, V: []float32{}}},
		{"t.a.nested", Value{Type: TypeArray, Elem: TypeArray, V: nested}},
	}
}

// smallFile is a GGUF with every value type and three tensors; the last tensor ends the
// file (its size is a multiple of 32, so no padding follows it).
func smallFile(t testing.TB) []byte {
	t.Helper()
	w := NewWriter()
	for _, kv := range allValues() {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	f16 := make([]byte, 2*3*2)
	for i := range f16 {
		f16[i] = byte(i)
	}
	q8 := make([]byte, 34*2)
	q8[0], q8[1] = 0x00, 0x3c // scale 1.0
	f32 := make([]byte, 4*8)
	for _, tt := range []struct {
		name string
		typ  quant.Type
		dims []uint64
		data []byte
	}{
		{"a", quant.F16, []uint64{3, 2}, f16},
		{"b.weight", quant.Q8_0, []uint64{32, 1, 2}, q8},
		{"c", quant.F32, []uint64{8}, f32},
	} {
		if err := w.AddTensor(tt.name, tt.typ, tt.dims, tt.data); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	data := smallFile(t)
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.KVs, allValues(); !reflect.DeepEqual(got, want) {
		for i := range min(len(got), len(want)) {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("KV %d: got %+v, want %+v", i, got[i], want[i])
			}
		}
		t.Fatalf("got %d KVs, want %d", len(got), len(want))
	}
	wantT := []TensorInfo{
		{Name: "a", Type: quant.F16, Dims: []uint64{3, 2}, Offset: 0, Size: 12},
		{Name: "b.weight", Type: quant.Q8_0, Dims: []uint64{32, 1, 2}, Offset: 32, Size: 68},
		{Name: "c", Type: quant.F32, Dims: []uint64{8}, Offset: 128, Size: 32},
	}
	if !reflect.DeepEqual(f.Tensors, wantT) {
		t.Errorf("tensors:\n got %+v\nwant %+v", f.Tensors, wantT)
	}
	if got := f.TensorData(&f.Tensors[0]); !bytes.Equal(got, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}) {
		t.Errorf("tensor a data = %v", got)
	}
	if uint64(len(data)) != f.DataOffset+128+32 {
		t.Errorf("file size %d, want data offset %d + 160", len(data), f.DataOffset)
	}
	// Write the parsed file again: identical bytes.
	w := NewWriter()
	for _, kv := range f.KVs {
		w.Set(kv.Key, kv.Value)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		w.AddTensor(ti.Name, ti.Type, ti.Dims, f.TensorData(ti))
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), data) {
		t.Errorf("second write differs from the first")
	}
}

func TestGetters(t *testing.T) {
	f, err := Parse(smallFile(t))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		get  func() (any, error)
		want any // nil: want an error
	}{
		{"uint of u8", func() (any, error) { return f.GetUint("t.u8") }, uint64(200)},
		{"uint of u64", func() (any, error) { return f.GetUint("t.u64") }, uint64(math.MaxUint64)},
		{"uint of negative", func() (any, error) { return f.GetUint("t.i8") }, nil},
		{"uint of string", func() (any, error) { return f.GetUint("t.string") }, nil},
		{"int of i16", func() (any, error) { return f.GetInt("t.i16") }, int64(-30000)},
		{"int of u32", func() (any, error) { return f.GetInt("t.u32") }, int64(4e9)},
		{"int of huge u64", func() (any, error) { return f.GetInt("t.u64") }, nil},
		{"float of f32", func() (any, error) { return f.GetFloat("t.f32") }, float64(float32(1e-5))},
		{"float of f64", func() (any, error) { return f.GetFloat("t.f64") }, -2.5},
		{"float of int", func() (any, error) { return f.GetFloat("t.i32") }, nil},
		{"bool", func() (any, error) { return f.GetBool("t.bool") }, true},
		{"string", func() (any, error) { return f.GetString("t.string") }, "héllo\x00world"},
		{"strings", func() (any, error) { return f.GetStrings("t.a.string") }, []string{"x", "", "ü"}},
		{"strings of ints", func() (any, error) { return f.GetStrings("t.a.i32") }, nil},
		{"floats of f32", func() (any, error) { return f.GetFloats("t.a.f32") }, []float32{0.5, -0.25}},
		{"floats of f64", func() (any, error) { return f.GetFloats("t.a.f64") }, []float32{float32(math.Inf(1))}},
		{"ints of u8", func() (any, error) { return f.GetInts("t.a.u8") }, []int64{1, 2, 255}},
		{"ints of i64", func() (any, error) { return f.GetInts("t.a.i64") }, []int64{-1 << 40}},
		{"ints of huge u64", func() (any, error) { return f.GetInts("t.a.u64") }, nil},
		{"ints of empty f32", func() (any, error) { return f.GetInts("t.a.empty") }, nil},
		{"absent", func() (any, error) { return f.GetBool("nope") }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.get()
			if tt.want == nil {
				if err == nil {
					t.Errorf("got %v, want an error", got)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v (%v), want %v", got, err, tt.want)
			}
		})
	}
}

func TestWriterErrors(t *testing.T) {
	tests := []struct {
		name string
		do   func(w *Writer) error
		want string
	}{
		{"unsupported Go type", func(w *Writer) error { return w.Set("k", struct{}{}) }, "unsupported Go type"},
		{"mistyped Value", func(w *Writer) error { return w.Set("k", Value{Type: TypeUint32, V: "x"}) }, "holds Go string"},
		{"bad alignment", func(w *Writer) error { return w.SetAlignment(48) }, "not a power of two"},
		{"bad alignment key", func(w *Writer) error { return w.Set(KeyAlignment, uint32(0)) }, "not a power of two"},
		{"alignment not u32", func(w *Writer) error { return w.Set(KeyAlignment, uint64(64)) }, "is u64, want u32"},
		{"duplicate tensor", func(w *Writer) error {
			w.AddTensor("x", quant.F32, []uint64{1}, make([]byte, 4))
			return w.AddTensor("x", quant.F32, []uint64{1}, make([]byte, 4))
		}, `duplicate tensor "x"`},
		{"wrong data size", func(w *Writer) error { return w.AddTensor("x", quant.F16, []uint64{4}, make([]byte, 4)) }, "4 bytes of data, want 8"},
		{"unknown type", func(w *Writer) error { return w.AddTensor("x", quant.Type(99), []uint64{4}, nil) }, "unknown tensor type 99"},
		{"bad row length", func(w *Writer) error { return w.AddTensor("x", quant.Q4_K, []uint64{100}, nil) }, "not a multiple"},
		{"too many dims", func(w *Writer) error { return w.AddTensor("x", quant.F32, []uint64{1, 1, 1, 1, 1}, nil) }, "5 dimensions"},
		{"overflow", func(w *Writer) error { return w.AddTensor("x", quant.F32, []uint64{1 << 40, 1 << 40}, nil) }, "overflows"},
		{"short stream", func(w *Writer) error {
			w.AddTensorFunc("x", quant.F32, []uint64{4}, func(w io.Writer) error { _, err := w.Write(make([]byte, 3)); return err })
			_, err := w.WriteTo(io.Discard)
			return err
		}, `tensor "x": wrote 3 bytes, want 16`},
		{"stream error", func(w *Writer) error {
			w.AddTensorFunc("x", quant.F32, []uint64{4}, func(io.Writer) error { return errors.New("boom") })
			_, err := w.WriteTo(io.Discard)
			return err
		}, `tensor "x": boom`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWriter()
			err := tt.do(w)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
			if _, err2 := w.WriteTo(io.Discard); err2 == nil {
				t.Errorf("WriteTo after a failed call succeeded; want the kept error")
			}
		})
	}
}

func TestStreamingAndAlignment(t *testing.T) {
	w := NewWriter()
	if err := w.SetAlignment(64); err != nil {
		t.Fatal(err)
	}
	w.Set("general.architecture", "llama")
	w.Set("general.architecture", "qwen2") // replaces in place
	want := [][]byte{bytes.Repeat([]byte{1}, 4*5), bytes.Repeat([]byte{2}, 4*7)}
	for i, d := range want {
		w.AddTensorFunc([]string{"s0", "s1"}[i], quant.F32, []uint64{uint64(len(d) / 4)}, func(dst io.Writer) error {
			_, err := dst.Write(d)
			return err
		})
	}
	path := filepath.Join(t.TempDir(), "s.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Alignment != 64 || f.DataOffset%64 != 0 || f.Tensors[1].Offset != 64 {
		t.Errorf("alignment %d, data offset %d, s1 offset %d; want 64, multiple of 64, 64", f.Alignment, f.DataOffset, f.Tensors[1].Offset)
	}
	if len(f.KVs) != 2 || f.Arch() != "qwen2" {
		t.Errorf("KVs %+v, want alignment then architecture qwen2", f.KVs)
	}
	for i := range want {
		if got := f.TensorData(&f.Tensors[i]); !bytes.Equal(got, want[i]) {
			t.Errorf("tensor %d data differs", i)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f.TensorData(&f.Tensors[0]) != nil || f.Close() != nil {
		t.Errorf("after Close: TensorData not nil or Close not idempotent")
	}
}

// BenchmarkOpen opens the largest vocab file (102400 tokens, 99757 merges as strings).
func BenchmarkOpen(b *testing.B) {
	p := testpath.Path(b, "tokenizer", "ggml-vocab-deepseek-llm.gguf")
	for b.Loop() {
		f, err := Open(p)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
