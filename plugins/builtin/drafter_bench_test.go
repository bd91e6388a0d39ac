package builtin

import (
	"context"
	"strings"
	"testing"

	"github.com/minfer/minfer/internal/drafttest"
)

// BenchmarkDrafterNative is plugins/wasm's BenchmarkDrafter run natively, on the same
// workload (internal/drafttest): a drafter told a 512-token prompt, then 512 rounds that
// each tell the 3 tokens emitted since and ask for 8, over drafttest.CopyHeavy; and
// (-copied) over drafttest.Copied. ns/round is the iteration's time over its
// rounds (the prompt's call included).
func BenchmarkDrafterNative(b *testing.B) {
	seq, copied := drafttest.CopyHeavy(), drafttest.Copied()
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
				n, err := drafttest.Rounds(ctx, d, seq)
				if err != nil {
					b.Fatal(err)
				}
				rounds += n
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rounds), "ns/round")
		})
	}
}
