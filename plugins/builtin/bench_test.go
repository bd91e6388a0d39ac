package builtin

import (
	"context"
	"testing"

	"github.com/minfer/minfer/sdk"
)

// Native cost of the built-in policies per round (the WebAssembly host overhead is
// measured in plugins/wasm).
func BenchmarkPolicyNative(b *testing.B) {
	for _, name := range []string{"adaptive", "ucb", "static"} {
		b.Run(name, func(b *testing.B) {
			p := mustPolicy(b, name, `{"draft_max":8}`)
			o := sdk.RoundOutcome{Round: 0, Depth: 7, Drafted: 7, Accepted: 5, DraftConf: make([]float32, 7), DraftNs: 70000, VerifyNs: 1000000, MaxDepth: 8}
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				o.Round = i
				p.NextDepth(context.Background(), o)
			}
		})
	}
}

func BenchmarkPenaltyNative(b *testing.B) {
	p, _ := NewPenalty([]byte(`{"repeat_penalty":1.1,"repeat_last_n":64}`))
	rows := penaltyBenchRows(8, 64)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		for r := range rows { // fresh logits: repeated penalties would decay into subnormals
			for j := range rows[r].Logits {
				rows[r].Logits[j] = 1
			}
		}
		p.Apply(context.Background(), rows)
	}
}

// penaltyBenchRows builds nt verify rows as the engine does: each row's window is the
// previous one slid by the drafted token before it.
func penaltyBenchRows(nt, window int) []sdk.PenaltyRow {
	var toks []int32
	for j := 0; j < window+nt; j++ {
		toks = append(toks, int32((j*7919)%48))
	}
	rows := make([]sdk.PenaltyRow, nt)
	for i := range rows {
		rows[i].History = toks[i : i+window]
		seen := map[int32]bool{}
		for _, t := range rows[i].History {
			if !seen[t] {
				seen[t] = true
				rows[i].IDs = append(rows[i].IDs, t)
				rows[i].Logits = append(rows[i].Logits, 1)
			}
		}
	}
	return rows
}
