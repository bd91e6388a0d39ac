package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/core/engine/bench"
	"github.com/minfer/minfer/internal/stack"
	"github.com/minfer/minfer/sdk"
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
average: the draft phase, the target's verify forward and the plugin calls (policy,
penalty, sampler; the rest is the engine's own work). Repetitions are interleaved:
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

type specbenchResult struct {
	Target      string            `json:"target"`
	Draft       string            `json:"draft"`
	Drafter     string            `json:"drafter,omitempty"` // the [spec] drafter plugins of every row but drafter:NAME
	Prompts     int               `json:"prompts"`
	NPredict    int               `json:"n_predict"`
	Reps        int               `json:"repetitions"`
	Depths      []bench.RowResult `json:"depths"`
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
	depths, err := parseDepths(depthList)
	switch {
	case err != nil:
		return err
	case len(rest) > 0:
		return usagef("specbench: unexpected argument %q", rest[0])
	case f.draftPath == "" && f.drafter == "" && drafterList == "":
		return usagef("specbench: no draft model and no drafter (give --draft DRAFT, --drafter NAME or --drafters)")
	case warmup < 0:
		return usagef("specbench: --warmup %g: want ≥ 0 seconds", warmup)
	case f.n < 1 || reps < 1 || count < 1 || ptoks < 1 || curveRows < 1:
		return usagef("specbench: -n, -r, --prompt-count, --prompt-tokens and --curve-rows must be ≥ 1")
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
	if rows, err = drafterRows(cfg, rows, drafterList); err != nil {
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
	var corpus []string
	for _, p := range prompts { // a .jsonl file holds one prompt per line
		if strings.HasSuffix(p, ".jsonl") {
			lines = append(lines, p)
		} else {
			corpus = append(corpus, p)
		}
	}
	ids, err := specPrompts(st, corpus, count, ptoks, 0)
	if err != nil {
		return err
	}
	if len(lines) > 0 {
		if len(corpus) == 0 {
			ids = nil // not the built-in prompts
		}
		for _, file := range lines {
			more, err := linePrompts(st, file)
			if err != nil {
				return err
			}
			ids = append(ids, more...)
		}
	}
	if len(copies) > 0 {
		copied, err := specPrompts(st, copies, count, ptoks, copyTokens)
		if err != nil {
			return err
		}
		if len(prompts) == 0 && len(lines) == 0 {
			ids = nil // not the built-in prompts: only the copy-heavy ones
		}
		ids = append(ids, copied...)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stderr, "specbench: %d rows × %d prompts × %d repetitions of %d tokens, after %gs of warm-up\n", len(rows), len(ids), reps, f.n, warmup)
	res := specbenchResult{Target: f.modelPath, Draft: f.draftPath, Drafter: cfg.Spec.Drafter, Prompts: len(ids), NPredict: f.n, Reps: reps}
	progress := func(rep int, row bench.Row) {
		if !f.jsonOut && m.StderrTerminal {
			fmt.Fprintf(m.Stderr, "\rrepetition %d/%d, depth %s   ", rep+1, reps, row.Label)
		}
	}
	request := func(ctx context.Context, row bench.Row, prompt []int32) (engine.Request, func(), error) {
		c := *cfg
		c.Spec.Depth = row.Depth
		if row.Policy != "" {
			c.Spec.Policy = row.Policy
		}
		switch row.Drafter {
		case "":
		case "-":
			c.Spec.Drafter = ""
		default:
			c.Spec.Drafter = row.Drafter
		}
		req, err := st.Request(ctx, &c, prompt)
		req.NPredict, req.NoDraftModel = f.n, row.NoDraftModel
		return req, st.CloseRequest, err
	}
	res.Depths, err = bench.Spec(ctx, bench.SpecOptions{Session: st.Sess, Rows: rows, Prompts: ids, Reps: reps,
		Warmup: time.Duration(warmup * float64(time.Second)), Request: request, Progress: progress})
	if !f.jsonOut && m.StderrTerminal {
		fmt.Fprintf(m.Stderr, "\r%s\r", strings.Repeat(" ", 40))
	}
	if err != nil {
		return err
	}
	if curve {
		if res.VerifyMs, res.DraftStepMs, err = bench.VerifyCurve(st.Target, st.Draft, curveRows); err != nil {
			return err
		}
	}
	if f.jsonOut {
		return json.NewEncoder(m.Stdout).Encode(res)
	}
	printSpecbench(m, &res)
	return nil
}

func printSpecbench(m *Main, r *specbenchResult) {
	draft := r.Draft
	if draft == "" {
		draft = "none"
	}
	if r.Drafter != "" {
		draft += ", drafter " + r.Drafter
	}
	fmt.Fprintf(m.Stdout, "target %s, draft %s: %d prompts × %d tokens, %d repetitions\n\n", r.Target, draft, r.Prompts, r.NPredict, r.Reps)
	w := len("depth")
	for _, d := range r.Depths {
		w = max(w, len([]rune(d.Depth)))
	}
	fmt.Fprintf(m.Stdout, "| %*s | %18s | acceptance | tokens/round | speedup | = depth 0 | draft ms/round | verify ms/round | plugins µs/round |\n", w, "depth", "tokens/s")
	fmt.Fprintf(m.Stdout, "| %s | %s | ---------- | ------------ | ------- | --------- | -------------- | --------------- | ---------------- |\n", dashes(w), dashes(18))
	// Without a depth-0 run there is nothing to compare with: no speedup, no identity.
	base := slices.ContainsFunc(r.Depths, func(d bench.RowResult) bool { return d.Depth == "0" })
	for _, d := range r.Depths {
		speedup, same := fmt.Sprintf("%6.2fx", d.Speedup), fmt.Sprint(d.Identical)
		if !base {
			speedup, same = "-", "-"
		}
		fmt.Fprintf(m.Stdout, "| %*s | %18s | %10.3f | %12.2f | %7s | %9s | %14.3f | %15.3f | %16.1f |\n", w, d.Depth, fmt.Sprintf("%.2f ± %.2f", d.TPSMean, d.TPSStd),
			d.Acceptance, d.TokensPerRound, speedup, same, d.PerRound.Draft, d.PerRound.Verify, 1e3*d.PerRound.Plugins)
	}
	for _, d := range r.Depths {
		if len(d.RoundsByDrafter) > 1 {
			var parts []string
			for _, name := range slices.Sorted(maps.Keys(d.RoundsByDrafter)) {
				parts = append(parts, fmt.Sprintf("%s %d", name, d.RoundsByDrafter[name]))
			}
			fmt.Fprintf(m.Stdout, "%s: drafting rounds by drafter: %s\n", d.Depth, strings.Join(parts, ", "))
		}
	}
	if len(r.VerifyMs) == 0 {
		return
	}
	fmt.Fprintf(m.Stdout, "\nverify cost C_T(nt), ms per target forward:\n")
	for i, ms := range r.VerifyMs {
		fmt.Fprintf(m.Stdout, "  nt %2d: %7.3f ms (%.2f× nt=1)\n", i+1, ms, ms/r.VerifyMs[0])
	}
	if r.Draft != "" {
		fmt.Fprintf(m.Stdout, "draft step: %.3f ms\n", r.DraftStepMs)
	}
}

// specRows makes the table's rows: one per depth, then one per depth policy of
// policyList (comma-separated names declared in cfg, or sources, which it declares in
// cfg as the --policy flag of run does). cfg's own policy is left as it was.
func specRows(cfg *config.Config, depths []config.Depth, policyList string) ([]bench.Row, error) {
	var rows []bench.Row
	for _, d := range depths {
		rows = append(rows, bench.Row{Label: d.String(), Depth: d})
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
		rows = append(rows, bench.Row{Label: "auto:" + arg, Depth: config.DepthAuto, Policy: cfg.Spec.Policy})
	}
	return rows, nil
}

// drafterRows appends the rows of drafterList (see the usage): drafter:model, one per
// drafter plugin (declared in cfg, or a source, which it declares as --drafter does),
// and drafter:auto (the draft model and every plugin listed, or cfg's [spec] drafter
// when the list names none). cfg's own [spec] drafter is left as it was.
func drafterRows(cfg *config.Config, rows []bench.Row, drafterList string) ([]bench.Row, error) {
	if drafterList == "" {
		return rows, nil
	}
	configured := cfg.Spec.Drafter
	defer func() { cfg.Spec.Drafter = configured }()
	var plugins []string
	auto := false
	for _, arg := range strings.Split(drafterList, ",") {
		switch arg = strings.TrimSpace(arg); arg {
		case "":
			return nil, usagef("specbench: --drafters %q: an empty name", drafterList)
		case "model":
			if cfg.Draft.Path == "" {
				return nil, usagef("specbench: --drafters model: no draft model (give --draft DRAFT)")
			}
			rows = append(rows, bench.Row{Label: "drafter:model", Depth: config.DepthAuto, Drafter: "-"})
		case "auto":
			auto = true
		default:
			if err := cfg.UseDrafters(arg); err != nil {
				return nil, usagef("specbench: --drafters: %v", err)
			}
			plugins = append(plugins, cfg.Spec.Drafter)
			rows = append(rows, bench.Row{Label: "drafter:" + arg, Depth: config.DepthAuto, Drafter: cfg.Spec.Drafter, NoDraftModel: true})
		}
	}
	if auto {
		all := strings.Join(plugins, ",")
		if all == "" {
			all = configured
		}
		if all == "" {
			all = "-"
		}
		rows = append(rows, bench.Row{Label: "drafter:auto", Depth: config.DepthAuto, Drafter: all})
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
// file, each followed by its own first copy tokens when copy > 0 (a copy-heavy prompt:
// the continuation repeats what the prompt holds, as in code editing and quoting), or
// the built-in prompts when there are no files.
// linePrompts reads one prompt per non-blank line of file: plain text, or in a .jsonl
// file a JSON string or an object with a "prompt" (or "text") field per line. Each is
// encoded as run encodes a prompt (BOS where the vocabulary asks for it).
func linePrompts(st *stack.Stack, file string) ([][]int32, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("specbench: %w", err)
	}
	var out [][]int32
	jsonl := strings.HasSuffix(file, ".jsonl")
	for n, line := range strings.Split(string(b), "\n") {
		text := strings.TrimRight(line, "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		if jsonl {
			var v any
			if err := json.Unmarshal([]byte(text), &v); err != nil {
				return nil, fmt.Errorf("specbench: %s:%d: %v", file, n+1, err)
			}
			switch x := v.(type) {
			case string:
				text = x
			case map[string]any:
				p, ok := x["prompt"].(string)
				if !ok {
					p, ok = x["text"].(string)
				}
				if !ok {
					return nil, fmt.Errorf("specbench: %s:%d: want a string or an object with a \"prompt\" string", file, n+1)
				}
				text = p
			default:
				return nil, fmt.Errorf("specbench: %s:%d: want a string or an object with a \"prompt\" string", file, n+1)
			}
		}
		ids, err := st.Tok.Encode(text, true, false)
		if err != nil {
			return nil, fmt.Errorf("specbench: %s:%d: %w", file, n+1, err)
		}
		out = append(out, ids)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("specbench: %s holds no prompt (one per non-blank line)", file)
	}
	return out, nil
}

func specPrompts(st *stack.Stack, files []string, count, ptoks, copy int) ([][]int32, error) {
	var out [][]int32
	bos := []int32{}
	if st.Tok.AddBOS() {
		bos = append(bos, st.Tok.BOS())
	}
	if len(files) == 0 {
		for _, p := range defaultSpecPrompts {
			ids, err := st.Tok.Encode(p, true, false)
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
		ids, err := st.Tok.Encode(string(text), false, false)
		if err != nil {
			return nil, err
		}
		if len(ids) < ptoks {
			return nil, fmt.Errorf("specbench: %s has %d tokens, fewer than --prompt-tokens %d (--prompts cuts a corpus into windows; for one prompt per line give --prompt-lines %s)", f, len(ids), ptoks, f)
		}
		for i := range count {
			off := i * (len(ids) - ptoks) / count // the offsets of train-report.json's simulation
			p := append(append([]int32{}, bos...), ids[off:off+ptoks]...)
			out = append(out, append(p, ids[off:off+copy]...))
		}
	}
	return out, nil
}
