package tokenizer

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/internal/testpath"
)

type vectorCase struct {
	input string
	want  []int32
}

// readVectors reads llama.cpp's X.gguf.inp / X.gguf.out pair (format in
// shared/testdata/tokenizer/README.md).
func readVectors(t *testing.T, base string) []vectorCase {
	t.Helper()
	inp, err := os.ReadFile(base + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	outb, err := os.ReadFile(base + ".out")
	if err != nil {
		t.Fatal(err)
	}
	sep := []byte("\n__ggml_vocab_test__\n")
	var inputs []string
	for len(inp) > 0 {
		i := bytes.Index(inp, sep)
		if i < 0 {
			inputs = append(inputs, string(inp))
			break
		}
		inputs = append(inputs, string(inp[:i]))
		inp = inp[i+len(sep):]
	}
	lines := strings.Split(strings.TrimSuffix(string(outb), "\n"), "\n")
	if len(lines) != len(inputs) {
		t.Fatalf("%s: %d inputs, %d output lines", base, len(inputs), len(lines))
	}
	cases := make([]vectorCase, len(inputs))
	for i, in := range inputs {
		var ids []int32
		for _, f := range strings.Fields(lines[i]) {
			v, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s line %d: %v", base, i+1, err)
			}
			ids = append(ids, int32(v))
		}
		cases[i] = vectorCase{in, ids}
	}
	return cases
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var (
	hfOnce sync.Map // path → *hfLoad
)

type hfLoad struct {
	once sync.Once
	tok  *Tokenizer
	err  error
}

// loadHF loads a tokenizer.json once per test binary (they take a moment to build).
func loadHF(t testing.TB, name string) *Tokenizer {
	t.Helper()
	p := testpath.Path(t, "tokenizer", "hf", name, "tokenizer.json")
	v, _ := hfOnce.LoadOrStore(p, &hfLoad{})
	l := v.(*hfLoad)
	l.once.Do(func() { l.tok, l.err = FromHF(p) })
	if l.err != nil {
		t.Fatal(l.err)
	}
	return l.tok
}

func checkVectors(t *testing.T, tok *Tokenizer, base string) {
	for i, c := range readVectors(t, base) {
		got, err := tok.Encode(c.input, false, false)
		if err != nil {
			t.Errorf("case %d %q: %v", i, c.input, err)
			continue
		}
		if !equalIDs(got, c.want) {
			t.Errorf("case %d %q:\n got %v\nwant %v", i, c.input, got, c.want)
		}
	}
}

func TestHFVectors(t *testing.T) {
	for _, tc := range []struct{ hf, vectors string }{
		{"qwen3", "ggml-vocab-qwen2.gguf"},
		{"llama3", "ggml-vocab-llama-bpe.gguf"},
	} {
		t.Run(tc.hf, func(t *testing.T) {
			checkVectors(t, loadHF(t, tc.hf), testpath.Path(t, "tokenizer", "missing-vocab", tc.vectors))
		})
	}
}

// loadGGUF opens a GGUF and builds its tokenizer, once per test binary.
func loadGGUF(t testing.TB, elem ...string) *Tokenizer {
	t.Helper()
	p := testpath.Path(t, elem...)
	v, _ := hfOnce.LoadOrStore(p, &hfLoad{})
	l := v.(*hfLoad)
	l.once.Do(func() {
		f, err := gguf.Open(p)
		if err != nil {
			l.err = err
			return
		}
		defer f.Close()
		l.tok, l.err = FromGGUF(f)
	})
	if l.err != nil {
		t.Fatal(l.err)
	}
	return l.tok
}

// ggufVocabs are the vocab-only GGUFs with test vectors.
var ggufVocabs = []string{"bert-bge", "deepseek-coder", "deepseek-llm", "falcon", "gpt-2", "llama-spm", "mpt", "phi-3", "refact", "starcoder"}

func TestGGUFVectors(t *testing.T) {
	for _, name := range ggufVocabs {
		t.Run(name, func(t *testing.T) {
			file := "ggml-vocab-" + name + ".gguf"
			tok := loadGGUF(t, "tokenizer", file)
			checkVectors(t, tok, testpath.Path(t, "tokenizer", file))
		})
	}
}
