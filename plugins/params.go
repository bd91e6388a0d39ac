package plugins

import (
	"maps"
	"slices"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/plugins/builtin"
)

// Params is the params object plugin name starts with under cfg, as one value (the
// registry encodes it to JSON once, when an instance starts): the settings the config
// gives the roles it plays (config.Config.RoleSettings) that it reads, overridden by
// its own [plugins.NAME] params table.
//
// A built-in declares what it reads (builtin.Plugin.Reads), so the config need not
// know which policy takes keep_cut (ucb does not); a file: or process: plugin declares
// nothing in ABI v1 and is offered every setting of its roles, the unset ones left out
// (Spec.PolicySettings).
func Params(cfg *config.Config, name string) (map[string]any, error) {
	m, err := cfg.RoleSettings(name)
	if err != nil {
		return nil, err
	}
	decl := cfg.Plugins[name]
	if kind, ref, err := decl.SourceKind(); err == nil && kind == config.SourceBuiltin {
		if b, ok := builtin.Lookup(ref); ok {
			maps.DeleteFunc(m, func(k string, _ any) bool { return !slices.Contains(b.Reads, k) })
		}
	}
	maps.Copy(m, decl.Params)
	return m, nil
}
