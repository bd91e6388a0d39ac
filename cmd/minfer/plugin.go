package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/plugins"
	"github.com/minfer/minfer/plugins/check"
	"github.com/minfer/minfer/plugins/scaffold"
	"github.com/minfer/minfer/plugins/wasm"
	"github.com/minfer/minfer/sdk"
)

const pluginUsage = `
Usage:
  minfer plugin list  [--config FILE] [--json]
  minfer plugin check FILE.wasm [--plugin NAME] [--params JSON] [--timeout D] [--memory-mb N]
  minfer plugin new   policy|sampler|penalty|drafter DIR [--name NAME] [--module PATH] [--minfer DIR]

list loads every plugin declared in the config ([plugins.NAME]; the built-ins are always
declared) and prints its name, roles, version, source, ABI version, checksum and the
params keys it declares it reads (every built-in declares its own; none: it reads none;
-: it declares nothing, so it is offered every setting and key). A plugin that does not
load is listed with its error (and list exits 1), the others as they load. --json prints
an array of {name, roles, version, source, abi, sha256, top_k (samplers), params (left
out when it declares nothing), error (a plugin that did not load)}.

check is the conformance kit for plugin authors: it loads a WebAssembly module, validates
its exports, ABI version and info record (each plugin's line shows the params it
declares), then for each plugin runs a self-test round, edge-case inputs, the simulator
traces (policies, with the counterfactual tokens/s) and, for samplers, determinism and
the greedy identity check, under a declared plugin's deadline and memory cap. A
--params key that a plugin declaring its params does not read fails its "declared
params" check, as the host refuses such a key at load. It exits 1 if any check fails. --json prints the same as one object: {module, abi, sha256,
limits {timeout, memory_mb}, plugins [{name, version, roles, params}], checks [{plugin,
role, check, ok, error, note}], failed}; a plugin's params are left out when it
declares nothing.

new writes a plugin skeleton of the given role (main.go, README.md, .gitignore, and go.mod
unless DIR lies inside the minfer module) that builds as it is, with no go mod tidy:
  cd DIR && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o NAME.wasm .
Outside the checkout its go.mod points github.com/minfer/minfer (not published) at a
minfer checkout with a replace directive: --minfer DIR, else the checkout the working
directory is in, else the one this binary was built from.

Examples:
  minfer plugin list
  minfer plugin list --config minfer.toml --json
  minfer plugin check ./mypolicy.wasm
  minfer plugin check ./sampler.wasm --params '{"temperature":0.7}'
  minfer plugin new policy ./mypolicy
  minfer plugin new policy ~/plugins/mypolicy --minfer ~/src/minfer
  cd mypolicy && GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o mypolicy.wasm .
`

func init() {
	register(&command{
		name:    "plugin",
		summary: "list declared plugins, check a .wasm plugin, scaffold a new one",
		run:     runPlugin,
	})
}

type pluginFlags struct {
	config   string
	json     bool
	plugin   string
	params   string
	timeout  time.Duration
	memoryMB int
	name     string
	module   string
	minfer   string
}

func runPlugin(ctx context.Context, m *Main, args []string) error {
	var f pluginFlags
	fs := m.newFlagSet("plugin", pluginUsage)
	fs.StringVar(&f.config, "config", "", "list: minfer.toml to read (default: the one minfer would use)")
	fs.BoolVar(&f.json, "json", false, "list, check: print JSON")
	fs.StringVar(&f.plugin, "plugin", "", "check: only the plugin `NAME` of the module")
	fs.StringVar(&f.params, "params", "{}", "check: params as a `JSON` object")
	fs.DurationVar(&f.timeout, "timeout", 0, "check: per-call deadline (default 1s, as a declared plugin's)")
	fs.IntVar(&f.memoryMB, "memory-mb", 0, "check: memory cap in MB (default 64, as a declared plugin's)")
	fs.StringVar(&f.name, "name", "", "new: plugin `NAME` (default: DIR's base name)")
	fs.StringVar(&f.module, "module", "", "new: Go module `PATH` (default example.com/NAME)")
	fs.StringVar(&f.minfer, "minfer", "", "new: minfer checkout `DIR` for a replace directive")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fs.Usage()
		return usagef("plugin: missing subcommand (want list, check or new)")
	}
	switch pos[0] {
	case "list":
		if len(pos) != 1 {
			return usagef("plugin list: takes no arguments, got %q", pos[1:])
		}
		return pluginList(ctx, m, f)
	case "check":
		if len(pos) != 2 {
			return usagef("plugin check: want one FILE.wasm, got %d arguments", len(pos)-1)
		}
		return pluginCheck(ctx, m, f, pos[1])
	case "new":
		if len(pos) != 3 {
			return usagef("plugin new: want ROLE DIR (ROLE: policy, sampler, penalty or drafter)")
		}
		return pluginNew(m, f, pos[1], pos[2])
	}
	return usagef("plugin: unknown subcommand %q (want list, check or new)", pos[0])
}

func pluginList(ctx context.Context, m *Main, f pluginFlags) error {
	cfg, _, err := config.LoadOrDefault(f.config)
	if err != nil {
		return err
	}
	rows, loadErr := plugins.ListDeclared(ctx, cfg.Plugins, m.Stderr, plugins.WithDir(cfg.Dir), plugins.WithInstances(1))
	if err := plugins.WriteRows(m.Stdout, rows, f.json); err != nil {
		return err
	}
	return loadErr
}

// errChecksFailed makes `plugin check` exit 1 after printing its report.
type errChecksFailed int

func (e errChecksFailed) Error() string { return fmt.Sprintf("plugin check: %d checks failed", int(e)) }

func pluginCheck(ctx context.Context, m *Main, f pluginFlags, file string) error {
	if !json.Valid([]byte(f.params)) || !strings.HasPrefix(strings.TrimSpace(f.params), "{") {
		return usagef("plugin check: --params %q is not a JSON object", f.params)
	}
	if f.timeout < 0 {
		return usagef("plugin check: --timeout %v: want ≥ 0 (0: the default)", f.timeout)
	}
	if f.memoryMB < 0 || f.memoryMB > wasm.MaxMemoryMB {
		return usagef("plugin check: --memory-mb %d: want 0..%d (0: the default; %d MB is all a wasm32 memory holds)", f.memoryMB, wasm.MaxMemoryMB, wasm.MaxMemoryMB)
	}
	bin, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("plugin check: %w", err)
	}
	opts := check.CheckOptions{Plugin: f.plugin, Name: filepath.Base(file), Params: []byte(f.params), Timeout: f.timeout, MemoryMB: f.memoryMB, Log: m.Stderr}
	infos, results, err := check.Check(ctx, bin, opts)
	if err != nil {
		return fmt.Errorf("plugin check %s: %w", file, err)
	}
	failed := check.Failed(results)
	if f.json {
		if err := check.WriteJSON(m.Stdout, file, infos, opts, results); err != nil {
			return err
		}
	} else {
		check.WriteLimits(m.Stdout, opts)
		check.WriteReport(m.Stdout, file, infos, results)
	}
	if failed > 0 {
		return errChecksFailed(failed)
	}
	return nil
}

func pluginNew(m *Main, f pluginFlags, role, dir string) error {
	switch sdk.Role(role) {
	case sdk.RolePolicy, sdk.RoleSampler, sdk.RolePenalty, sdk.RoleDrafter:
	default:
		return usagef("plugin new: unknown role %q (want policy, sampler, penalty or drafter)", role)
	}
	checkout := f.minfer
	if checkout == "" {
		checkout = scaffold.KnownCheckout()
	}
	files, err := scaffold.Scaffold(scaffold.ScaffoldOptions{Role: sdk.Role(role), Dir: dir, Name: f.name,
		Module: f.module, MinferDir: checkout})
	if err != nil {
		return err
	}
	name := f.name
	for _, p := range files {
		fmt.Fprintf(m.Stdout, "wrote %s\n", p)
		if filepath.Base(p) == "go.mod" && f.minfer == "" {
			fmt.Fprintf(m.Stdout, "  (its replace directive points at the minfer checkout %s; --minfer DIR picks another)\n", checkout)
		}
		if filepath.Base(p) == ".gitignore" && name == "" { // the scaffold names the .wasm after the plugin
			if b, err := os.ReadFile(p); err == nil {
				name = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(string(b)), "/"), ".wasm")
			}
		}
	}
	fmt.Fprintf(m.Stdout, "next, build it and check it (README.md has the details):\n  cd %s\n  %s\n  minfer plugin check %s.wasm\n",
		scaffold.ShellQuote(dir), scaffold.BuildCommand(name), name)
	return nil
}
