package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"text/tabwriter"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/plugins"
	"github.com/minfer/minfer/plugins/replay"
	"github.com/minfer/minfer/sdk"
)

const policyUsage = `
Usage: minfer policy replay TRACE.jsonl... --policy NAME[,NAME...] [--config FILE] [--params JSON] [--seed N] [--session] [--walk] [--json]

Replays depth policies against rounds recorded with --trace (run, specbench, serve) and
prints, next to the recorded tokens/s, the tokens/s each policy would have reached, so a
policy can be judged before it is deployed.

A policy is a name declared in the config ([plugins.NAME]; the built-ins adaptive, ucb
and static always are) or a source written inline: builtin:NAME or file:PATH.wasm.
--params (a JSON object) is applied over each policy's params table.

The replay is counterfactual: acceptance at positions the recording observed is taken
from the trace; deeper than a fully accepted recorded round it is drawn (seeded by --seed)
from the trace's acceptance rate; draft time is the round's time per draft token; verify
time for an nt the trace never recorded is interpolated from the recorded means; the
rest of a round (plugin calls, emitting the tokens: the trace's host_ns) costs what the
recorded round's did, so the rates are wall-clock rates.
Each recorded sequence starts a new policy instance, as every minfer request does (run,
chat, specbench and serve); --session replays all of them with one instance, as a host
that kept its policy across a session's requests would.

--walk replays position by position instead (greedy traces that record their prompts:
specbench, run, serve). Every sequence of a prompt emits the same tokens at any depth,
so the trace tells, per token position, whether the draft agrees with the target and how
confident it was; the walk runs each policy once per prompt over those positions, with
draft and verify costs fitted to the trace and the trace's mean host_ns a round, and
prints next to it the recorded rate of each depth or policy the trace holds. A
specbench trace with several --depths observes nearly every position; on the H200 beds
the walk lands within 1% of each recorded rate (traces without host_ns, where draft
and verify were the whole cost; the plain replay can be 2% off on one depth and not on
another).

Examples:
  minfer run -m model.gguf --draft draft.gguf --trace rounds.jsonl -p "Hello"
  minfer policy replay rounds.jsonl --policy adaptive,ucb,static
  minfer policy replay rounds.jsonl --policy static --params '{"depth":6}'
  minfer policy replay rounds.jsonl --policy adaptive --session
  minfer policy replay a.jsonl b.jsonl --policy file:./mypolicy.wasm --json
  minfer specbench -m t.gguf --draft d.gguf --depths 0,1,2,3,4,8,auto --trace bench.jsonl
  minfer policy replay bench.jsonl --walk --policy adaptive,file:./mypolicy.wasm
`

func init() {
	register(&command{
		name:    "policy",
		summary: "replay depth policies against recorded traces (policy replay)",
		run:     runPolicy,
	})
}

type replayRow struct {
	Policy    string  `json:"policy"`
	TokensPS  float64 `json:"tokens_per_s"`
	Relative  float64 `json:"vs_recorded"`
	MeanDepth float64 `json:"mean_depth"`
	Extrapol  int     `json:"extrapolated_rounds,omitempty"`
}

func runPolicy(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("policy", policyUsage)
	cfgPath := fs.String("config", "", "minfer.toml to read (default: the one minfer would use)")
	policies := fs.String("policy", "", "policies to replay, comma-separated `NAMES`")
	params := fs.String("params", "", "params `JSON` object applied over each policy's table")
	seed := fs.Uint64("seed", 1, "seed for acceptance beyond the recorded rounds")
	session := fs.Bool("session", false, "one policy instance for every sequence (as a session keeps it)")
	walk := fs.Bool("walk", false, "walk each prompt's token positions instead of replaying recorded rounds")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		fs.Usage()
		return usagef("policy: missing subcommand (want: replay)")
	case pos[0] != "replay":
		return usagef("policy: unknown subcommand %q (want: replay)", pos[0])
	case len(pos) < 2:
		return usagef("policy replay: want at least one TRACE file")
	case *policies == "":
		return usagef("policy replay: --policy is required")
	}
	var overrides map[string]any
	if *params != "" {
		if err := json.Unmarshal([]byte(*params), &overrides); err != nil {
			return usagef("policy replay: --params: %v", err)
		}
	}
	var rounds []sdk.TraceRound
	for _, file := range pos[1:] {
		r, err := plugins.ReadTraceFile(file)
		if err != nil {
			return err
		}
		rounds = append(rounds, offsetSeqs(r, rounds)...)
	}
	if len(rounds) == 0 {
		return fmt.Errorf("policy replay: no rounds in %s", strings.Join(pos[1:], ", "))
	}
	cfg, _, err := config.LoadOrDefault(*cfgPath)
	if err != nil {
		return err
	}
	decls := maps.Clone(cfg.Plugins)
	names := strings.Split(*policies, ",")
	for i, n := range names {
		if strings.Contains(n, ":") { // an inline source
			key := "replay-" + fmt.Sprint(i)
			decls[key] = config.Plugin{Source: n}
			names[i] = key
		}
	}
	reg, err := plugins.NewRegistry(ctx, decls, m.Stderr, plugins.WithDir(cfg.Dir), plugins.WithInstances(1))
	if err != nil {
		return err
	}
	defer reg.Close()
	if *walk {
		job := replayJob{reg: reg, rounds: rounds, names: names, labels: strings.Split(*policies, ","), overrides: overrides,
			files: pos[1:], opt: replay.ReplayOptions{Seed: *seed, Session: *session}, json: *asJSON}
		return job.walk(ctx, m)
	}
	if mix := mixedRounds(rounds); len(mix) > 1 {
		fmt.Fprintf(m.Stderr, "warning: the trace mixes rounds of %d recorded policies and depths (%s): the recorded baseline averages them, so a replayed policy's gain over it means little; --walk compares policies token position by position\n",
			len(mix), strings.Join(mix, ", "))
	}
	var rows []replayRow
	var recorded replay.Throughput
	for i, name := range names {
		newPolicy, err := policyMaker(ctx, reg, name, overrides)
		if err != nil {
			return err
		}
		res, err := replay.ReplayWith(ctx, rounds, newPolicy, replay.ReplayOptions{Seed: *seed, Session: *session})
		if err != nil {
			return fmt.Errorf("policy replay: %s: %w", strings.Split(*policies, ",")[i], err)
		}
		recorded = res.Recorded
		rows = append(rows, replayRow{Policy: strings.Split(*policies, ",")[i], TokensPS: res.Replayed.Rate(),
			Relative: res.Replayed.Rate()/res.Recorded.Rate() - 1, MeanDepth: res.Replayed.MeanDepth(), Extrapol: res.Extrapolated})
	}
	rows = append([]replayRow{{Policy: "recorded", TokensPS: recorded.Rate(), MeanDepth: recorded.MeanDepth()}}, rows...)
	if *asJSON {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"rounds": len(rounds), "results": rows})
	}
	fmt.Fprintf(m.Stdout, "%d rounds from %s\n", len(rounds), strings.Join(pos[1:], ", "))
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\ttokens/s\tvs recorded\tmean depth\textrapolated rounds\t")
	for i, r := range rows {
		rel := "-"
		if i > 0 {
			rel = fmt.Sprintf("%+.1f%%", 100*r.Relative)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%s\t%.2f\t%d\t\n", r.Policy, r.TokensPS, rel, r.MeanDepth, r.Extrapol)
	}
	return tw.Flush()
}

// offsetSeqs renumbers the sequences of a later trace file after those already read.
func offsetSeqs(r, before []sdk.TraceRound) []sdk.TraceRound {
	if len(before) == 0 {
		return r
	}
	base := before[len(before)-1].Seq + 1
	for i := range r {
		r[i].Seq += base
	}
	return r
}

// replayJob is what `policy replay` was asked: the traces, the policies (declared names
// and the labels the user gave them) and the options.
type replayJob struct {
	reg       *plugins.Registry
	rounds    []sdk.TraceRound
	names     []string
	labels    []string
	overrides map[string]any
	files     []string
	opt       replay.ReplayOptions
	json      bool
}

// walk is `policy replay --walk`: each policy walked over the trace's prompts, after the
// recorded rate of every depth or policy the trace holds.
func (j *replayJob) walk(ctx context.Context, m *Main) error {
	type row struct {
		Policy    string  `json:"policy"`
		TokensPS  float64 `json:"tokens_per_s"`
		MeanDepth float64 `json:"mean_depth"`
	}
	recorded := map[string]*replay.Throughput{}
	var order []string
	seqLabel := map[int]string{}
	for _, r := range j.rounds {
		l, ok := seqLabel[r.Seq]
		if !ok {
			l = r.Policy
			if l == "static" || l == "" {
				l = fmt.Sprintf("static depth %d", r.Depth)
			}
			seqLabel[r.Seq] = l
			if recorded[l] == nil {
				recorded[l] = &replay.Throughput{}
				order = append(order, l)
			}
		}
		recorded[l].AddRecorded(&r)
	}
	var rec, walked []row
	for _, l := range order {
		t := recorded[l]
		rec = append(rec, row{Policy: l, TokensPS: t.Rate(), MeanDepth: t.MeanDepth()})
	}
	var res replay.WalkResult
	for i, name := range j.names {
		newPolicy, err := policyMaker(ctx, j.reg, name, j.overrides)
		if err != nil {
			return err
		}
		if res, err = replay.Walk(ctx, j.rounds, newPolicy, j.opt); err != nil {
			return fmt.Errorf("policy replay --walk: %s: %w", j.labels[i], err)
		}
		walked = append(walked, row{Policy: j.labels[i], TokensPS: res.Walked.Rate(), MeanDepth: res.Walked.MeanDepth()})
	}
	if j.json {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"rounds": len(j.rounds), "prompts": res.Prompts, "positions": res.Positions,
			"observed": res.Observed, "unobserved_drafts": res.Unobserved, "recorded": rec, "walked": walked})
	}
	fmt.Fprintf(m.Stdout, "%d rounds from %s: %d prompts, %d of %d token positions observed\n",
		len(j.rounds), strings.Join(j.files, ", "), res.Prompts, res.Observed, res.Positions)
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\ttokens/s\tmean depth\t")
	for _, r := range rec {
		fmt.Fprintf(tw, "recorded %s\t%.1f\t%.2f\t\n", r.Policy, r.TokensPS, r.MeanDepth)
	}
	for _, r := range walked {
		fmt.Fprintf(tw, "walked %s\t%.1f\t%.2f\t\n", r.Policy, r.TokensPS, r.MeanDepth)
	}
	return tw.Flush()
}

// policyMaker returns a constructor of the declared policy name with overrides, or a
// usage error naming what is declared.
func policyMaker(ctx context.Context, reg *plugins.Registry, name string, overrides map[string]any) (func() (sdk.DepthPolicy, error), error) {
	if _, ok := reg.Info(name); !ok {
		return nil, usagef("policy replay: no plugin %q declared (have %s)", name, strings.Join(reg.Names(), ", "))
	}
	return func() (sdk.DepthPolicy, error) {
		p, _, err := reg.Policy(ctx, name, overrides)
		return p, err
	}, nil
}

// mixedRounds lists the recorded policies of rounds, a static policy by its depths
// ("static:2"): more than one means the rounds mix depths (as a specbench trace of
// several depths does), which plain replay's recorded baseline averages.
func mixedRounds(rounds []sdk.TraceRound) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rounds {
		k := r.Policy
		if k == "static" || k == "" {
			k = fmt.Sprintf("%s:%d", cmp.Or(k, "depth"), r.Depth)
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}
