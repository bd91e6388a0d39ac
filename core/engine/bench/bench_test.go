package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/internal/enginetest"
	"github.com/minfer/minfer/internal/golden"
)

// vocab names every id "<id>" and ends no generation.
type vocab = enginetest.Vocab[engine.TextStream]

func TestRun(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	m := golden.LoadModel(t, b, "models/stories260K.gguf", "target")
	cache, err := m.NewKV(32, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []Test{{N: 32, Chunk: 8, Reps: 3}, {N: 8, Chunk: 1, Reps: 2}} {
		got, err := Run(context.Background(), b, m, cache, tc, rng)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tc.Reps {
			t.Fatalf("%+v: %d samples, want %d", tc, len(got), tc.Reps)
		}
		for _, ts := range got {
			if !(ts > 0) {
				t.Errorf("%+v: rate %v, want > 0", tc, ts)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, b, m, cache, Test{N: 32, Chunk: 8, Reps: 1}, rng); err != context.Canceled {
		t.Errorf("cancelled: err = %v, want context.Canceled", err)
	}
}

// pauseCounter is a backend with a ledger to pause (as the CUDA backend's): it records
// how often Run paused it and whether it was left paused.
type pauseCounter struct {
	*cpu.Backend
	pauses int
	paused bool
}

func (p *pauseCounter) PauseLedger(on bool) {
	if on {
		p.pauses++
	}
	p.paused = on
}

// TestRunDepth: a test at depth d has d tokens in the cache before its timed forwards
// (the cache ends at d + N), fills it with the ledger paused once a repetition and the
// warm-up, never leaves the ledger paused, and fails with the cache's error, not a
// panic, where depth and test do not fit.
func TestRunDepth(t *testing.T) {
	b := &pauseCounter{Backend: cpu.New(cpu.Options{Threads: 2})}
	defer b.Close()
	m := golden.LoadModel(t, b.Backend, "models/stories260K.gguf", "target")
	cache, err := m.NewKV(40, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	got, err := Run(context.Background(), b, m, cache, Test{N: 8, Chunk: 4, Depth: 24, DepthChunk: 16, Reps: 2}, rng)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || cache.Len() != 32 || b.pauses != 3 || b.paused {
		t.Fatalf("%d samples, cache at %d, %d pauses (left paused: %v); want 2, 32, 3, false", len(got), cache.Len(), b.pauses, b.paused)
	}
	b.pauses = 0
	if _, err := Run(context.Background(), b, m, cache, Test{N: 8, Chunk: 1, Reps: 1}, rng); err != nil || b.pauses != 0 || cache.Len() != 8 {
		t.Fatalf("depth 0: err %v, %d pauses, cache at %d; want nil, 0, 8", err, b.pauses, cache.Len())
	}
	if _, err := Run(context.Background(), b, m, cache, Test{N: 8, Chunk: 8, Depth: 36, DepthChunk: 16, Reps: 1}, rng); err == nil || b.paused {
		t.Fatalf("depth 36 + 8 in a 40-token cache: err %v (left paused: %v), want an error", err, b.paused)
	}
}

// TestSpec: with draft = target every row reproduces depth 0's tokens (Identical),
// depth 0 is moved to the front and is the speedups' base, speculative rows accept
// every draft, and the plain row drafts nothing.
func TestSpec(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	target := golden.LoadModel(t, b, "models/stories260K.gguf", "target")
	draft := golden.LoadModel(t, b, "models/stories260K.gguf", "draft")
	sess, err := engine.NewSession(engine.Config{Target: target, Draft: draft, Vocab: vocab{}, Ctx: 128})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	rows := []Row{{Label: "2", Depth: 2}, {Label: "0", Depth: 0}, {Label: "3", Depth: 3}}
	var progress []string
	req := func(_ context.Context, row Row, prompt []int32) (engine.Request, func(), error) {
		r := engine.Request{Prompt: prompt, NPredict: 16, Sampler: enginetest.Greedy{}}
		if row.Depth != config.DepthAuto && row.Depth > 0 {
			r.Policy = engine.FixedDepth(int(row.Depth))
		}
		return r, func() {}, nil
	}
	res, err := Spec(context.Background(), SpecOptions{Session: sess, Rows: rows, Prompts: [][]int32{{1, 403, 407}, {1, 261, 378}},
		Reps: 2, Warmup: time.Millisecond, Request: req, Progress: func(rep int, row Row) { progress = append(progress, fmt.Sprintf("%d:%s", rep, row.Label)) }})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(progress), "[0:0 0:2 0:3 1:0 1:2 1:3]"; got != want {
		t.Errorf("progress %s, want %s (depth 0 first, repetitions interleaved)", got, want)
	}
	if res[0].Depth != "0" || res[0].Speedup != 1 || res[0].Acceptance != 0 {
		t.Errorf("first row %+v, want depth 0 with speedup 1 and nothing drafted", res[0])
	}
	for _, r := range res {
		if !r.Identical {
			t.Errorf("depth %s: output differs from depth 0's", r.Depth)
		}
		if r.TPSMean <= 0 || r.Speedup <= 0 || len(r.PerPrompt) != 2 {
			t.Errorf("depth %s: %+v", r.Depth, r)
		}
		if !(r.RoundMs > 0) || !(r.PluginShare >= 0 && r.PluginShare < 1) || r.PerRound.Drafters != 0 {
			t.Errorf("depth %s: round %v ms, plugin share %v, drafter calls %v ms: want a round's wall time, a share in [0, 1), no drafter calls",
				r.Depth, r.RoundMs, r.PluginShare, r.PerRound.Drafters)
		}
		if r.Depth != "0" && r.Acceptance != 1 {
			t.Errorf("depth %s: acceptance %v with draft = target, want 1", r.Depth, r.Acceptance)
		}
	}
}

func TestVerifyCurve(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	m := golden.LoadModel(t, b, "models/stories260K.gguf", "target")
	curve, step, err := VerifyCurve(m, m, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(curve) != 4 || step <= 0 {
		t.Fatalf("curve %v, draft step %v", curve, step)
	}
}

func TestMeanStdMedian(t *testing.T) {
	m, s := MeanStd([]float64{1, 2, 3, 4})
	if m != 2.5 || fmt.Sprintf("%.6f", s) != "1.290994" {
		t.Errorf("MeanStd = %v, %v; want 2.5, 1.290994", m, s)
	}
	if m, s := MeanStd([]float64{7}); m != 7 || s != 0 {
		t.Errorf("MeanStd of one value = %v, %v", m, s)
	}
	if got := Median([]float64{5, 1, 3, 2}); got != 3 {
		t.Errorf("Median = %v, want 3 (the upper middle)", got)
	}
}

// TestSuite: a line per pp and tg size (0 skipped), each with the shared fields, its
// repetitions and their mean; the table has a row per line.
func TestSuite(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 1})
	defer b.Close()
	m := golden.LoadModel(t, b, "models/stories260K.gguf", "target")
	cache, err := m.NewKV(16, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	base := Result{Model: "stories", Type: "F32", Threads: 1, KV: "f16", Params: ParamCount(m)}
	got, err := Suite(context.Background(), b, m, cache, SuiteOptions{Prompt: []int{16, 0}, Gen: []int{4}, Batch: 8, Reps: 2, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Test != "pp16" || got[0].NPrompt != 16 || got[1].Test != "tg4" || got[1].NGen != 4 {
		t.Fatalf("got %+v, want pp16 and tg4 (pp0 skipped)", got)
	}
	// every test at every depth, named as llama-bench names them
	deep, err := Suite(context.Background(), b, m, cache, SuiteOptions{Prompt: []int{4}, Gen: []int{2}, Depth: []int{0, 8}, Batch: 8, Reps: 1, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range deep {
		names = append(names, fmt.Sprintf("%s/%d", r.Test, r.NDepth))
	}
	if want := "pp4/0 pp4 @ d8/8 tg2/0 tg2 @ d8/8"; strings.Join(names, " ") != want {
		t.Fatalf("tests %q, want %q", strings.Join(names, " "), want)
	}
	for _, r := range got {
		if r.Model != "stories" || r.Params == 0 || len(r.SamplesTS) != 2 || !(r.AvgTS > 0) {
			t.Errorf("%s: %+v, want the base fields, 2 samples and a mean", r.Test, r)
		}
	}
	var out strings.Builder
	WriteTable(&out, got, b.Name())
	if n := strings.Count(out.String(), "\n"); n != 4 || !strings.Contains(out.String(), "| stories") {
		t.Errorf("table of %d lines, want a header, a rule and 2 rows:\n%s", n, out.String())
	}
}
