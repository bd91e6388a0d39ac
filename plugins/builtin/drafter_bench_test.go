package builtin

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/minfer/minfer/sdk"
)

// BenchmarkDrafterNative is plugins/wasm's BenchmarkDrafter run natively: a drafter
// told a 512-token prompt, then 512 rounds that each tell the 3 tokens emitted since
// and ask for 8, over a copy-heavy sequence (three in four tokens copy one 300 back);
// and (copied) over one whose every token after the first 300 copies the one 300
// back, the text of the copy-heavy prompts. ns/round is the iteration's time over its
// rounds (the prompt's call included).
func BenchmarkDrafterNative(b *testing.B) {
	g := rand.New(rand.NewPCG(1, 2))
	seq := make([]int32, 512+3*512)
	copied := make([]int32, len(seq))
	for i := range seq {
		if i > 300 && g.IntN(4) > 0 {
			seq[i] = seq[i-300]
		} else {
			seq[i] = int32(g.IntN(4000))
		}
		copied[i] = int32(g.IntN(4000))
		if i >= 300 {
			copied[i] = copied[i-300]
		}
	}
	for _, row := range []string{"ngram", "suffix", "ngram-copied", "suffix-copied"} {
		name, seq := row, seq
		if strings.HasSuffix(row, "-copied") {
			name, seq = strings.TrimSuffix(row, "-copied"), copied
		}
		b.Run(row, func(b *testing.B) {
			ctx := context.Background()
			p, _ := Lookup(name)
			rounds := 0
			for b.Loop() {
				d, err := p.NewDrafter(nil)
				if err != nil {
					b.Fatal(err)
				}
				q := sdk.DraftRequest{Appended: seq[:512], MaxDepth: 8, Vocab: 4096}
				for pos := 512; ; pos += 3 {
					if _, err := d.Draft(ctx, &q); err != nil {
						b.Fatal(err)
					}
					rounds++
					if pos+3 > len(seq) {
						break
					}
					q.Appended = seq[pos : pos+3]
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rounds), "ns/round")
		})
	}
}
