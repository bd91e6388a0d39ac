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
	rows := make([]sdk.PenaltyRow, 8)
	for i := range rows {
		for j := 0; j < 64; j++ {
			tok := int32((j * 7919) % 48)
			rows[i].History = append(rows[i].History, tok)
			if j < 48 {
				rows[i].IDs = append(rows[i].IDs, int32(j))
				rows[i].Logits = append(rows[i].Logits, 1)
			}
		}
	}
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
