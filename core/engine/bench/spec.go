package bench

import (
	"context"
	"slices"
	"time"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine"
)

// Row is one line of a speculative benchmark: a depth (auto: the configured policy), or
// a depth policy run at depth auto.
type Row struct {
	Label  string
	Depth  config.Depth
	Policy string // the declared plugin the row's requests use; "" = the configured one
	// Drafter, when set, is the row's [spec] drafter list (drafter plugins, comma-
	// separated; "-" = none), and NoDraftModel keeps the draft model out of its rounds
	// (a row of drafter plugins alone, engine.Request.NoDraftModel).
	Drafter      string
	NoDraftModel bool
}

// Plain reports whether r is depth 0 (plain decoding through the round loop).
func (r Row) Plain() bool { return r.Policy == "" && r.Drafter == "" && r.Depth == 0 }

// SpecOptions describe a speculative benchmark.
type SpecOptions struct {
	Session *engine.Session
	Rows    []Row
	Prompts [][]int32
	Reps    int
	// Warmup runs every row on the first prompt, over and over, for this long first.
	Warmup time.Duration
	// Request builds the greedy request of one row for one prompt; release (called
	// after the request ends) frees its plugin instances.
	Request func(ctx context.Context, row Row, prompt []int32) (req engine.Request, release func(), err error)
	// Progress, when set, is called before each row of each repetition.
	Progress func(rep int, row Row)
}

// RowResult is one row's figures (specbench's JSON fields).
type RowResult struct {
	Depth          string  `json:"depth"`
	TPSMean        float64 `json:"tokens_per_s"`
	TPSStd         float64 `json:"tokens_per_s_stddev"`
	Acceptance     float64 `json:"acceptance"`
	TokensPerRound float64 `json:"tokens_per_round"`
	Speedup        float64 `json:"speedup"`
	// PerRound is where a round's time went, on average: the draft phase (its drafter
	// plugin calls apart too), the target's verify forward, and the plugin calls
	// (policy, penalty, sampler). The rest of a round's wall time is the engine's own
	// work (emitting text, cache bookkeeping).
	PerRound engine.SpecMs `json:"ms_per_round"`
	// RoundMs is a round's wall time: the requests' generation time over their rounds
	// after the first (whose time is the prompt's, see Timings). PluginShare is the
	// plugin calls' part of it, (PerRound.Plugins + PerRound.Drafters) / RoundMs: the
	// boundary's cost per round, every role together.
	RoundMs     float64   `json:"round_ms"`
	PluginShare float64   `json:"plugin_share"`
	PerPrompt   []float64 `json:"per_prompt_acceptance"`
	// Identical: every prompt's tokens equal depth 0's (greedy identity); false also
	// when depth 0 was not run.
	Identical bool `json:"identical_to_depth0"`
	// RoundsByDrafter counts the rounds that drafted, by drafter name ("model" for the
	// draft model); absent when none did.
	RoundsByDrafter map[string]int `json:"rounds_by_drafter,omitempty"`
	// DrafterPromptMs is the time the drafter plugins took to take in a request's
	// prompt (told them during its prefill, engine.SpecMs.DraftersPrompt), on average:
	// not a round's.
	DrafterPromptMs float64 `json:"drafter_prompt_ms,omitempty"`

	samples    []float64 // one generation rate per (repetition, prompt)
	drafted    int
	accepted   int
	rounds     int
	emitted    int
	ppDrafted  []int
	ppAccepted []int
	ms         engine.SpecMs // summed over the measured requests
	genMs      float64       // their generation time (Timings.GenMs)
	genRounds  int           // and rounds after the first
	requests   int           // measured requests
}

// Spec runs every row on every prompt, o.Reps times, interleaved (each repetition runs
// every row in turn, so drift in machine speed spreads over all rows), after the
// warm-up. Depth 0, when present, runs first and is the results' first entry, so every
// other row's tokens are compared with it (Identical) and its rate is the speedups'
// base. The generation rate of a request is the engine's (the tokens after the first
// round over the time after it: a first round of depth d emits up to d+1 tokens at
// the time to first token, and counting them as generated would favour deep depths).
func Spec(ctx context.Context, o SpecOptions) ([]RowResult, error) {
	rows := slices.Clone(o.Rows)
	res := make([]RowResult, len(rows))
	for i, row := range rows {
		res[i] = RowResult{Depth: row.Label, ppDrafted: make([]int, len(o.Prompts)), ppAccepted: make([]int, len(o.Prompts))}
	}
	if i := slices.IndexFunc(rows, Row.Plain); i > 0 {
		rows[0], rows[i] = rows[i], rows[0]
		res[0], res[i] = res[i], res[0]
	}
	plain := make([][]int32, len(o.Prompts)) // depth 0's tokens per prompt
	mismatch := make([]bool, len(rows))
	one := func(ri int, pi int, measured bool) error {
		if err := o.Session.Reset(); err != nil {
			return err
		}
		req, release, err := o.Request(ctx, rows[ri], o.Prompts[pi])
		if err != nil {
			return err
		}
		out, err := o.Session.Generate(ctx, req)
		release()
		if err != nil || !measured {
			return err
		}
		r := &res[ri]
		if rows[ri].Plain() && plain[pi] == nil {
			plain[pi] = out.Tokens
		}
		if plain[pi] == nil || !slices.Equal(plain[pi], out.Tokens) {
			mismatch[ri] = true
		}
		if out.Timings.GenTPS > 0 {
			r.samples = append(r.samples, out.Timings.GenTPS)
		}
		r.drafted += out.Spec.Drafted
		r.accepted += out.Spec.Accepted
		r.rounds += out.Spec.Rounds
		r.emitted += len(out.Tokens)
		r.ms.Draft += out.Spec.Ms.Draft
		r.ms.Verify += out.Spec.Ms.Verify
		r.ms.Plugins += out.Spec.Ms.Plugins
		r.ms.Drafters += out.Spec.Ms.Drafters
		r.ms.DraftersPrompt += out.Spec.Ms.DraftersPrompt
		r.requests++
		if out.Timings.GenMs > 0 && out.Spec.Rounds > 1 {
			r.genMs += out.Timings.GenMs
			r.genRounds += out.Spec.Rounds - 1
		}
		for name, b := range out.Spec.ByDrafter {
			if r.RoundsByDrafter == nil {
				r.RoundsByDrafter = map[string]int{}
			}
			r.RoundsByDrafter[name] += b.Rounds
		}
		r.ppDrafted[pi] += out.Spec.Drafted
		r.ppAccepted[pi] += out.Spec.Accepted
		return nil
	}
	for t0 := time.Now(); time.Since(t0) < o.Warmup; {
		for ri := range rows {
			if err := one(ri, 0, false); err != nil {
				return nil, err
			}
		}
	}
	for rep := range o.Reps {
		for ri, row := range rows {
			if o.Progress != nil {
				o.Progress(rep, row)
			}
			for pi := range o.Prompts {
				if err := one(ri, pi, true); err != nil {
					return nil, err
				}
			}
		}
	}
	summarize(res, len(o.Prompts))
	for i := range res {
		res[i].Identical = !mismatch[i]
	}
	return res, nil
}

// summarize turns the raw counts into the reported figures (tokens/s per repetition
// is the mean over prompts of each prompt's generation rate).
func summarize(ds []RowResult, nPrompts int) {
	for i := range ds {
		d := &ds[i]
		var perRep []float64
		for j := 0; j+nPrompts <= len(d.samples); j += nPrompts {
			m, _ := MeanStd(d.samples[j : j+nPrompts])
			perRep = append(perRep, m)
		}
		if len(perRep) > 0 {
			d.TPSMean, d.TPSStd = MeanStd(perRep)
		}
		if d.drafted > 0 {
			d.Acceptance = float64(d.accepted) / float64(d.drafted)
		}
		if d.rounds > 0 {
			n := float64(d.rounds)
			d.TokensPerRound = float64(d.emitted) / n
			d.PerRound = engine.SpecMs{Draft: d.ms.Draft / n, Verify: d.ms.Verify / n, Plugins: d.ms.Plugins / n, Drafters: d.ms.Drafters / n}
		}
		if d.requests > 0 {
			d.DrafterPromptMs = d.ms.DraftersPrompt / float64(d.requests)
		}
		if d.genRounds > 0 {
			d.RoundMs = d.genMs / float64(d.genRounds)
			d.PluginShare = (d.PerRound.Plugins + d.PerRound.Drafters) / d.RoundMs
		}
		d.PerPrompt = make([]float64, len(d.ppDrafted))
		for p := range d.ppDrafted {
			if d.ppDrafted[p] > 0 {
				d.PerPrompt[p] = float64(d.ppAccepted[p]) / float64(d.ppDrafted[p])
			}
		}
	}
	var base float64
	for _, d := range ds {
		if d.Depth == "0" {
			base = d.TPSMean
		}
	}
	for i := range ds {
		if base > 0 {
			ds[i].Speedup = ds[i].TPSMean / base
		}
	}
}
