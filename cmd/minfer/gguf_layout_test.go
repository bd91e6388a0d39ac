package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/quant"
	"github.com/minfer/minfer/internal/testpath"
)

// patchGGUF copies src to dir/name with edit applied to its raw bytes; edit gets the
// bytes and the parsed file to find what it changes.
func patchGGUF(t *testing.T, src, dir, name string, edit func(b []byte, f *gguf.File)) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(bytes.Clone(b))
	if err != nil {
		t.Fatal(err)
	}
	edit(b, f)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// tensorInfoAt returns the offset in b of the tensor info of name: just after its
// name string, at its dimension count.
func tensorInfoAt(t *testing.T, b []byte, name string) int {
	t.Helper()
	key := binary.LittleEndian.AppendUint64(nil, uint64(len(name)))
	key = append(key, name...)
	i := bytes.LastIndex(b, key)
	if i < 0 {
		t.Fatalf("tensor info %q not found", name)
	}
	return i + len(key)
}

// TestGGUFLayoutChecked: files whose tensor data do not lie where their infos say —
// aliased offsets, a changed alignment, a tensor type changed to another valid type of
// another size — fail to load with an error naming the tensor (before: they loaded
// and generated garbage with exit 0).
func TestGGUFLayoutChecked(t *testing.T) {
	dir := t.TempDir()
	stories := testpath.Path(t, "models", "stories260K.gguf")
	// stories with general.alignment written out, so that it can be patched in place
	aligned := rewriteGGUF(t, stories, dir, "aligned.gguf", ggufEdit{set: map[string]any{gguf.KeyAlignment: uint32(32)}})
	cfg := emptyConfig(t)
	alias := patchGGUF(t, aligned, dir, "alias.gguf", func(b []byte, f *gguf.File) {
		a, c := f.Tensors[1], f.Tensors[2]
		at := tensorInfoAt(t, b, c.Name) + 4 + 8*len(c.Dims) + 4
		binary.LittleEndian.PutUint64(b[at:], a.Offset)
	})
	realign := patchGGUF(t, aligned, dir, "realign.gguf", func(b []byte, f *gguf.File) {
		key := append(binary.LittleEndian.AppendUint64(nil, uint64(len(gguf.KeyAlignment))), gguf.KeyAlignment...)
		i := bytes.Index(b, key) + len(key) + 4 // past the value type
		binary.LittleEndian.PutUint32(b[i:], 8)
	})
	retype := patchGGUF(t, aligned, dir, "retype.gguf", func(b []byte, f *gguf.File) {
		for _, ti := range f.Tensors[:len(f.Tensors)-1] {
			if ti.Type == quant.F32 && len(ti.Dims) == 2 {
				at := tensorInfoAt(t, b, ti.Name) + 4 + 8*len(ti.Dims)
				binary.LittleEndian.PutUint32(b[at:], uint32(quant.F16))
				return
			}
		}
		t.Fatal("no 2-D F32 tensor to retype")
	})
	run := func(m string) []string {
		return []string{"run", "--config", cfg, "-m", m, "-p", "hi", "-n", "2", "--temp", "0"}
	}
	for _, c := range []robustCase{
		{name: "the aligned copy runs", args: run(aligned), want: "stop: length"},
		{name: "aliased offsets", args: run(alias), code: 1, want: "the tensor data overlap, leave a gap"},
		{name: "alignment changed", args: run(realign), code: 1, want: "bytes after the last tensor's data"},
		{name: "tensor retyped", args: run(retype), code: 1, want: "data offset 131072, want 65536"},
		{name: "inspect aliased", args: []string{"inspect", alias}, code: 1, want: "data offset"},
	} {
		t.Run(c.name, func(t *testing.T) { runRobust(t, c) })
	}
}

// TestAbsurdHyperparameters: non-finite or absurd float hyperparameters are refused
// naming the key (before: the model loaded and generated garbage with exit 0).
func TestAbsurdHyperparameters(t *testing.T) {
	dir := t.TempDir()
	stories := testpath.Path(t, "models", "stories260K.gguf")
	cfg := emptyConfig(t)
	for _, tc := range []struct {
		key  string
		v    float32
		want string
	}{
		{"llama.rope.freq_base", 1e-30, `"llama.rope.freq_base": value 1e-30 outside [1, 1e+12]`},
		{"llama.attention.layer_norm_rms_epsilon", 1e38, `"llama.attention.layer_norm_rms_epsilon": value 1e+38 outside`},
		{"llama.rope.scaling.factor", float32(math.Inf(1)), `"llama.rope.scaling.factor": value +Inf outside`},
		{"llama.rope.freq_base", float32(math.NaN()), `"llama.rope.freq_base": value NaN`},
	} {
		t.Run(tc.key, func(t *testing.T) {
			m := rewriteGGUF(t, stories, dir, "hp.gguf", ggufEdit{set: map[string]any{tc.key: tc.v}})
			runRobust(t, robustCase{args: []string{"run", "--config", cfg, "-m", m, "-p", "hi", "-n", "2", "--temp", "0"}, code: 1, want: tc.want})
		})
	}
}
