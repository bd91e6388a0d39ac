package tokenizer

import (
	"bytes"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/gguf"
)

// ggufWith writes a metadata-only GGUF with kv and parses it back.
func ggufWith(t *testing.T, kv map[string]any) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for k, v := range kv {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFromGGUFErrors(t *testing.T) {
	toks := []string{"a", "b", "ab"}
	for _, tc := range []struct {
		name string
		kv   map[string]any
		want string
	}{
		{"no model", map[string]any{"tokenizer.ggml.tokens": toks}, "tokenizer.ggml.model"},
		{"no tokens", map[string]any{"tokenizer.ggml.model": "llama"}, "tokenizer.ggml.tokens"},
		{"unknown model", map[string]any{"tokenizer.ggml.model": "t5", "tokenizer.ggml.tokens": toks}, `"t5"`},
		{"no vocab", map[string]any{"tokenizer.ggml.model": "no_vocab"}, "no vocabulary"},
		{"gpt2 without merges", map[string]any{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": toks}, "tokenizer.ggml.merges"},
		{"unknown pre", map[string]any{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": toks,
			"tokenizer.ggml.merges": []string{"a b"}, "tokenizer.ggml.pre": "martian"}, "martian"},
		{"tokens not strings", map[string]any{"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": []int32{1, 2}}, "tokenizer.ggml.tokens"},
		{"scores count", map[string]any{"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": toks,
			"tokenizer.ggml.scores": []float32{1}}, "scores"},
		{"bad bos type", map[string]any{"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": toks,
			"tokenizer.ggml.bos_token_id": "one"}, "bos_token_id"},
		{"empty vocab", map[string]any{"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": []string{}}, "no vocabulary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromGGUF(ggufWith(t, tc.kv))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to name %q", err, tc.want)
			}
		})
	}
}

// TestFromGGUFMinimal builds a three-token SPM vocabulary from scratch: ids beyond the
// vocabulary are ignored, and a missing byte token is a clear Encode error.
func TestFromGGUFMinimal(t *testing.T) {
	f := ggufWith(t, map[string]any{
		"tokenizer.ggml.model":              "llama",
		"tokenizer.ggml.tokens":             []string{"<unk>", "<s>", "</s>", "\u2581a", "a"},
		"tokenizer.ggml.scores":             []float32{0, 0, 0, -1, -2},
		"tokenizer.ggml.token_type":         []int32{2, 3, 3, 1, 1},
		"tokenizer.ggml.padding_token_id":   uint32(4294967295),
		"tokenizer.ggml.add_bos_token":      true,
		"tokenizer.chat_template":           "{{ bos_token }}",
		"tokenizer.ggml.seperator_token_id": uint32(99),
	})
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := tok.Encode("a", true, false)
	if err != nil || !equalIDs(ids, []int32{1, 3}) {
		t.Fatalf("Encode(a) = %v, %v; want [1 3]", ids, err)
	}
	if _, err := tok.Encode("b", false, false); err == nil || !strings.Contains(err.Error(), "has no token") {
		t.Fatalf("Encode(b) without byte tokens: err %v", err)
	}
	if got, _ := tok.RenderChat(nil, false); got != "<s>" {
		t.Fatalf("RenderChat = %q", got)
	}
	if !tok.IsEOG(2) || tok.IsEOG(1) {
		t.Fatal("EOG set wrong")
	}

	// gpt2's default BOS/EOS id 11 does not exist in a 3-token vocabulary.
	small, err := FromGGUF(ggufWith(t, map[string]any{
		"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": []string{"a", "b", "ab"},
		"tokenizer.ggml.merges": []string{"a b"}, "tokenizer.ggml.add_bos_token": true,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if small.BOS() != -1 || small.EOS() != -1 || small.AddBOS() {
		t.Fatalf("BOS %d EOS %d AddBOS %v, want -1 -1 false", small.BOS(), small.EOS(), small.AddBOS())
	}
	if _, err := small.Encode("ab", true, false); err == nil {
		t.Fatal("Encode with add_bos_token but no BOS token: no error")
	}
	if ids, err := small.Encode("ab", false, false); err != nil || !equalIDs(ids, []int32{2}) {
		t.Fatalf("Encode(ab) = %v, %v; want [2]", ids, err)
	}
}
