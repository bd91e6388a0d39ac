package gguf

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fb builds raw GGUF bytes for hostile-input tests.
type fb struct{ b []byte }

func newFB(version uint32, nTensors, nKV uint64) *fb {
	f := &fb{b: []byte(Magic)}
	return f.u32(version).u64(nTensors).u64(nKV)
}

func (f *fb) u32(v uint32) *fb  { f.b = binary.LittleEndian.AppendUint32(f.b, v); return f }
func (f *fb) u64(v uint64) *fb  { f.b = binary.LittleEndian.AppendUint64(f.b, v); return f }
func (f *fb) raw(b ...byte) *fb { f.b = append(f.b, b...); return f }
func (f *fb) str(s string) *fb  { f.u64(uint64(len(s))); f.b = append(f.b, s...); return f }
func (f *fb) zeros(n int) *fb   { f.b = append(f.b, make([]byte, n)...); return f }

// tensor appends a tensor info.
func (f *fb) tensor(name string, typ uint32, off uint64, dims ...uint64) *fb {
	f.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		f.u64(d)
	}
	return f.u32(typ).u64(off)
}

// padTo pads with zeros to a multiple of a.
func (f *fb) padTo(a int) *fb {
	for len(f.b)%a != 0 {
		f.b = append(f.b, 0)
	}
	return f
}

// data pads with zeros to a multiple of 32 and then adds n data bytes.
func (f *fb) data(n int) *fb {
	for len(f.b)%32 != 0 {
		f.b = append(f.b, 0)
	}
	return f.zeros(n)
}

func TestHostileInputs(t *testing.T) {
	deep := newFB(3, 0, 1).str("k").u32(uint32(TypeArray))
	for range maxDepth + 2 {
		deep.u32(uint32(TypeArray)).u64(1)
	}
	deep.u32(uint32(TypeUint8)).u64(0)

	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"short magic", []byte("GGU"), "too short"},
		{"bad magic", append([]byte("GGML"), make([]byte, 20)...), "bad magic"},
		{"no version", []byte("GGUF\x03"), "version at offset 4: file truncated"},
		{"version 4", newFB(4, 0, 0).b, "unsupported version 4"},
		{"version 1", newFB(1, 0, 0).b, "unsupported version 1"},
		{"big-endian", newFB(3<<24, 0, 0).b, "big-endian"},
		{"huge tensor count", newFB(3, 1<<40, 0).b, "tensor count 1099511627776 exceeds file"},
		{"huge kv count", newFB(3, 0, math.MaxUint64).b, "metadata count 18446744073709551615 exceeds file"},
		{"huge key length", newFB(3, 0, 1).u64(1 << 60).zeros(16).b, "key #0: string length 1152921504606846976 exceeds file"},
		{"huge string value", newFB(3, 0, 1).str("x").u32(uint32(TypeString)).u64(1 << 60).zeros(8).b, `key "x": string length 1152921504606846976 exceeds file`},
		{"huge array count", newFB(3, 0, 1).str("x").u32(uint32(TypeArray)).u32(uint32(TypeUint8)).u64(1 << 40).zeros(8).b, `key "x": array of u8: count 1099511627776 exceeds file`},
		{"huge string array", newFB(3, 0, 1).str("x").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(1 << 40).zeros(64).b, "count 1099511627776 exceeds file"},
		{"array of u64 overflowing bytes", newFB(3, 0, 1).str("x").u32(uint32(TypeArray)).u32(uint32(TypeUint64)).u64(1 << 61).zeros(64).b, "exceeds file"},
		{"array items beyond file", newFB(3, 0, 1).str("x").u32(uint32(TypeArray)).u32(uint32(TypeUint32)).u64(3).zeros(8).b, "count 3 exceeds file (8 bytes left"},
		{"string array item truncated", newFB(3, 0, 1).str("x").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(2).str("ab").u64(5).b, `key "x": array item 1: string length 5 exceeds file`},
		{"unknown value type", newFB(3, 0, 1).str("x").u32(13).zeros(8).b, `key "x": unknown value type 13`},
		{"unknown array type", newFB(3, 0, 1).str("x").u32(uint32(TypeArray)).u32(99).u64(0).b, "array of unknown value type 99"},
		{"arrays nested too deep", deep.b, "nested deeper than 16"},
		{"bool 2", newFB(3, 0, 1).str("x").u32(uint32(TypeBool)).raw(2).zeros(8).b, "bool value 2"},
		{"duplicate key", newFB(3, 0, 2).str("x").u32(uint32(TypeUint8)).raw(1).str("x").u32(uint32(TypeUint8)).raw(1).b, `duplicate key "x"`},
		{"alignment not power of two", newFB(3, 0, 1).str(KeyAlignment).u32(uint32(TypeUint32)).u32(48).b, "not a power of two"},
		{"alignment zero", newFB(3, 0, 1).str(KeyAlignment).u32(uint32(TypeUint32)).u32(0).b, "not a power of two"},
		{"alignment a string", newFB(3, 0, 1).str(KeyAlignment).u32(uint32(TypeString)).str("32").b, `key "general.alignment" is string, want u32`},
		{"alignment a u64", newFB(3, 0, 1).str(KeyAlignment).u32(uint32(TypeUint64)).u64(64).b, "is u64, want u32"},
		{"alignment too large", newFB(3, 0, 1).str(KeyAlignment).u32(uint32(TypeUint32)).u32(1 << 31).b, "not a power of two ≤ 2^30"},
		{"tensor name too long", newFB(3, 1, 0).u64(1 << 62).zeros(24).b, "tensor #0 name: string length"},
		{"too many dims", newFB(3, 1, 0).tensor("t", 0, 0, 1, 1, 1, 1, 1).b, `tensor "t": 5 dimensions (max 4)`},
		{"unknown tensor type", newFB(3, 1, 0).tensor("t", 99, 0, 4).data(16).b, `tensor "t": unknown tensor type 99`},
		{"removed tensor type 4", newFB(3, 1, 0).tensor("t", 4, 0, 32).data(32).b, "unknown tensor type 4"},
		{"dims product overflow", newFB(3, 1, 0).tensor("t", 0, 0, 1<<32, 1<<32).data(32).b, "overflows int64"},
		{"dim above int64", newFB(3, 1, 0).tensor("t", 0, 0, 1<<63).data(32).b, "dimension 0 is 9223372036854775808"},
		{"byte size overflow", newFB(3, 1, 0).tensor("t", 0, 0, 1<<31, 1<<31).data(32).b, "byte size overflows"},
		{"row not multiple of block", newFB(3, 1, 0).tensor("t", 12, 0, 100).data(32).b, "row length 100 is not a multiple of the Q4_K block size 256"},
		{"misaligned offset", newFB(3, 1, 0).tensor("t", 0, 4, 1).data(64).b, `tensor "t": offset 4 is not a multiple of the alignment 32`},
		{"data out of bounds", newFB(3, 1, 0).tensor("blk.0.attn_q.weight", 0, 32, 8).data(32).b, `tensor "blk.0.attn_q.weight" data [128, 160) out of file bounds (size 128)`},
		{"huge offset", newFB(3, 1, 0).tensor("t", 0, 1<<63, 8).data(32).b, "out of file bounds"},
		{"max offset", newFB(3, 1, 0).tensor("t", 0, math.MaxUint64&^31, 8).data(32).b, "out of file bounds"},
		{"no data section", newFB(3, 1, 0).tensor("t", 0, 0, 8).b, "out of file bounds"},
		{"duplicate tensor", newFB(3, 2, 0).tensor("t", 0, 0, 8).tensor("t", 0, 32, 8).data(64).b, `duplicate tensor "t"`},
		{"truncated tensor info", newFB(3, 1, 0).str("t").u32(2).u64(4).zeros(8).b, `tensor "t" type at offset 53: file truncated`},
		{"zero-size tensor past end", newFB(3, 1, 0).tensor("t", 0, 0, 0).b, `tensor "t" data [64, 64) out of file bounds (size 57)`},
		// layout (issue 23 item 7): llama.cpp wants each tensor at the aligned end of
		// the one before; aliases, overlaps, gaps and retyped tensors load garbage
		{"aliased offsets", newFB(3, 2, 0).tensor("a", 0, 0, 8).tensor("b", 0, 0, 8).data(64).b, `tensor "b": data offset 0, want 32 (the aligned end of tensor "a" before it)`},
		{"overlapping", newFB(3, 2, 0).tensor("a", 0, 0, 16).tensor("b", 0, 32, 8).data(96).b, `tensor "b": data offset 32, want 64`},
		{"out of order", newFB(3, 2, 0).tensor("a", 0, 32, 8).tensor("b", 0, 0, 8).data(64).b, `tensor "a": data offset 32, want 0 (the data section's start)`},
		{"gap at start", newFB(3, 1, 1).str(KeyAlignment).u32(uint32(TypeUint32)).u32(64).tensor("t", 0, 64, 1).data(128).b, `tensor "t": data offset 64, want 0`},
		{"retyped last tensor (f32 to f16)", newFB(3, 2, 0).tensor("a", 0, 0, 8).tensor("b", 1, 32, 32).data(32 + 128).b, `64 bytes after the last tensor's data`},
		{"retyped tensor (f16 to f32)", newFB(3, 2, 0).tensor("a", 0, 0, 16).tensor("b", 1, 32, 8).data(96).b, `tensor "b": data offset 32, want 64`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse(tt.data)
			if err == nil {
				t.Fatalf("Parse succeeded (%d KVs, %d tensors), want error containing %q", len(f.KVs), len(f.Tensors), tt.want)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "gguf: ") || !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Errorf("err = %q, want one line starting \"gguf: \" containing %q", msg, tt.want)
			}
		})
	}
}

func TestValidEdgeCases(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"empty file body", newFB(3, 0, 0).b},
		{"version 2", newFB(2, 0, 0).b},
		{"zero-size tensor", newFB(3, 1, 0).tensor("t", 0, 0, 0).data(0).b},
		{"scalar tensor", newFB(3, 1, 0).tensor("t", 0, 0).data(4).b},
		{"alignment 64", newFB(3, 1, 1).str(KeyAlignment).u32(uint32(TypeUint32)).u32(64).tensor("t", 0, 0, 1).padTo(64).zeros(4).b},
		{"two tensors, padded", newFB(3, 2, 0).tensor("a", 0, 0, 3).tensor("b", 0, 32, 2).data(32 + 8).b},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse(tt.data); err != nil {
				t.Errorf("Parse: %v, want success", err)
			}
		})
	}
}

// TestTruncatedPrefixes parses every proper prefix of a small valid file: each must
// fail cleanly (the last tensor ends the file, so any cut loses data).
func TestTruncatedPrefixes(t *testing.T) {
	data := smallFile(t)
	if _, err := Parse(data); err != nil {
		t.Fatal(err)
	}
	for n := range len(data) {
		// A fresh copy of exactly n bytes, so reading past it would fault under -race.
		p := append([]byte(nil), data[:n]...)
		if f, err := Parse(p); err == nil {
			t.Fatalf("prefix of %d/%d bytes parsed (%d KVs, %d tensors), want an error", n, len(data), len(f.KVs), len(f.Tensors))
		} else if !strings.HasPrefix(err.Error(), "gguf: ") {
			t.Fatalf("prefix %d: err %q lacks the gguf: prefix", n, err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "nope.gguf"), "no such file"},
		{"directory", dir, "not a regular file"},
		{"empty", write("empty.gguf", nil), "file is empty"},
		{"garbage", write("garbage.gguf", []byte("hello world, not a model")), "garbage.gguf: bad magic"},
		{"version 4", write("v4.gguf", newFB(4, 0, 0).b), "v4.gguf: unsupported version 4"},
		{"truncated", write("trunc.gguf", smallFile(t)[:200]), "trunc.gguf: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Open(tt.path)
			if err == nil {
				f.Close()
				t.Fatalf("Open succeeded, want error containing %q", tt.want)
			}
			if !strings.HasPrefix(err.Error(), "gguf: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestHugeNamesQuotedShort: a 2.7 MB key or tensor name is quoted in an error cut to
// MaxQuoted bytes with its length (before: the whole name, a 2.7 MB error line).
func TestHugeNamesQuotedShort(t *testing.T) {
	long := strings.Repeat("k", 2_700_000)
	for name, data := range map[string][]byte{
		"key":    newFB(3, 0, 1).str(long).u32(99).b,
		"tensor": newFB(3, 1, 0).tensor(long, 0, 0, 4).b,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(data)
			if err == nil {
				t.Fatal("got no error")
			}
			if msg := err.Error(); len(msg) > 500 || !strings.Contains(msg, "… (2700000 bytes)") {
				t.Fatalf("error of %d bytes: %.300s", len(msg), msg)
			}
		})
	}
}
