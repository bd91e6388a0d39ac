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
