package engine

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/internal/enginetest"
	"github.com/minfer/minfer/internal/golden"
)

// BenchmarkJudgeGreedy151k: the engine's per-round host work for one row of a
// Qwen-sized vocabulary with the greedy sampler (max, log-sum-exp, argmax).
func BenchmarkJudgeGreedy151k(b *testing.B) {
	const v = 151936
	row := make([]float32, v)
	for i := range row {
		row[i] = float32(int64(mix(3, uint64(i))%8192)-4096) / 1024
	}
	j := judge{sampler: enginetest.Greedy{}, needs: enginetest.Greedy{}.Needs(), vocab: v}
	rows := make([]float32, v)
	for b.Loop() {
		copy(rows, row)
		if _, err := j.run(bg, rows, nil, nil, 0, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeStories260K: plain greedy decoding through the round loop on the
// tiny real model (engine overhead is a visible share at this size).
func BenchmarkDecodeStories260K(b *testing.B) {
	be := cpu.New(cpu.Options{Threads: 1})
	defer be.Close()
	m := golden.LoadModel(b, be, "models/stories260K.gguf", "target")
	s, err := NewSession(Config{Target: m, Vocab: fakeVocab{}, Ctx: 256})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	prompt := []int32{1, 403, 407, 261, 378}
	for b.Loop() {
		s.Reset()
		if _, err := s.Generate(bg, Request{Prompt: prompt, NPredict: 64, Sampler: enginetest.Greedy{}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClients is the CPU server's 4-client bar without HTTP: C pooled, paged
// sessions sharing a Batching of 64 rows (a server's slots) on the trained target Q8_0
// with two threads, each generating one request per iteration — a distinct prompt of
// 100 tokens, 64 greedy tokens — at the same time. cpu-ms/token is the process CPU
// time per generated token (steadier on a shared machine than the wall time);
// clients=1 against clients=4 is what batching buys per CPU second.
func BenchmarkClients(b *testing.B) {
	be := cpu.New(cpu.Options{Threads: 2})
	defer be.Close()
	target := golden.LoadModel(b, be, "models/trained/target-q8_0.gguf", "target")
	const promptLen, gen = 100, 64
	v := target.Params.Vocab
	for _, clients := range []int{1, 4} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			pool, err := kv.NewPool(256, 2*clients, 1)
			if err != nil {
				b.Fatal(err)
			}
			paging, err := NewPaging(pool, target, nil, 0, 0)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				if paging != nil {
					paging.Close()
				}
			}) // after the sessions' Close (cleanups run last first)
			bt := NewBatching(64)
			sessions := make([]*Session, clients)
			for i := range sessions {
				s, err := NewSession(Config{Target: target, Vocab: fakeVocab{}, Ctx: 512, Batch: 512, Pool: pool, Paging: paging, Batching: bt})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(s.Close)
				sessions[i] = s
			}
			prompt := func(n int) []int32 { // distinct from its first token on
				p := make([]int32, promptLen)
				for k := range p {
					p[k] = int32(1 + (n*7919+k*104729)%(v-1))
				}
				return p
			}
			tokens := 0
			b.ResetTimer()
			cpu0, t0 := processCPU(), time.Now()
			for i := range b.N {
				generateTogether(b, sessions, gen, func(c int) Request {
					return Request{Prompt: prompt(i*clients + c), NPredict: gen, IgnoreEOG: true, Sampler: enginetest.Greedy{}}
				})
				tokens += clients * gen
			}
			b.ReportMetric((processCPU()-cpu0).Seconds()*1e3/float64(tokens), "cpu-ms/token")
			b.ReportMetric(float64(tokens)/time.Since(t0).Seconds(), "tokens/s")
		})
	}
}

// generateTogether runs request c on sessions[c] for every session at once and fails b
// when one fails or does not give gen tokens.
func generateTogether(b *testing.B, sessions []*Session, gen int, request func(c int) Request) {
	errs := make([]error, len(sessions))
	var wg sync.WaitGroup
	for c, s := range sessions {
		wg.Go(func() {
			res, err := s.Generate(bg, request(c))
			if err == nil && res != nil && len(res.Tokens) != gen {
				err = fmt.Errorf("%d tokens, want %d", len(res.Tokens), gen)
			}
			errs[c] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}
