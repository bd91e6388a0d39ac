package wasm

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/minfer/minfer/internal/drafttest"
	"github.com/minfer/minfer/plugins/builtin"
	"github.com/minfer/minfer/sdk"
)

// Per-round host overhead of each built-in role through WebAssembly, with K=64
// candidates and nt=8 rows (targets: ≤ 2 µs policy, ≤ 20 µs sampler or penalty), and
// instantiation with a warm compilation cache (target ≤ 10 ms).

func benchRound(k, nt int) *sdk.SampleRound {
	g := rand.New(rand.NewPCG(1, 1))
	r := &sdk.SampleRound{Seed: 1, Step: 1}
	for i := 0; i < nt; i++ {
		row := sdk.SampleRow{}
		for j := 0; j < k; j++ {
			row.IDs = append(row.IDs, int32(j*7+i))
			row.Logits = append(row.Logits, float32(k-j)/8) // sorted best first
		}
		r.Rows = append(r.Rows, row)
		if i < nt-1 {
			r.Draft = append(r.Draft, row.IDs[g.IntN(min(2, k))])
		}
	}
	return r
}

func BenchmarkPolicy(b *testing.B) {
	for _, name := range []string{"adaptive", "ucb", "static"} {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			p, err := loadBuiltin(b).Policy(ctx, name, []byte(`{"draft_max":16}`), CallOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			o := sdk.RoundOutcome{Round: 0, Depth: 7, Drafted: 7, Accepted: 5, DraftConf: make([]float32, 7), DraftNs: 70000, VerifyNs: 1000000, MaxDepth: 8}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				o.Round = i
				if _, err := p.NextDepth(ctx, o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkSampler(b *testing.B) {
	for _, tc := range []struct{ name, params string }{
		{"greedy", `{}`},
		{"sampling", `{"top_k":64}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := loadBuiltin(b).Sampler(ctx, tc.name, []byte(tc.params), CallOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			r := benchRound(max(s.Needs().TopK, 1), 8)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r.Step = uint64(i)
				if _, err := s.Sample(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkPenalty(b *testing.B) {
	ctx := context.Background()
	p, err := loadBuiltin(b).Penalty(ctx, "penalty", []byte(`{"repeat_penalty":1.1,"repeat_last_n":64}`), CallOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	// 8 verify rows, each window (64 tokens) the previous one slid by a drafted token
	g := rand.New(rand.NewPCG(2, 2))
	var toks []int32
	for j := 0; j < 64+8; j++ {
		toks = append(toks, int32(g.IntN(48)))
	}
	rows := make([]sdk.PenaltyRow, 8)
	for i := range rows {
		rows[i].History = toks[i : i+64]
		seen := map[int32]bool{}
		for _, tok := range rows[i].History {
			if !seen[tok] {
				seen[tok] = true
				rows[i].IDs = append(rows[i].IDs, tok)
				rows[i].Logits = append(rows[i].Logits, 1)
			}
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := range rows { // fresh logits: repeated penalties would decay into subnormals
			for j := range rows[r].Logits {
				rows[r].Logits[j] = 1
			}
		}
		if err := p.Apply(ctx, rows); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInstantiate measures starting one instance of the built-in module (its
// compiled code is in the cache after the first Load).
func BenchmarkInstantiate(b *testing.B) {
	ctx := context.Background()
	m := loadBuiltin(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		in, err := m.newInstance(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		in.close(ctx)
		b.StartTimer()
	}
}

// BenchmarkLoadWarm measures Load with a warm on-disk compilation cache: compile (a cache
// hit), validate and start one instance.
func BenchmarkLoadWarm(b *testing.B) {
	ctx := context.Background()
	loadBuiltin(b) // warm the cache
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m, err := Load(ctx, builtin.WASM, Options{Name: "builtin", Instances: 1, Trusted: true})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		m.Close(ctx)
		b.StartTimer()
	}
}

// BenchmarkInterruptible is the same module loaded as a user's module is (deadlines
// enforced inside calls): the price of wazero's per-loop termination checks.
func BenchmarkInterruptible(b *testing.B) {
	ctx := context.Background()
	m, err := Load(ctx, builtin.WASM, Options{Name: "builtin", Instances: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close(ctx)
	b.Run("static", func(b *testing.B) {
		p, err := m.Policy(ctx, "static", nil, CallOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		o := sdk.RoundOutcome{Round: 0, Depth: 7, Drafted: 7, Accepted: 5, DraftConf: make([]float32, 7), DraftNs: 70000, VerifyNs: 1000000, MaxDepth: 8}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := p.NextDepth(ctx, o); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("greedy", func(b *testing.B) {
		s, err := m.Sampler(ctx, "greedy", nil, CallOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		r := benchRound(1, 8)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.Sample(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSamplerFullRows: the `sampling` sampler with top_k 0 (full rows of a
// 32768-token vocabulary cross the boundary), nt=8.
func BenchmarkSamplerFullRows(b *testing.B) {
	ctx := context.Background()
	s, err := loadBuiltin(b).Sampler(ctx, "sampling", []byte(`{"top_k":0}`), CallOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	g := rand.New(rand.NewPCG(3, 3))
	r := &sdk.SampleRound{Seed: 1}
	for i := 0; i < 8; i++ {
		row := sdk.SampleRow{}
		for j := 0; j < 32768; j++ {
			row.IDs = append(row.IDs, int32(j))
			row.Logits = append(row.Logits, float32(g.NormFloat64()*3))
		}
		r.Rows = append(r.Rows, row)
		if i < 7 {
			r.Draft = append(r.Draft, int32(g.IntN(32768)))
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Step = uint64(i)
		if _, err := s.Sample(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDrafter is the drafter's share of a request through WebAssembly: each
// iteration starts a drafter, tells it a 512-token prompt, then runs 512 rounds that
// each tell the 3 tokens emitted since and ask for 8, over a copy-heavy sequence
// (internal/drafttest.CopyHeavy, BenchmarkDrafterNative's too). ns/round is the iteration's time over its
// rounds (the prompt's call included).
func BenchmarkDrafter(b *testing.B) {
	seq := drafttest.CopyHeavy()
	for _, name := range []string{"ngram", "suffix"} {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			m := loadBuiltin(b)
			rounds := 0
			for b.Loop() {
				d, err := m.Drafter(ctx, name, nil, CallOptions{})
				if err != nil {
					b.Fatal(err)
				}
				n, err := drafttest.Rounds(ctx, d, seq)
				if err != nil {
					b.Fatal(err)
				}
				rounds += n
				d.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rounds), "ns/round")
		})
	}
}
