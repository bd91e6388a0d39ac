package process

import (
	"context"
	"testing"

	"github.com/minfer/minfer/sdk"
)

// The benchmarks measure one round's crossing to a process plugin (a local gRPC call
// through go-plugin), with the sizes of issue 5: K = 64 candidates and nt = 8 rows.

func BenchmarkPolicyCall(b *testing.B) {
	c, err := Open(context.Background(), "bench", testPlugin(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	p, err := c.Policy()
	if err != nil {
		b.Fatal(err)
	}
	last := sdk.RoundOutcome{Round: 1, Depth: 8, Drafted: 8, Accepted: 5, DraftConf: make([]float32, 8), MaxDepth: 16}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.NextDepth(context.Background(), last); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSamplerCall(b *testing.B) {
	c, err := Open(context.Background(), "bench", testPlugin(b), Options{Params: []byte(`{"top_k": 64}`)})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s, err := c.Sampler()
	if err != nil {
		b.Fatal(err)
	}
	const nt, k = 8, 64
	r := &sdk.SampleRound{Draft: make([]int32, nt-1), Rows: make([]sdk.SampleRow, nt)}
	for i := range r.Rows {
		r.Rows[i] = sdk.SampleRow{IDs: make([]int32, k), Logits: make([]float32, k)}
		for j := range k {
			r.Rows[i].IDs[j] = int32(j)
			r.Rows[i].Logits[j] = float32(k - j)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Sample(context.Background(), r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPenaltyCall(b *testing.B) {
	c, err := Open(context.Background(), "bench", testPlugin(b), Options{Params: []byte(`{"factor": 1}`)})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	p, err := c.Penalty()
	if err != nil {
		b.Fatal(err)
	}
	const nt, window = 8, 64
	rows := make([]sdk.PenaltyRow, nt)
	for i := range rows {
		rows[i] = sdk.PenaltyRow{History: make([]int32, window), IDs: make([]int32, window), Logits: make([]float32, window)}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Apply(context.Background(), rows); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	path := testPlugin(b)
	for b.Loop() {
		c, err := Open(context.Background(), "bench", path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}
