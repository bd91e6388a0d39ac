package tokenizer

import (
	"strings"
	"testing"

	"github.com/minfer/minfer/internal/testpath"
)

type vectorSet struct {
	name string
	tok  func(t *testing.T) *Tokenizer
	base func(t *testing.T) string
}

func allVectorSets() []vectorSet {
	var sets []vectorSet
	for _, name := range ggufVocabs {
		if name == "bert-bge" {
			continue // WordPiece lowercases and drops accents: no round trip in llama.cpp either
		}
		file := "ggml-vocab-" + name + ".gguf"
		sets = append(sets, vectorSet{
			name: name,
			tok:  func(t *testing.T) *Tokenizer { return loadGGUF(t, "tokenizer", file) },
			base: func(t *testing.T) string { return testpath.Path(t, "tokenizer", file) },
		})
	}
	for _, p := range [][2]string{{"qwen3", "ggml-vocab-qwen2.gguf"}, {"llama3", "ggml-vocab-llama-bpe.gguf"}} {
		sets = append(sets, vectorSet{
			name: "hf-" + p[0],
			tok:  func(t *testing.T) *Tokenizer { return loadHF(t, p[0]) },
			base: func(t *testing.T) string { return testpath.Path(t, "tokenizer", "missing-vocab", p[1]) },
		})
	}
	return sets
}

// TestRoundTrip decodes every expected id list of the llama.cpp vectors. The pieces
// always concatenate to the input (byte fallback and byte-level BPE lose nothing; SPM
// adds one leading space), and Decode gives back the input exactly unless the
// vocabulary's llama.cpp clean-up of spaces before punctuation applies to it.
func TestRoundTrip(t *testing.T) {
	for _, vs := range allVectorSets() {
		t.Run(vs.name, func(t *testing.T) {
			tok := vs.tok(t)
			for i, c := range readVectors(t, vs.base(t)) {
				var pieces []byte
				for _, id := range c.want {
					pieces = append(pieces, tok.Piece(id)...)
				}
				want := c.input
				if tok.kind == kindSPM && want != "" {
					want = " " + want
				}
				if string(pieces) != want {
					t.Errorf("case %d: pieces %q, want %q", i, pieces, want)
				}
				got, err := tok.Decode(c.want)
				if err != nil {
					t.Fatalf("case %d: %v", i, err)
				}
				cleaned := false
				for _, p := range []string{" ?", " !", " .", " ,", " '"} {
					cleaned = cleaned || strings.Contains(c.input, p)
				}
				if (!tok.cleanSpaces || !cleaned) && got != c.input {
					t.Errorf("case %d: Decode = %q, want %q", i, got, c.input)
				}
			}
		})
	}
}

func TestCleanSpaces(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Hello , world !", "Hello, world!"},
		{"a ' b", "a'b"},
		{"it 's I 'm we 're they 've", "it's I'm we're they've"},
		{"don 't I 'll", "don 't I 'll"},
		{" .", "."},
		{"", ""},
	} {
		if got := string(cleanSpaces([]byte(tc.in))); got != tc.want {
			t.Errorf("cleanSpaces(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
