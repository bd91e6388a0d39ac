package tokenizer

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/internal/testpath"
)

// TestHFMetadataAgreesWithFromHF: the GGUF metadata HFMetadata writes for the real
// Qwen3, Llama 3 and trained-pair tokenizer.json files, loaded back with FromGGUF,
// encodes texts to the same ids as FromHF on the file itself.
func TestHFMetadataAgreesWithFromHF(t *testing.T) {
	texts := []string{"Hello world", "  leading spaces and\ttabs\n\nnew lines", "numbers 1234567 and 3.14",
		"unicode: 中文, émigré, Ⅻ", "<|im_start|>user\nhi<|im_end|>", "don't we'll they're"}
	for _, path := range []string{
		testpath.Path(t, "tokenizer", "hf", "qwen3", "tokenizer.json"),
		testpath.Path(t, "tokenizer", "hf", "llama3", "tokenizer.json"),
		testpath.Path(t, "models", "trained", "tokenizer.json"),
	} {
		t.Run(filepath.Base(filepath.Dir(path)), func(t *testing.T) {
			hf, err := FromHF(path)
			if err != nil {
				t.Fatal(err)
			}
			kvs, err := HFMetadata(path)
			if err != nil {
				t.Fatal(err)
			}
			w := gguf.NewWriter()
			for _, kv := range kvs {
				w.Set(kv.Key, kv.Value)
			}
			var buf bytes.Buffer
			if _, err := w.WriteTo(&buf); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Parse(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			gg, err := FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			if gg.NVocab() != hf.NVocab() {
				t.Fatalf("vocabulary: GGUF %d tokens, tokenizer.json %d", gg.NVocab(), hf.NVocab())
			}
			for _, text := range texts {
				want, err := hf.Encode(text, false, true)
				if err != nil {
					t.Fatal(err)
				}
				got, err := gg.Encode(text, false, true)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Errorf("%q: GGUF metadata encodes %v, tokenizer.json %v", text, got, want)
				}
			}
		})
	}
}
