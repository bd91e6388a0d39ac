package builtin_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/minfer/minfer/plugins/builtin"
	"github.com/minfer/minfer/plugins/wasm"
	"github.com/minfer/minfer/sdk"
)

// BenchmarkAdaptiveRounds is the adaptive policy's cost per round, natively and through
// WebAssembly, on varied rounds as its automatic cut-off makes them: depths 1-8 on a
// GPU's costs, half the rounds ended early by the cut-off, acceptance that moves
// (BenchmarkPolicyNative and plugins/wasm's BenchmarkPolicy repeat one round, which
// never stops early).
func BenchmarkAdaptiveRounds(b *testing.B) {
	rounds := cutRounds(4096)
	run := func(b *testing.B, p sdk.DepthPolicy) {
		ctx := context.Background()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			o := rounds[i%len(rounds)]
			o.Round = i
			if _, err := p.NextDepth(ctx, o); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("native", func(b *testing.B) {
		p, err := builtin.NewAdaptive(nil)
		if err != nil {
			b.Fatal(err)
		}
		run(b, p)
	})
	b.Run("wasm", func(b *testing.B) {
		p, err := loadWasm(b).Policy(context.Background(), "adaptive", nil, wasm.CallOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		run(b, p)
	})
}

// cutRounds returns n seeded rounds of bound 8 on the trained pair's H200 costs (a draft
// step 75 µs, a verify of nt rows 192 µs + 8 µs a row, measured with up to 20% more).
func cutRounds(n int) []sdk.RoundOutcome {
	g := rand.New(rand.NewPCG(1, 2))
	rounds := make([]sdk.RoundOutcome, n)
	accept := 0.7
	for i := range rounds {
		if i%200 == 0 {
			accept = 0.3 + 0.65*g.Float64()
		}
		d := 1 + g.IntN(8)
		drafted, steps := d, d
		if g.IntN(2) == 0 { // the cut-off stopped the round
			drafted = g.IntN(d)
			steps = drafted + 1
		}
		acc := 0
		for acc < drafted && g.Float64() < accept {
			acc++
		}
		jitter := 1 + 0.2*g.Float64()
		rounds[i] = sdk.RoundOutcome{Depth: d, Drafted: drafted, Accepted: acc, DraftConf: make([]float32, drafted),
			DraftNs: int64(75e3 * float64(steps) * jitter), VerifyNs: int64((192e3 + 8e3*float64(drafted+1)) * jitter), MaxDepth: 8}
	}
	return rounds
}
