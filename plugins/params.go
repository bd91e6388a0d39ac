package plugins

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/plugins/builtin"
)

// Params is the params object plugin name starts with under cfg, as one value (the
// registry encodes it to JSON once, when an instance starts): the settings the config
// gives the roles it plays (config.Config.RoleSettings) that it reads, overridden by
// its own [plugins.NAME] params table.
//
// A built-in declares what it reads (builtin.Plugin.Reads), so the config need not
// know which policy takes keep_cut (ucb does not). A file: or process: plugin that
// declares its params (sdk.Info.Params, ABI v1.3; Registry.Params knows it) is offered
// the settings among them; one that declares nothing is offered every setting of its
// roles, the unset ones left out (Spec.PolicySettings).
func Params(cfg *config.Config, name string) (map[string]any, error) {
	return params(cfg, name, nil)
}

// Params is the package's Params for the plugin name as r loaded it: a file: or
// process: plugin that declared its params gets only the settings among them.
func (r *Registry) Params(cfg *config.Config, name string) (map[string]any, error) {
	var info *Info
	if e, ok := r.entries[name]; ok {
		info = &e.info
	}
	return params(cfg, name, info)
}

func params(cfg *config.Config, name string, info *Info) (map[string]any, error) {
	m, err := cfg.RoleSettings(name)
	if err != nil {
		return nil, err
	}
	decl := cfg.Plugins[name]
	kind, ref, err := decl.SourceKind()
	switch {
	case err == nil && kind == config.SourceBuiltin:
		if b, ok := builtin.Lookup(ref); ok {
			maps.DeleteFunc(m, func(k string, _ any) bool { return !slices.Contains(b.Reads, k) })
		}
	case info != nil && info.ParamsDeclared:
		maps.DeleteFunc(m, func(k string, _ any) bool { return !slices.Contains(info.Params, k) })
	}
	maps.Copy(m, decl.Params)
	return m, nil
}

// checkDeclaredParams refuses a [plugins.NAME] params key that a plugin declaring its
// params (file: or process:) does not read, naming it and what the plugin reads: the
// plugin would ignore it (ABI.md: plugins ignore unknown keys), so a misspelt key
// would change nothing, silently. Built-ins refuse unknown keys themselves, at start.
func checkDeclaredParams(name string, decl config.Plugin, info Info) error {
	return CheckParamKeys(info, slices.Collect(maps.Keys(decl.Params)))
}

// CheckParamKeys refuses the first (in sorted order) of keys that info, a plugin that
// declares its params, does not read: "params: unknown key "k": plugin "p" reads a, b"
// (or "reads no params"). A plugin that declares nothing takes every key.
func CheckParamKeys(info Info, keys []string) error {
	if !info.ParamsDeclared {
		return nil
	}
	for _, k := range slices.Sorted(slices.Values(keys)) {
		if !slices.Contains(info.Params, k) {
			reads := "no params"
			if len(info.Params) > 0 {
				reads = strings.Join(info.Params, ", ")
			}
			return fmt.Errorf("params: unknown key %q: plugin %q reads %s", k, info.Name, reads)
		}
	}
	return nil
}
