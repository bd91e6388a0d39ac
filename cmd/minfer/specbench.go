package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine/bench"
	"github.com/minfer/minfer/internal/specbench"
	"github.com/minfer/minfer/internal/stack"
)

func init() {
	register(&command{name: "specbench", summary: "speculative decoding speed and acceptance per draft depth", run: runSpecbench})
}

const specbenchUsage = `
Usage: minfer specbench -m TARGET [--draft DRAFT] [--depths 0,1,2,3,4,8,auto]
                        [--policies NAME,...] [--drafter NAME,...] [--drafters model,NAME,...,auto]
                        [--prompt-lines FILE]... [--prompts FILE]... [--prompt-count N]
                        [--prompt-tokens T] [-n 128] [-r 3] [--warmup SECONDS] [--json]

For each depth (0 = plain decoding through the same round loop, auto = the configured
depth policy, adaptive by default) and each depth policy of --policies (a plugin
declared in the config, or a source: builtin:NAME, file:PATH.wasm, process:PATH; its
row is labelled auto:NAME), generates -n greedy tokens from every prompt and
reports generation tokens/s (the tokens after each request's first round over the time
after it; mean ± stddev over repetitions), acceptance (accepted /
drafted), tokens per round, the speedup over depth 0, whether every prompt's
output equals depth 0's (the greedy identity), and where a round's time went on
average: the draft phase, the target's verify forward, the plugin calls (policy,
penalty, sampler; the rest is the engine's own work) and the drafter plugin calls (a
part of the draft phase), a round's wall time, and the share of it that every plugin
call together took (plugin share). Repetitions are interleaved:
each repetition runs every depth in turn, so drift in machine speed spreads over all
depths. A warm-up of --warmup seconds runs first.

Prompts: each --prompt-lines FILE gives one prompt per non-blank line, as prompts are
usually written (in a .jsonl file each line is {"prompt": "..."} or a JSON string; a
.jsonl given to --prompts is read the same way). Each --prompts FILE is a corpus: it is
tokenized and --prompt-count prompts of --prompt-tokens tokens are taken at offsets
i·(tokens − prompt-tokens)/count (as the trained pair's train-report.json draws them).
Without either a few built-in prompts are used. Each
--copy-prompts FILE gives prompts the same way, each followed by its own first
--copy-tokens tokens again: the continuation repeats what the prompt holds (the shape
of code editing and quoting, where drafter plugins pay).

It also measures the verify-cost curve C_T(nt): ms per target forward of nt = 1…16 (--curve-rows)
rows (after a 64-token prefix), and the draft's cost per one-token step.

Drafters: --drafter NAME,... (or [spec] drafter) gives every row drafter plugins beside
(or, without --draft, instead of) the draft model. --drafters adds a row per drafter at
depth auto, labelled drafter:NAME: "model" (the draft model alone), a drafter plugin
(declared, or a source; alone, without the draft model) and "auto" (the draft model and
every drafter plugin listed, the depth policy choosing each round's drafter).

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
  minfer specbench -m target-q8_0.gguf --draft draft-q8_0.gguf --prompts copy.txt \
      --depths 0 --drafters model,ngram,suffix,auto
  minfer specbench -m target-q8_0.gguf --drafter ngram --depths 0,2,4,auto
`

func runSpecbench(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("specbench", specbenchUsage)
	var (
		f                  runFlags
		depthList          string
		prompts, copies    stringList
		lines              stringList
		copyTokens         int
		count, ptoks, reps int
		warmup             float64
		curve              bool
		curveRows          int
		policyList         string
		drafterList        string
	)
	f.defineModel(fs)
	f.defineSpec(fs)
	fs.StringVar(&depthList, "depths", "0,1,2,3,4,8,auto", "comma-separated depths (auto = the depth policy)")
	fs.Var(&prompts, "prompts", "a corpus `FILE` to draw --prompt-count windows of --prompt-tokens from (repeatable)")
	fs.Var(&lines, "prompt-lines", "a `FILE` of prompts, one per line (.jsonl: {\"prompt\": ...} per line; repeatable)")
	fs.Var(&copies, "copy-prompts", "text `FILE` to draw copy-heavy prompts from: each window, then its first --copy-tokens tokens again (repeatable)")
	fs.IntVar(&copyTokens, "copy-tokens", 8, "tokens of its window a --copy-prompts prompt starts again")
	fs.IntVar(&count, "prompt-count", 8, "prompts drawn from each --prompts file")
	fs.IntVar(&ptoks, "prompt-tokens", 64, "tokens per drawn prompt")
	fs.IntVar(&f.n, "n", 128, "tokens generated per prompt")
	fs.IntVar(&reps, "r", 3, "repetitions")
	fs.Float64Var(&warmup, "warmup", 1, "warm-up time in seconds")
	fs.StringVar(&policyList, "policies", "", "comma-separated depth policies to compare, each a row auto:NAME (declared names or sources)")
	fs.StringVar(&drafterList, "drafters", "", "comma-separated drafters to compare, each a row drafter:NAME: model, drafter plugins (alone), auto (all of them)")
	fs.BoolVar(&f.jsonOut, "json", false, "print the result as JSON")
	fs.BoolVar(&curve, "curve", true, "measure the verify-cost curve (--curve=false skips it)")
	fs.IntVar(&curveRows, "curve-rows", 16, "largest nt of the verify-cost curve")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	depths, err := specbench.ParseDepths(depthList)
	switch {
	case err != nil:
		return err
	case len(rest) > 0:
		return usagef("specbench: unexpected argument %q", rest[0])
	case f.draftPath == "" && f.drafter == "" && drafterList == "":
		return usagef("specbench: no draft model and no drafter (give --draft DRAFT, --drafter NAME or --drafters)")
	case warmup < 0:
		return usagef("specbench: --warmup %g: want ≥ 0 seconds", warmup)
	}
	if err := atLeastOne(fs, "n", "r", "prompt-count", "prompt-tokens", "curve-rows"); err != nil {
		return err
	}
	cfg, _, err := config.LoadOrDefault(f.configPath)
	if err != nil {
		return err
	}
	if err := f.apply(fs, cfg); err != nil {
		return err
	}
	rows, err := specbench.Rows(cfg, depths, policyList)
	if err != nil {
		return err
	}
	if rows, err = specbench.DrafterRows(cfg, rows, drafterList); err != nil {
		return err
	}
	if cfg.Draft.Path == "" && cfg.Spec.Drafter == "" && !slices.ContainsFunc(rows, func(r bench.Row) bool { return r.Drafter != "" && r.Drafter != "-" }) {
		return usagef("specbench: no draft model and no drafter (give --draft DRAFT, --drafter NAME or --drafters)")
	}
	cfg.Sampling.Temperature, cfg.Sampling.Sampler, cfg.Sampling.Penalty = 0, "", "" // greedy: speculation is exact
	st, err := stack.Open(ctx, cfg, m.stackOptions())
	if err != nil {
		return err
	}
	defer st.Close()
	f.warnings(m, fs, cfg, st.B.Name())
	if copyTokens < 1 || copyTokens > ptoks {
		return usagef("specbench: --copy-tokens %d: want 1..--prompt-tokens (%d)", copyTokens, ptoks)
	}
	ids, err := specbench.Prompts(st.Tok, specbench.PromptOptions{Corpus: prompts, Lines: lines, Copies: copies,
		Count: count, Tokens: ptoks, CopyTokens: copyTokens})
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stderr, "specbench: %d rows × %d prompts × %d repetitions of %d tokens, after %gs of warm-up\n", len(rows), len(ids), reps, f.n, warmup)
	res := specbench.Result{Target: f.modelPath, Draft: f.draftPath, Drafter: cfg.Spec.Drafter, Prompts: len(ids), NPredict: f.n, Reps: reps}
	o := specbench.Options{Rows: rows, Prompts: ids, N: f.n, Reps: reps, Warmup: time.Duration(warmup * float64(time.Second))}
	if curve {
		o.CurveRows = curveRows
	}
	if !f.jsonOut && m.StderrTerminal {
		o.Progress = m.Stderr
	}
	if err := specbench.Run(ctx, st, cfg, o, &res); err != nil {
		return err
	}
	if f.jsonOut {
		return json.NewEncoder(m.Stdout).Encode(res)
	}
	res.WriteTable(m.Stdout)
	return nil
}
