package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/minfer/minfer/core/config"
)

const configUsage = `
Usage: minfer config check [FILE]

Loads a minfer.toml strictly: unknown keys, values of the wrong type and invalid values
are errors naming the key and line (exit code 1). On success prints "ok: FILE" and a
summary of what the file configures, and warns on stderr about model and plugin files
it names that do not exist (a run would fail on them).

Without FILE it checks the file minfer would use: ./minfer.toml, else
$XDG_CONFIG_HOME/minfer/minfer.toml (~/.config/minfer/minfer.toml); with neither it
reports the built-in defaults.

Examples:
  minfer config check                      # the file minfer would use
  minfer config check minfer.toml
  minfer config check ~/.config/minfer/minfer.toml
`

func init() {
	register(&command{
		name:    "config",
		summary: "check a minfer.toml (config check [FILE])",
		run:     runConfig,
	})
}

func runConfig(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("config", configUsage)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fs.Usage()
		return usagef("config: missing subcommand (want: check)")
	}
	if pos[0] != "check" {
		return usagef("config: unknown subcommand %q (want: check)", pos[0])
	}
	if len(pos) > 2 {
		return usagef("config check: want at most one FILE, got %d", len(pos)-1)
	}
	file := ""
	if len(pos) == 2 {
		file = pos[1]
	}
	c, used, err := config.LoadOrDefault(file)
	if err != nil {
		return err
	}
	if used == "" {
		fmt.Fprintln(m.Stdout, "ok: no minfer.toml found (./minfer.toml, $XDG_CONFIG_HOME/minfer/minfer.toml); built-in defaults")
	} else {
		fmt.Fprintf(m.Stdout, "ok: %s\n", used)
	}
	summarizeConfig(m.Stdout, c)
	for _, w := range missingFiles(c) {
		fmt.Fprintf(m.Stderr, "warning: %s\n", w)
	}
	return nil
}

// missingFiles lists the files c names (models, plugin modules and executables) that
// cannot be opened now: the file itself is valid, but a run with it would fail there.
func missingFiles(c *config.Config) []string {
	var out []string
	check := func(what, path string) {
		if path == "" {
			return
		}
		if st, err := os.Stat(c.ResolvePath(path)); err != nil {
			out = append(out, fmt.Sprintf("%s: %v", what, err))
		} else if st.IsDir() {
			out = append(out, fmt.Sprintf("%s: %s is a directory", what, c.ResolvePath(path)))
		}
	}
	check("[model] path", c.Model.Path)
	check("[draft] path", c.Draft.Path)
	for _, name := range slices.Sorted(maps.Keys(c.Plugins)) {
		kind, ref, err := c.Plugins[name].SourceKind()
		if err == nil && (kind == config.SourceFile || kind == config.SourceProcess && strings.ContainsRune(ref, os.PathSeparator)) {
			check(fmt.Sprintf("[plugins.%s] source", name), ref)
		}
	}
	return out
}

// summarizeConfig prints what a configuration does, one line per section.
func summarizeConfig(w io.Writer, c *config.Config) {
	model := "embedded default model"
	if c.Model.Path != "" {
		model = c.ResolvePath(c.Model.Path)
	}
	ctxLen := "ctx from model"
	if c.Model.Ctx > 0 {
		ctxLen = fmt.Sprintf("ctx %d", c.Model.Ctx)
	}
	fmt.Fprintf(w, "  model:    %s on %s, %s, kv %s\n", model, c.Model.Device, ctxLen, c.Model.KV)
	if c.Draft.Path == "" {
		fmt.Fprintln(w, "  draft:    none (plain decoding)")
	} else {
		dev := c.Draft.Device
		if dev == "" {
			dev = c.Model.Device
		}
		fmt.Fprintf(w, "  draft:    %s on %s, kv %s\n", c.ResolvePath(c.Draft.Path), dev, c.Draft.KV)
	}
	fmt.Fprintf(w, "  spec:     policy %s, depth %s, draft_max %d", c.Spec.PolicyName(), c.Spec.Depth, c.Spec.DraftMax)
	if c.Spec.Drafter != "" {
		fmt.Fprintf(w, ", drafter %s", c.Spec.Drafter)
	}
	if c.Draft.Path == "" && c.Spec.Drafter == "" {
		fmt.Fprint(w, " (unused without a draft or a drafter)")
	}
	fmt.Fprintln(w)
	s := c.Sampling
	penalty := "none"
	if s.Penalty != "" {
		penalty = s.Penalty
	}
	seed := "random"
	if s.Seed >= 0 {
		seed = fmt.Sprint(s.Seed)
	}
	fmt.Fprintf(w, "  sampling: sampler %s (temperature %g, top_k %d, top_p %g, min_p %g), penalty %s, seed %s\n",
		s.SamplerName(), s.Temperature, s.TopK, s.TopP, s.MinP, penalty, seed)
	var plugins []string
	for _, name := range slices.Sorted(maps.Keys(c.Plugins)) {
		plugins = append(plugins, name+"="+c.Plugins[name].Source)
	}
	fmt.Fprintf(w, "  plugins:  %s\n", strings.Join(plugins, " "))
	auth := "no auth"
	if c.Server.APIKeyEnv != "" {
		auth = "API key from $" + c.Server.APIKeyEnv
	}
	fmt.Fprintf(w, "  server:   %s, parallel %d, queue %d, %s\n", c.Server.Addr, c.Server.Parallel, c.Server.Queue, auth)
}
