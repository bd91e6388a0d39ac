package gguf

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse: it must return a one-line error or a File
// whose tensors lie in bounds and which Writer writes back stably
// (write(parse(write(parse(x)))) == write(parse(x))). Seeds: a small file with every
// value type, and the files of ../shared/testdata: their first 16 KiB (cheap to mutate:
// header and first keys) and the whole file when under 2 MiB (else the first 256 KiB,
// which holds the metadata). Large seeds make minimization slow; run with
// -fuzzminimizetime=5s.
func FuzzParse(f *testing.F) {
	f.Add(smallFile(f))
	f.Add(newFB(3, 1, 1).str(KeyAlignment).u32(uint32(TypeUint32)).u32(64).tensor("t", 0, 0, 2).data(8).b)
	for _, p := range testdataGGUFs(f) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:16<<10])
		if len(b) > 2<<20 {
			b = b[:256<<10]
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "gguf: ") || strings.Contains(msg, "\n") {
				t.Fatalf("error %q is not one line starting with \"gguf: \"", msg)
			}
			return
		}
		for i := range file.Tensors {
			ti := &file.Tensors[i]
			if d := file.TensorData(ti); uint64(len(d)) != ti.Size {
				t.Fatalf("tensor %q: TensorData has %d bytes, want %d", ti.Name, len(d), ti.Size)
			}
		}
		once := rewrite(t, file)
		again, err := Parse(once)
		if err != nil {
			t.Fatalf("written file does not parse: %v", err)
		}
		if twice := rewrite(t, again); !bytes.Equal(once, twice) {
			t.Fatalf("rewriting is not stable (%d then %d bytes)", len(once), len(twice))
		}
	})
}

func rewrite(t *testing.T, f *File) []byte {
	t.Helper()
	w := NewWriter()
	for _, kv := range f.KVs {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatalf("Set of a parsed value: %v", err)
		}
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, f.TensorData(ti)); err != nil {
			t.Fatalf("AddTensor of a parsed tensor: %v", err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	return buf.Bytes()
}
