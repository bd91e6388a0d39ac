package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

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
		rounds = append(rounds, replay.OffsetSeqs(r, rounds)...)
	}
	if len(rounds) == 0 {
		return fmt.Errorf("policy replay: no rounds in %s", strings.Join(pos[1:], ", "))
	}
	cfg, _, err := config.LoadOrDefault(*cfgPath)
	if err != nil {
		return err
	}
	job := replay.Job{Rounds: rounds, Files: pos[1:], Policies: strings.Split(*policies, ","), Params: overrides, Config: cfg,
		Opt: replay.ReplayOptions{Seed: *seed, Session: *session}, Walk: *walk, JSON: *asJSON, Stdout: m.Stdout, Stderr: m.Stderr}
	return job.Run(ctx)
}
