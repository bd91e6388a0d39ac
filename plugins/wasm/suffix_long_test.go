package wasm

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/minfer/minfer/sdk"
)

// TestSuffixLongPrompt: the built-in suffix drafter takes a 150K-token prose-like
// first prompt (Zipf-distributed tokens) inside the default 64 MiB of linear memory —
// past its max_tokens it re-indexes the newest half — and then proposes the copy of a
// recent stretch that the sequence starts again. (The suffix trie it had before ran out
// of memory near 100K tokens of such text.)
func TestSuffixLongPrompt(t *testing.T) {
	m := loadBuiltin(t)
	z := rand.NewZipf(rand.New(rand.NewPCG(7, 7)), 1.1, 1, 4095)
	seq := make([]int32, 150_000)
	for i := range seq {
		seq[i] = int32(z.Uint64())
	}
	d, err := m.Drafter(context.Background(), "suffix", nil, CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Draft(context.Background(), &sdk.DraftRequest{Appended: seq, MaxDepth: 8, Vocab: 4096}); err != nil {
		t.Fatal(err)
	}
	stretch := seq[len(seq)-1000 : len(seq)-1000+40]
	res, err := d.Draft(context.Background(), &sdk.DraftRequest{Appended: stretch[:20], MaxDepth: 8, Vocab: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Tokens, stretch[20:28]) {
		t.Fatalf("proposed %v, want the copy's continuation %v", res.Tokens, stretch[20:28])
	}
}
