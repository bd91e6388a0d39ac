package engine

import (
	"github.com/minfer/minfer/internal/golden"
	"testing"

	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/internal/enginetest"
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
