package main

import (
	"context"
	"fmt"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/plugins"
)

const configUsage = `
Usage: minfer config check [FILE]

Loads a minfer.toml strictly: unknown keys, values of the wrong type and invalid values
are errors naming the key and line (exit code 1), and so are a built-in plugin's params
key it does not read and a params value it refuses (each naming the [plugins.NAME]
table), as a run would refuse them. On success prints "ok: FILE" and a
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
	if err := plugins.CheckBuiltins(c); err != nil {
		return err
	}
	if used == "" {
		fmt.Fprintln(m.Stdout, "ok: no minfer.toml found (./minfer.toml, $XDG_CONFIG_HOME/minfer/minfer.toml); built-in defaults")
	} else {
		fmt.Fprintf(m.Stdout, "ok: %s\n", used)
	}
	c.WriteSummary(m.Stdout)
	for _, w := range c.MissingFiles() {
		fmt.Fprintf(m.Stderr, "warning: %s\n", w)
	}
	return nil
}
