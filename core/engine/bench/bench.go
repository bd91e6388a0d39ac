// Package bench holds minfer's measurement loops, next to the engine they measure:
// llama-bench's pp/tg tests (Run), speculative decoding per depth and depth policy
// (Spec) and the verify-cost curve (VerifyCurve). The commands bench and specbench parse
// flags, call these and print; the figures in docs/PERFORMANCE.md come from here.
package bench

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
)

// Test is one llama-bench test: N random tokens fed as forwards of Chunk tokens (the
// prompt test: Chunk = the batch; the generation test: Chunk = 1).
type Test struct {
	N, Chunk int
	// Depth tokens are in the cache when the timed forwards start (llama-bench's -d):
	// random tokens fed before each repetition, untimed, as forwards of DepthChunk.
	Depth, DepthChunk int
	// Reps timed repetitions follow one warm-up run, each from an empty cache.
	Reps int
}

// ledgerPauser is a backend whose profiling ledger (the CUDA backend's --ledger) can
// leave forwards out of its table: a test's depth fill is not part of the test.
type ledgerPauser interface{ PauseLedger(bool) }

// Run times t on md (whose backend is b) with cache, which holds at least t.Depth + t.N
// positions, drawing tokens from rng. It returns the tokens per second of each
// repetition. ctx is checked between forwards, so a long test stops promptly.
func Run(ctx context.Context, b backend.Backend, md *model.Model, cache *kv.Cache, t Test, rng *rand.Rand) ([]float64, error) {
	ids := make([]int32, t.N)
	fill := make([]int32, t.Depth)
	feed := func(ids []int32, chunk int) error {
		for p := 0; p < len(ids); p += chunk {
			if err := ctx.Err(); err != nil {
				return err
			}
			if _, err := md.Forward(ids[p:min(p+chunk, len(ids))], cache, false); err != nil {
				return err
			}
		}
		return b.Sync() // a GPU backend only enqueues
	}
	once := func() (float64, error) {
		for i := range fill {
			fill[i] = int32(rng.IntN(md.Params.Vocab))
		}
		for i := range ids {
			ids[i] = int32(rng.IntN(md.Params.Vocab))
		}
		cache.Reset()
		if len(fill) > 0 {
			lp, pause := b.(ledgerPauser)
			if pause {
				lp.PauseLedger(true)
			}
			err := feed(fill, max(t.DepthChunk, 1))
			if pause {
				lp.PauseLedger(false)
			}
			if err != nil {
				return 0, err
			}
		}
		t0 := time.Now()
		if err := feed(ids, t.Chunk); err != nil {
			return 0, err
		}
		return float64(t.N) / time.Since(t0).Seconds(), nil
	}
	if _, err := once(); err != nil { // warm-up
		return nil, err
	}
	var out []float64
	for range t.Reps {
		ts, err := once()
		if err != nil {
			return nil, err
		}
		out = append(out, ts)
	}
	return out, nil
}

// MeanStd is the mean and sample standard deviation (llama-bench's stdev); 0 spread for
// fewer than two values.
func MeanStd(xs []float64) (float64, float64) {
	var s float64
	for _, x := range xs {
		s += x
	}
	mean := s / float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var v float64
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(v / float64(len(xs)-1))
}

// Median is the middle value (the upper one of an even count).
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// VerifyCurve times target forwards of nt = 1…maxNT rows after a 64-token prefix (the
// median of repeated runs, ms) and a one-token draft step (ms).
func VerifyCurve(target, draft *model.Model, maxNT int) ([]float64, float64, error) {
	const prefix, runs = 64, 7
	timeIt := func(md *model.Model, nt int) (float64, error) {
		c, err := md.NewKV(prefix+maxNT, 0)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		ids := make([]int32, prefix+maxNT)
		for i := range ids {
			ids[i] = int32((i*2654435761 + 7) % md.Params.Vocab)
		}
		if _, err := md.Forward(ids[:prefix], c, false); err != nil {
			return 0, err
		}
		var ts []float64
		for range runs {
			if err := c.Truncate(prefix); err != nil {
				return 0, err
			}
			t0 := time.Now()
			if _, err := md.Forward(ids[prefix:prefix+nt], c, true); err != nil {
				return 0, err
			}
			ts = append(ts, float64(time.Since(t0).Nanoseconds())/1e6)
		}
		return Median(ts), nil
	}
	var curve []float64
	for nt := 1; nt <= maxNT; nt++ {
		ms, err := timeIt(target, nt)
		if err != nil {
			return nil, 0, err
		}
		curve = append(curve, ms)
	}
	if draft == nil { // drafter plugins only: no draft step to time
		return curve, 0, nil
	}
	ds, err := timeIt(draft, 1)
	return curve, ds, err
}
