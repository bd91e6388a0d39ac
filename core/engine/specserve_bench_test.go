package engine

import (
	"context"
	"testing"
	"time"

	"github.com/minfer/minfer/internal/enginetest"
	"github.com/minfer/minfer/sdk"
)

// probing is a depth policy that drafts one token every gap-th round and plays depth
// 0 otherwise: a speculative session parked at depth 0 that probes, as the adaptive
// policy does where drafting does not pay.
type probing struct {
	gap, round int
}

func (p *probing) NextDepth(context.Context, sdk.RoundOutcome) (sdk.DepthDecision, error) {
	p.round++
	if p.round%p.gap == 0 {
		return sdk.DepthDecision{Depth: 1, KeepCut: true}, nil
	}
	return sdk.DepthDecision{}, nil
}

// BenchmarkSpecServing: four sessions share a Batching on the trained pair (CPU, two
// threads), each generating one request per iteration — a distinct 48-token eval
// prompt, 48 greedy tokens — at the same time: plain decoding, and speculative
// sessions whose policy probes (depth 1 every 4th round, depth 0 otherwise: a parked
// session), and sessions drafting 2 tokens every round. seqs/forward is the sequences a target forward served on average; a probe
// that takes its session out of the others' steps lowers it.
func BenchmarkSpecServing(b *testing.B) {
	target, draft, beds := trainedBed(b, "draft-q8_0.gguf")
	const clients, gen = 4, 48
	for _, mode := range []string{"plain", "probing", "depth=2"} {
		b.Run(mode, func(b *testing.B) {
			bt := NewBatching(64)
			sessions := make([]*Session, clients)
			for i := range sessions {
				cfg := Config{Target: target, Vocab: fakeVocab{}, Ctx: 256, Batch: 64, Batching: bt}
				if mode != "plain" {
					cfg.Draft = draft
				}
				s, err := NewSession(cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(s.Close)
				sessions[i] = s
			}
			tokens := 0
			f0, s0 := bt.Served(target)
			df0, ds0 := bt.Served(draft)
			b.ResetTimer()
			cpu0, t0 := processCPU(), time.Now()
			for i := range b.N {
				generateTogether(b, sessions, gen, func(c int) Request {
					prompt := append([]int32(nil), beds[(i*clients+c)%len(beds)].prompt...)
					prompt[0] = int32(1 + (i*clients+c)%100) // distinct: no shared prefix
					req := Request{Prompt: prompt, NPredict: gen, IgnoreEOG: true, Sampler: enginetest.Greedy{}}
					switch mode {
					case "probing":
						req.Policy = &probing{gap: 4}
					case "depth=2":
						req.Policy = FixedDepth(2)
					}
					return req
				})
				tokens += clients * gen
			}
			el := time.Since(t0)
			f, s := bt.Served(target)
			b.ReportMetric(float64(s-s0)/float64(f-f0), "seqs/forward")
			if df, ds := bt.Served(draft); df > df0 {
				b.ReportMetric(float64(df-df0)/float64(b.N*clients), "draft-forwards/request")
				b.ReportMetric(float64(ds-ds0)/float64(df-df0), "seqs/draft-forward")
			}
			b.ReportMetric(float64(f-f0)/float64(b.N), "forwards/op")
			b.ReportMetric((processCPU()-cpu0).Seconds()*1e3/float64(tokens), "cpu-ms/token")
			b.ReportMetric(float64(tokens)/el.Seconds(), "tokens/s")
		})
	}
}
