package plugins

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/plugins/builtin"
)

// CheckBuiltins starts, natively and at once, every builtin: plugin cfg declares with
// the params it would start with (Params), so that minfer config check refuses what a
// run would: a params key the built-in does not read (NewRegistry's error, at load) and
// a value it refuses (its constructor's error, when a sequence first uses it). It
// loads no file: or process: plugin. The error joins one line per failing plugin, each
// naming its [plugins.NAME] table.
func CheckBuiltins(cfg *config.Config) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(cfg.Plugins)) {
		decl := cfg.Plugins[name].WithDefaults(name)
		kind, ref, err := decl.SourceKind()
		if err != nil || kind != config.SourceBuiltin {
			continue
		}
		if err := checkBuiltin(cfg, name, decl, ref); err != nil {
			errs = append(errs, fmt.Errorf("plugins: [plugins.%s]: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func checkBuiltin(cfg *config.Config, name string, decl config.Plugin, ref string) error {
	b, ok := builtin.Lookup(ref)
	if !ok {
		return fmt.Errorf("source %q: no built-in plugin %q", decl.Source, ref)
	}
	if err := checkDeclaredParams(name, decl, b.Info); err != nil {
		return err
	}
	m, err := Params(cfg, name)
	if err != nil {
		return err
	}
	params := mustParams(m, nil)
	switch {
	case b.NewPolicy != nil:
		_, err = b.NewPolicy(params)
	case b.NewSampler != nil:
		_, err = b.NewSampler(params)
	case b.NewPenalty != nil:
		_, err = b.NewPenalty(params)
	case b.NewDrafter != nil:
		_, err = b.NewDrafter(params)
	}
	return err
}
