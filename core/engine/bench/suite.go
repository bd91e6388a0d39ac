package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
)

// Result is one test's line of minfer bench (llama-bench's JSON field names where they exist).
type Result struct {
	Model     string    `json:"model_filename"`
	Type      string    `json:"model_type"`
	SizeBytes int64     `json:"model_size"`
	Params    int64     `json:"model_n_params"`
	Threads   int       `json:"n_threads"`
	KV        string    `json:"type_kv"`
	Test      string    `json:"test"`
	NPrompt   int       `json:"n_prompt"`
	NGen      int       `json:"n_gen"`
	NDepth    int       `json:"n_depth"`
	AvgTS     float64   `json:"avg_ts"`
	StddevTS  float64   `json:"stddev_ts"`
	SamplesTS []float64 `json:"samples_ts"`
}

// SuiteOptions are llama-bench's tests: a pp test per Prompt size (forwards of Batch
// tokens) and a tg test per Gen size (0 skips one), each at every Depth (tokens already
// in the cache; none when Depth is empty), each Reps times after a warm-up.
type SuiteOptions struct {
	Prompt, Gen, Depth []int
	Batch, Reps        int
	// Base holds the fields every line shares (the model, threads, KV type).
	Base Result
}

// Suite runs o's tests on md with cache (which holds the largest depth and test), tokens
// drawn from one seeded generator, and returns a line per test and depth, named as
// llama-bench names them (pp512, tg128 @ d2048).
func Suite(ctx context.Context, b backend.Backend, md *model.Model, cache *kv.Cache, o SuiteOptions) ([]Result, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	type benchTest struct {
		name   string
		n      int
		chunk  int
		pp, tg int
	}
	var tests []benchTest
	for _, np := range o.Prompt {
		tests = append(tests, benchTest{"pp", np, o.Batch, np, 0})
	}
	for _, ng := range o.Gen {
		tests = append(tests, benchTest{"tg", ng, 1, 0, ng})
	}
	depths := o.Depth
	if len(depths) == 0 {
		depths = []int{0}
	}
	var results []Result
	for _, test := range tests {
		if test.n == 0 {
			continue
		}
		for _, d := range depths {
			r := o.Base
			r.Test, r.NPrompt, r.NGen, r.NDepth = fmt.Sprintf("%s%d", test.name, test.n), test.pp, test.tg, d
			if d > 0 {
				r.Test += fmt.Sprintf(" @ d%d", d)
			}
			var err error
			t := Test{N: test.n, Chunk: test.chunk, Depth: d, DepthChunk: o.Batch, Reps: o.Reps}
			if r.SamplesTS, err = Run(ctx, b, md, cache, t, rng); err != nil {
				return nil, err
			}
			r.AvgTS, r.StddevTS = MeanStd(r.SamplesTS)
			results = append(results, r)
		}
	}
	return results, nil
}

// WriteTable writes results as llama-bench's markdown table, on the named backend.
func WriteTable(w io.Writer, results []Result, backendName string) {
	d := func(n int) string { return strings.Repeat("-", n) }
	fmt.Fprintf(w, "| %-28s | %-8s | %10s | %8s | %7s | %4s | %14s | %20s |\n", "model", "type", "size", "params", "backend", "kv", "test", "t/s")
	fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", d(28), d(8), d(10), d(8), d(7), d(4), d(14), d(20))
	for _, r := range results {
		fmt.Fprintf(w, "| %-28s | %-8s | %6.2f MiB | %6.2f M | %-4s%3d | %4s | %14s | %20s |\n", r.Model, r.Type,
			float64(r.SizeBytes)/(1<<20), float64(r.Params)/1e6, backendName, r.Threads, r.KV, r.Test, fmt.Sprintf("%.2f ± %.2f", r.AvgTS, r.StddevTS))
	}
}

// ParamCount is the number of weights of the model (its tensors' elements).
func ParamCount(md *model.Model) int64 {
	var n int64
	for _, t := range md.File().Tensors {
		n += int64(t.Elements())
	}
	return n
}
