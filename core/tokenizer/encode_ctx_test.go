package tokenizer

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestEncodeContextStops: a cancelled request stops tokenizing a big prompt (before:
// a 7.5 MB prompt tokenized for 8.5 s whatever became of its request).
func TestEncodeContextStops(t *testing.T) {
	text := strings.Repeat("Once upon a time, in a land far away, there lived a dragon. ", 20000)
	for name, tok := range map[string]*Tokenizer{
		"bpe": loadHF(t, "qwen3"),
		"spm": loadGGUF(t, "tokenizer", "ggml-vocab-llama-spm.gguf"),
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := tok.EncodeContext(ctx, text, true, true); !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want context.Canceled", err)
			}
			ids, err := tok.EncodeContext(context.Background(), text[:1000], true, true)
			want, _ := tok.Encode(text[:1000], true, true)
			if err != nil || len(ids) != len(want) {
				t.Fatalf("live context: got %d ids, %v; want the %d of Encode", len(ids), err, len(want))
			}
		})
	}
}

// TestMinTokensIsALowerBound: MinTokens never exceeds what Encode makes, for plain,
// repetitive, invalid-UTF-8 and special-token text, so a server refusing a prompt by
// it never refuses one that fits.
func TestMinTokensIsALowerBound(t *testing.T) {
	texts := []string{
		"", "a", strings.Repeat(" ", 5000), strings.Repeat("=", 5000), strings.Repeat("\xff\xfe", 3000),
		strings.Repeat("<|im_start|>", 500), strings.Repeat("the ", 3000), strings.Repeat("中文", 2000),
		strings.Repeat("\n", 4000), strings.Repeat("0123456789", 800),
	}
	for name, tok := range map[string]*Tokenizer{
		"qwen3":  loadHF(t, "qwen3"),
		"llama3": loadHF(t, "llama3"),
		"spm":    loadGGUF(t, "tokenizer", "ggml-vocab-llama-spm.gguf"),
	} {
		t.Run(name, func(t *testing.T) {
			if tok.MinTokens(1<<20) == 0 {
				t.Fatal("no bound for a vocabulary that has one")
			}
			for _, s := range texts {
				ids, err := tok.Encode(s, true, true)
				if err != nil {
					t.Fatal(err)
				}
				if lb := tok.MinTokens(len(s)); lb > len(ids) {
					t.Errorf("%.20q… (%d bytes): MinTokens %d > %d tokens", s, len(s), lb, len(ids))
				}
			}
		})
	}
}
