package replay

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/internal/usage"
	"github.com/minfer/minfer/plugins"
	"github.com/minfer/minfer/sdk"
)

// Job is `minfer policy replay`: depth policies replayed (or walked) against recorded
// rounds, printed as a table or JSON beside the recorded rate.
type Job struct {
	Rounds []sdk.TraceRound // the traces' rounds (OffsetSeqs numbers later files' sequences on)
	Files  []string         // the trace files, for the header
	// Policies are as the user gave them: names declared in Config, or inline sources
	// (builtin:NAME, file:PATH.wasm, a path relative to the working directory), which the
	// job declares as run's --policy does.
	Policies []string
	Params   map[string]any // applied over each policy's params table
	Config   *config.Config
	Opt      ReplayOptions
	Walk     bool // walk token positions instead of replaying rounds
	JSON     bool
	Stdout   io.Writer
	Stderr   io.Writer // warnings
}

type replayRow struct {
	Policy    string  `json:"policy"`
	TokensPS  float64 `json:"tokens_per_s"`
	Relative  float64 `json:"vs_recorded"`
	MeanDepth float64 `json:"mean_depth"`
	Extrapol  int     `json:"extrapolated_rounds,omitempty"`
}

// Run replays every policy and prints the result.
func (j *Job) Run(ctx context.Context) error {
	// an inline source is declared as run's --policy declares it (a path relative to
	// the working directory, errors naming the flag), on a copy of the config
	cfg := *j.Config
	cfg.Plugins = maps.Clone(j.Config.Plugins)
	names := slices.Clone(j.Policies)
	for i, n := range names {
		if _, declared := cfg.Plugins[n]; !declared && strings.Contains(n, ":") {
			if err := cfg.UsePlugin(sdk.RolePolicy, n); err != nil {
				return usage.Errorf("policy replay: %v", err)
			}
			names[i] = cfg.Spec.Policy
		}
	}
	reg, err := plugins.NewRegistry(ctx, cfg.Plugins, j.Stderr, plugins.WithDir(j.Config.Dir), plugins.WithInstances(1))
	if err != nil {
		return err
	}
	defer reg.Close()
	if j.Walk {
		return j.walk(ctx, reg, names)
	}
	if mix := mixedRounds(j.Rounds); len(mix) > 1 {
		fmt.Fprintf(j.Stderr, "warning: the trace mixes rounds of %d recorded policies and depths (%s): the recorded baseline averages them, so a replayed policy's gain over it means little; --walk compares policies token position by position\n",
			len(mix), strings.Join(mix, ", "))
	}
	var rows []replayRow
	var recorded Throughput
	for i, name := range names {
		newPolicy, err := policyMaker(ctx, reg, name, j.Params)
		if err != nil {
			return err
		}
		res, err := ReplayWith(ctx, j.Rounds, newPolicy, j.Opt)
		if err != nil {
			return fmt.Errorf("policy replay: %s: %w", j.Policies[i], err)
		}
		recorded = res.Recorded
		rows = append(rows, replayRow{Policy: j.Policies[i], TokensPS: res.Replayed.Rate(),
			Relative: res.Replayed.Rate()/res.Recorded.Rate() - 1, MeanDepth: res.Replayed.MeanDepth(), Extrapol: res.Extrapolated})
	}
	rows = append([]replayRow{{Policy: "recorded", TokensPS: recorded.Rate(), MeanDepth: recorded.MeanDepth()}}, rows...)
	if j.JSON {
		enc := json.NewEncoder(j.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"rounds": len(j.Rounds), "results": rows})
	}
	fmt.Fprintf(j.Stdout, "%d rounds from %s\n", len(j.Rounds), strings.Join(j.Files, ", "))
	tw := tabwriter.NewWriter(j.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
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

// OffsetSeqs renumbers the sequences of a later trace file after those already read.
func OffsetSeqs(r, before []sdk.TraceRound) []sdk.TraceRound {
	if len(before) == 0 {
		return r
	}
	base := before[len(before)-1].Seq + 1
	for i := range r {
		r[i].Seq += base
	}
	return r
}

// walk is `policy replay --walk`: each policy walked over the trace's prompts, after the
// recorded rate of every depth or policy the trace holds.
func (j *Job) walk(ctx context.Context, reg *plugins.Registry, names []string) error {
	type row struct {
		Policy    string  `json:"policy"`
		TokensPS  float64 `json:"tokens_per_s"`
		MeanDepth float64 `json:"mean_depth"`
	}
	recorded := map[string]*Throughput{}
	var order []string
	seqLabel := map[int]string{}
	for _, r := range j.Rounds {
		l, ok := seqLabel[r.Seq]
		if !ok {
			l = r.Policy
			if l == "static" || l == "" {
				l = fmt.Sprintf("static depth %d", r.Depth)
			}
			seqLabel[r.Seq] = l
			if recorded[l] == nil {
				recorded[l] = &Throughput{}
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
	var res WalkResult
	for i, name := range names {
		newPolicy, err := policyMaker(ctx, reg, name, j.Params)
		if err != nil {
			return err
		}
		if res, err = Walk(ctx, j.Rounds, newPolicy, j.Opt); err != nil {
			return fmt.Errorf("policy replay --walk: %s: %w", j.Policies[i], err)
		}
		walked = append(walked, row{Policy: j.Policies[i], TokensPS: res.Walked.Rate(), MeanDepth: res.Walked.MeanDepth()})
	}
	if j.JSON {
		enc := json.NewEncoder(j.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"rounds": len(j.Rounds), "prompts": res.Prompts, "positions": res.Positions,
			"observed": res.Observed, "unobserved_drafts": res.Unobserved, "recorded": rec, "walked": walked})
	}
	fmt.Fprintf(j.Stdout, "%d rounds from %s: %d prompts, %d of %d token positions observed\n",
		len(j.Rounds), strings.Join(j.Files, ", "), res.Prompts, res.Observed, res.Positions)
	tw := tabwriter.NewWriter(j.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
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
	info, ok := reg.Info(name)
	if !ok {
		return nil, usage.Errorf("policy replay: no plugin %q declared (have %s)", name, strings.Join(reg.Names(), ", "))
	}
	// as the host refuses a [plugins.NAME] params key the plugin does not declare (the
	// plugin's own init would say "json: unknown field")
	if err := plugins.CheckParamKeys(info, slices.Collect(maps.Keys(overrides))); err != nil {
		return nil, usage.Errorf("policy replay: --params: %s", strings.TrimPrefix(err.Error(), "params: "))
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
