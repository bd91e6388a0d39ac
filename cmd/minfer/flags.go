package main

import (
	"flag"
	"slices"
	"strconv"

	"github.com/minfer/minfer/internal/cli"
)

// This file is the flag layer shared by the generating commands (run, serve,
// specbench) that is minfer's own: which config key each flag sets. The parsing and
// the error wording are internal/cli's.

// flagConfigKeys maps a flag to the config key it sets, so that a config error caused
// by a flag's value names the flag (--temp -1, not [sampling] temperature = -1).
var flagConfigKeys = map[string]string{
	"n": "sampling.n_predict", "predict": "sampling.n_predict", "n-predict": "sampling.n_predict",
	"ctx": "model.ctx", "c": "model.ctx", "ctx-size": "model.ctx",
	"batch": "model.batch", "b": "model.batch", "batch-size": "model.batch",
	"threads": "model.threads", "t": "model.threads",
	"temp": "sampling.temperature", "seed": "sampling.seed", "s": "sampling.seed",
	"top-k": "sampling.top_k", "top-p": "sampling.top_p", "min-p": "sampling.min_p",
	"repeat-penalty": "sampling.repeat_penalty", "repeat-last-n": "sampling.repeat_last_n",
	"presence-penalty": "sampling.presence_penalty", "frequency-penalty": "sampling.frequency_penalty",
	"device": "model.device", "cpu-order": "model.cpu_order", "depth": "spec.depth", "draft-max": "spec.draft_max", "draft-n": "spec.draft_max",
	"draft-min": "spec.draft_min", "draft-p-min": "spec.min_conf",
	"policy": "spec.policy", "sampler": "sampling.sampler", "penalty": "sampling.penalty",
	"parallel": "server.parallel", "np": "server.parallel", "max-tokens": "server.max_tokens",
	"addr": "server.addr", "batch-rows": "server.batch_rows", "batch-depth": "spec.batch_depth", "api-key-env": "server.api_key_env",
}

// flagErrors rewrites the errors of cfg.Validate whose key a flag of fs set as errors
// naming that flag and the value typed (cli.FlagErrors).
func flagErrors(fs *flag.FlagSet, err error) error { return cli.FlagErrors(fs, err, flagConfigKeys) }

// atLeastOne is the usage error naming the first of the integer flags names that the
// command line set below 1, as the user wrote it (-b 0, not --batch 0), or nil.
func atLeastOne(fs *flag.FlagSet, names ...string) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if v, e := strconv.Atoi(f.Value.String()); err == nil && e == nil && v < 1 && slices.Contains(names, f.Name) {
			err = usagef("%s: %s %s: want ≥ 1", fs.Name(), cli.Dashed(f.Name), f.Value)
		}
	})
	return err
}
