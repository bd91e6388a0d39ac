package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/sdk"
)

func init() {
	register(&command{name: "specbench", summary: "speculative decoding speed and acceptance per draft depth", run: runSpecbench})
}

const specbenchUsage = `
Usage: minfer specbench -m TARGET --draft DRAFT [--depths 0,1,2,3,4,8,auto]
                        [--policies NAME,...] [--prompts FILE]... [--prompt-count N]
                        [--prompt-tokens T] [-n 128] [-r 3] [--warmup SECONDS] [--json]

For each depth (0 = plain decoding through the same round loop, auto = the configured
depth policy, adaptive by default) and each depth policy of --policies (a plugin
declared in the config, or a source: builtin:NAME, file:PATH.wasm, process:PATH; its
row is labelled auto:NAME), generates -n greedy tokens from every prompt and
reports generation tokens/s (the tokens after each request's first round over the time
after it; mean ± stddev over repetitions), acceptance (accepted /
drafted), tokens per round, the speedup over depth 0, whether every prompt's
output equals depth 0's (the greedy identity), and where a round's time went on
average: the draft phase, the target's verify forward and the plugin calls (policy,
penalty, sampler; the rest is the engine's own work). Repetitions are interleaved:
each repetition runs every depth in turn, so drift in machine speed spreads over all
depths. A warm-up of --warmup seconds runs first.

Prompts: each --prompts FILE is tokenized and --prompt-count prompts of --prompt-tokens
tokens are taken at offsets i·(tokens − prompt-tokens)/count (as the trained pair's
train-report.json draws them); without --prompts a few built-in prompts are used.

It also measures the verify-cost curve C_T(nt): ms per target forward of nt = 1…16
rows (after a 64-token prefix), and the draft's cost per one-token step.

Policies compared in one run share its interleaving, so the machine's drift spreads over
them as over the depths: to compare a policy with another setting of itself, declare
both in the config, e.g. [plugins.raw] source = "builtin:adaptive", params =
{ calibrate = 0 }, and run --policies adaptive,raw.

Examples:
  minfer specbench -m target-q8_0.gguf --draft draft-q8_0.gguf
  minfer specbench -m target-q8_0.gguf --draft draft-q8_0.gguf --prompts eval-prose.txt \
      --prompts eval-code.txt --prompt-count 8 --depths 0,1,2,4,auto -n 64 -r 2 --json
  minfer specbench -m target-q8_0.gguf --draft draft-q8_0.gguf --depths 0,1 \
      --policies adaptive,builtin:ucb,file:./my-policy.wasm
`

// specRow is one line of specbench's table: a depth (auto: the configured policy), or
// a depth policy of --policies run at depth auto.
type specRow struct {
	label  string
	depth  config.Depth
	policy string // the declared plugin the row's requests use; "" = the configured one
}

// specDepthResult is one depth's line.
type specDepthResult struct {
	Depth          string  `json:"depth"`
	TPSMean        float64 `json:"tokens_per_s"`
	TPSStd         float64 `json:"tokens_per_s_stddev"`
	Acceptance     float64 `json:"acceptance"`
	TokensPerRound float64 `json:"tokens_per_round"`
	Speedup        float64 `json:"speedup"`
	// PerRound is where a round's time went, on average: the draft phase, the target's
	// verify forward, and the plugin calls (policy, penalty, sampler). The rest of a
	// round's wall time is the engine's own work (emitting text, cache bookkeeping).
	PerRound  engine.SpecMs `json:"ms_per_round"`
	PerPrompt []float64     `json:"per_prompt_acceptance"`
	// Identical: every prompt's tokens equal depth 0's (greedy identity); false also
	// when depth 0 was not run.
	Identical  bool `json:"identical_to_depth0"`
	index      int
	samples    []float64
	drafted    int
	accepted   int
	rounds     int
	emitted    int
	ppDrafted  []int
	ppAccepted []int
	ms         engine.SpecMs // summed over the measured requests
}

type specbenchResult struct {
	Target      string            `json:"target"`
	Draft       string            `json:"draft"`
	Prompts     int               `json:"prompts"`
	NPredict    int               `json:"n_predict"`
	Reps        int               `json:"repetitions"`
	Depths      []specDepthResult `json:"depths"`
	VerifyMs    []float64         `json:"verify_cost_ms"` // [nt-1]: ms per target forward of nt rows
	DraftStepMs float64           `json:"draft_step_ms"`
}

var defaultSpecPrompts = []string{
	"Once upon a time, there was a little girl named Lily. She loved to play",
	"The quick brown fox jumps over the lazy dog. Then",
	"def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
	"In the beginning of the twentieth century, the city",
}

func runSpecbench(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("specbench", specbenchUsage)
	var (
		f                  runFlags
		depthList          string
		prompts            stringList
		count, ptoks, reps int
		warmup             float64
		curve              bool
		policyList         string
	)
	fs.StringVar(&f.configPath, "config", "", "minfer.toml to read")
	fs.StringVar(&f.modelPath, "m", "", "target model GGUF")
	fs.StringVar(&f.draftPath, "draft", "", "draft model GGUF")
	fs.StringVar(&depthList, "depths", "0,1,2,3,4,8,auto", "comma-separated depths (auto = the depth policy)")
	fs.Var(&prompts, "prompts", "text `FILE` to draw prompts from (repeatable)")
	fs.IntVar(&count, "prompt-count", 8, "prompts drawn from each --prompts file")
	fs.IntVar(&ptoks, "prompt-tokens", 64, "tokens per drawn prompt")
	fs.IntVar(&f.n, "n", 128, "tokens generated per prompt")
	fs.IntVar(&reps, "r", 3, "repetitions")
	fs.Float64Var(&warmup, "warmup", 1, "warm-up time in seconds")
	fs.IntVar(&f.threads, "threads", 0, "CPU threads (0: physical cores)")
	fs.IntVar(&f.threads, "t", 0, "alias of --threads")
	fs.IntVar(&f.draftMax, "draft-max", 0, "largest depth the policy may choose")
	fs.StringVar(&f.policy, "policy", "", "depth-policy plugin for auto")
	fs.StringVar(&policyList, "policies", "", "comma-separated depth policies to compare, each a row auto:NAME (declared names or sources)")
	fs.StringVar(&f.kvType, "kv", "", "KV cache type: f16 or q8_0")
	fs.StringVar(&f.device, "device", "", "backend: auto, cpu or cuda (default: [model] device, auto)")
	fs.StringVar(&f.trace, "trace", "", "record every speculative round as JSON lines in `FILE` (for minfer policy replay)")
	fs.BoolVar(&f.jsonOut, "json", false, "print the result as JSON")
	fs.BoolVar(&curve, "curve", true, "measure the verify-cost curve (--curve=false skips it)")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	depths, err := parseDepths(depthList)
	switch {
	case err != nil:
		return err
	case len(rest) > 0:
		return usagef("specbench: unexpected argument %q", rest[0])
	case f.draftPath == "":
		return usagef("specbench: no draft model (give --draft DRAFT)")
	case warmup < 0:
		return usagef("specbench: --warmup %g: want ≥ 0 seconds", warmup)
	case f.n < 1 || reps < 1 || count < 1 || ptoks < 1:
		return usagef("specbench: -n, -r, --prompt-count and --prompt-tokens must be ≥ 1")
	}
	cfg, _, err := config.LoadOrDefault(f.configPath)
	if err != nil {
		return err
	}
	if err := f.apply(fs, cfg); err != nil {
		return err
	}
	rows, err := specRows(cfg, depths, policyList)
	if err != nil {
		return err
	}
	cfg.Sampling.Temperature, cfg.Sampling.Sampler, cfg.Sampling.Penalty = 0, "", "" // greedy: speculation is exact
	st, err := m.openStack(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer st.close()
	ids, err := specPrompts(st, prompts, count, ptoks)
	if err != nil {
		return err
	}
	res := specbenchResult{Target: f.modelPath, Draft: f.draftPath, Prompts: len(ids), NPredict: f.n, Reps: reps}
	for i, row := range rows {
		res.Depths = append(res.Depths, specDepthResult{Depth: row.label, index: i, ppDrafted: make([]int, len(ids)), ppAccepted: make([]int, len(ids))})
	}
	if i := slices.IndexFunc(rows, isPlain); i > 0 { // depth 0 first, so every other row can be compared with it
		rows[0], rows[i] = rows[i], rows[0]
		res.Depths[0], res.Depths[i] = res.Depths[i], res.Depths[0]
		res.Depths[0].index, res.Depths[i].index = 0, i
	}
	plain := make([][]int32, len(ids)) // depth 0's tokens per prompt
	mismatch := make([]bool, len(rows))
	one := func(row specRow, prompt []int32, r *specDepthResult, pi int) error {
		c := *cfg
		c.Spec.Depth = row.depth
		if row.policy != "" {
			c.Spec.Policy = row.policy
		}
		if err := st.sess.Reset(); err != nil {
			return err
		}
		req, err := st.request(ctx, &c, prompt, runFlags{})
		if err != nil {
			return err
		}
		req.NPredict = f.n
		out, err := st.sess.Generate(ctx, req)
		st.closeRequest()
		if err != nil {
			return err
		}
		if r != nil {
			if isPlain(row) && plain[pi] == nil {
				plain[pi] = out.Tokens
			}
			if plain[pi] == nil || !slices.Equal(plain[pi], out.Tokens) {
				mismatch[r.index] = true
			}
			// the engine's generation rate: the tokens after the first round over the
			// time after it (a first round of depth d emits up to d+1 tokens at once,
			// at the time to first token; counting them as generated would favour the
			// deep depths)
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
			r.ppDrafted[pi] += out.Spec.Drafted
			r.ppAccepted[pi] += out.Spec.Accepted
		}
		return nil
	}
	for t0 := time.Now(); time.Since(t0).Seconds() < warmup; {
		for _, row := range rows {
			if err := one(row, ids[0], nil, 0); err != nil {
				return err
			}
		}
	}
	for rep := range reps {
		for ri, row := range rows {
			if !f.jsonOut && m.IsTerminal {
				fmt.Fprintf(m.Stderr, "\rrepetition %d/%d, depth %s   ", rep+1, reps, row.label)
			}
			for pi, p := range ids {
				if err := one(row, p, &res.Depths[ri], pi); err != nil {
					return err
				}
			}
		}
	}
	if !f.jsonOut && m.IsTerminal {
		fmt.Fprintf(m.Stderr, "\r%s\r", strings.Repeat(" ", 40))
	}
	summarizeDepths(res.Depths, len(ids))
	for i := range res.Depths {
		res.Depths[i].Identical = !mismatch[i]
	}
	if curve {
		if res.VerifyMs, res.DraftStepMs, err = verifyCurve(st.target, st.draft, 16); err != nil {
			return err
		}
	}
	if f.jsonOut {
		return json.NewEncoder(m.Stdout).Encode(res)
	}
	printSpecbench(m, &res)
	return nil
}

// summarize turns the raw counts into the reported figures (tokens/s per repetition
// is the mean over prompts of each prompt's generation rate).
func summarizeDepths(ds []specDepthResult, nPrompts int) {
	for i := range ds {
		d := &ds[i]
		// samples hold one rate per (repetition, prompt); average per repetition
		var perRep []float64
		for j := 0; j+nPrompts <= len(d.samples); j += nPrompts {
			m, _ := meanStd(d.samples[j : j+nPrompts])
			perRep = append(perRep, m)
		}
		if len(perRep) > 0 {
			d.TPSMean, d.TPSStd = meanStd(perRep)
		}
		if d.drafted > 0 {
			d.Acceptance = float64(d.accepted) / float64(d.drafted)
		}
		if d.rounds > 0 {
			n := float64(d.rounds)
			d.TokensPerRound = float64(d.emitted) / n
			d.PerRound = engine.SpecMs{Draft: d.ms.Draft / n, Verify: d.ms.Verify / n, Plugins: d.ms.Plugins / n}
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

func printSpecbench(m *Main, r *specbenchResult) {
	fmt.Fprintf(m.Stdout, "target %s, draft %s: %d prompts × %d tokens, %d repetitions\n\n", r.Target, r.Draft, r.Prompts, r.NPredict, r.Reps)
	w := len("depth")
	for _, d := range r.Depths {
		w = max(w, len([]rune(d.Depth)))
	}
	fmt.Fprintf(m.Stdout, "| %*s | %18s | acceptance | tokens/round | speedup | = depth 0 | draft ms/round | verify ms/round | plugins µs/round |\n", w, "depth", "tokens/s")
	fmt.Fprintf(m.Stdout, "| %s | %s | ---------- | ------------ | ------- | --------- | -------------- | --------------- | ---------------- |\n", dashes(w), dashes(18))
	// Without a depth-0 run there is nothing to compare with: no speedup, no identity.
	base := slices.ContainsFunc(r.Depths, func(d specDepthResult) bool { return d.Depth == "0" })
	for _, d := range r.Depths {
		speedup, same := fmt.Sprintf("%6.2fx", d.Speedup), fmt.Sprint(d.Identical)
		if !base {
			speedup, same = "-", "-"
		}
		fmt.Fprintf(m.Stdout, "| %*s | %18s | %10.3f | %12.2f | %7s | %9s | %14.3f | %15.3f | %16.1f |\n", w, d.Depth, fmt.Sprintf("%.2f ± %.2f", d.TPSMean, d.TPSStd),
			d.Acceptance, d.TokensPerRound, speedup, same, d.PerRound.Draft, d.PerRound.Verify, 1e3*d.PerRound.Plugins)
	}
	if len(r.VerifyMs) == 0 {
		return
	}
	fmt.Fprintf(m.Stdout, "\nverify cost C_T(nt), ms per target forward:\n")
	for i, ms := range r.VerifyMs {
		fmt.Fprintf(m.Stdout, "  nt %2d: %7.3f ms (%.2f× nt=1)\n", i+1, ms, ms/r.VerifyMs[0])
	}
	fmt.Fprintf(m.Stdout, "draft step: %.3f ms\n", r.DraftStepMs)
}

// isPlain reports whether row is depth 0 (plain decoding).
func isPlain(row specRow) bool { return row.policy == "" && row.depth == 0 }

// specRows makes the table's rows: one per depth, then one per depth policy of
// policyList (comma-separated names declared in cfg, or sources, which it declares in
// cfg as the --policy flag of run does). cfg's own policy is left as it was.
func specRows(cfg *config.Config, depths []config.Depth, policyList string) ([]specRow, error) {
	var rows []specRow
	for _, d := range depths {
		rows = append(rows, specRow{label: d.String(), depth: d})
	}
	if policyList == "" {
		return rows, nil
	}
	configured := cfg.Spec.Policy
	defer func() { cfg.Spec.Policy = configured }()
	for _, arg := range strings.Split(policyList, ",") {
		arg = strings.TrimSpace(arg)
		if arg == "" {
			return nil, usagef("specbench: --policies %q: an empty name", policyList)
		}
		if err := cfg.UsePlugin(sdk.RolePolicy, arg); err != nil {
			return nil, usagef("specbench: --policies: %v", err)
		}
		rows = append(rows, specRow{label: "auto:" + arg, depth: config.DepthAuto, policy: cfg.Spec.Policy})
	}
	return rows, nil
}

// parseDepths reads "0,1,2,auto".
func parseDepths(s string) ([]config.Depth, error) {
	var out []config.Depth
	for _, p := range strings.Split(s, ",") {
		var d config.Depth
		if err := d.UnmarshalText([]byte(strings.TrimSpace(p))); err != nil {
			return nil, usagef("specbench: --depths: %v", err)
		}
		out = append(out, d)
	}
	return out, nil
}

// specPrompts tokenizes the prompts: count evenly spaced windows of ptoks tokens per
// file, or the built-in prompts.
func specPrompts(st *stack, files []string, count, ptoks int) ([][]int32, error) {
	var out [][]int32
	bos := []int32{}
	if st.tok.AddBOS() {
		bos = append(bos, st.tok.BOS())
	}
	if len(files) == 0 {
		for _, p := range defaultSpecPrompts {
			ids, err := st.tok.Encode(p, true, false)
			if err != nil {
				return nil, err
			}
			out = append(out, ids)
		}
		return out, nil
	}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("specbench: %w", err)
		}
		ids, err := st.tok.Encode(string(text), false, false)
		if err != nil {
			return nil, err
		}
		if len(ids) < ptoks {
			return nil, fmt.Errorf("specbench: %s has %d tokens, fewer than --prompt-tokens %d", f, len(ids), ptoks)
		}
		for i := range count {
			off := i * (len(ids) - ptoks) / count // the offsets of train-report.json's simulation
			out = append(out, append(append([]int32{}, bos...), ids[off:off+ptoks]...))
		}
	}
	return out, nil
}

// verifyCurve times target forwards of nt = 1…maxNT rows after a 64-token prefix
// (median of repeated runs) and one-token draft steps.
func verifyCurve(target, draft *model.Model, maxNT int) ([]float64, float64, error) {
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
		return median(ts), nil
	}
	var curve []float64
	for nt := 1; nt <= maxNT; nt++ {
		ms, err := timeIt(target, nt)
		if err != nil {
			return nil, 0, err
		}
		curve = append(curve, ms)
	}
	ds, err := timeIt(draft, 1)
	return curve, ds, err
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}
