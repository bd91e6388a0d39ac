package config

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/minfer/minfer/sdk"
)

// UsePlugin points role at arg, as the --policy, --sampler, --penalty and --drafter
// flags do (a drafter arg may list several, see UseDrafters). arg
// is a declared plugin name, or a source ("builtin:NAME", "file:./x.wasm",
// "process:./bin/x") which UsePlugin declares under a name derived from its file (with
// default limits, relative paths made absolute from the working directory). For the
// penalty, "" or "none" means no penalty. A forced [spec] depth still wins over the
// policy (Spec.PolicyName). Call Validate after all changes.
func (c *Config) UsePlugin(role sdk.Role, arg string) error {
	return c.UsePluginFlag("--"+string(role), role, arg)
}

// UsePluginFlag is UsePlugin for arg given with flag, a flag other than the role's own
// (specbench's --policies, --drafters): its errors, and those of a plugin it declares,
// name flag.
func (c *Config) UsePluginFlag(flag string, role sdk.Role, arg string) error {
	name := arg
	if role == sdk.RoleDrafter {
		return c.useDrafters(flag, arg)
	}
	if role == sdk.RolePenalty && (arg == "" || arg == "none") {
		c.Sampling.Penalty = ""
		return nil
	}
	if _, declared := c.Plugins[arg]; !declared && strings.Contains(arg, ":") {
		var err error
		if name, err = c.declareSource(flag, arg); err != nil {
			return err
		}
	}
	v := &checker{}
	c.checkRef(v, flag, arg, name, role)
	if len(v.errs) > 0 {
		e := v.errs[0]
		return fmt.Errorf("%s %s: %s", e.Key, e.Value, e.Msg)
	}
	switch role {
	case sdk.RolePolicy:
		c.Spec.Policy = name
	case sdk.RoleSampler:
		c.Sampling.Sampler = name
	case sdk.RolePenalty:
		c.Sampling.Penalty = name
	default:
		return fmt.Errorf("config: unknown role %q", role)
	}
	return nil
}

// UseDrafters sets [spec] drafter from a --drafter argument: comma-separated plugin
// names or sources (see UsePlugin), "" or "none" for none.
func (c *Config) UseDrafters(arg string) error { return c.useDrafters("--drafter", arg) }

func (c *Config) useDrafters(flag, arg string) error {
	if arg == "" || arg == "none" {
		c.Spec.Drafter = ""
		return nil
	}
	var names []string
	for _, a := range strings.Split(arg, ",") {
		a = strings.TrimSpace(a)
		name := a
		if _, declared := c.Plugins[a]; !declared && strings.Contains(a, ":") {
			var err error
			if name, err = c.declareSource(flag, a); err != nil {
				return err
			}
		}
		v := &checker{}
		c.checkRef(v, flag, a, name, sdk.RoleDrafter)
		if len(v.errs) > 0 {
			e := v.errs[0]
			return fmt.Errorf("%s %s: %s", e.Key, e.Value, e.Msg)
		}
		names = append(names, name)
	}
	c.Spec.Drafter = strings.Join(names, ",")
	return nil
}

var nonName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// declareSource declares a plugin for source, given with flag (unless one with that
// source exists), and returns its name.
func (c *Config) declareSource(flag, source string) (string, error) {
	p := Plugin{Source: source, Given: flag + " " + source}
	kind, ref, err := p.SourceKind()
	if err != nil {
		return "", fmt.Errorf("%s: %w", p.Given, err)
	}
	if kind == SourceBuiltin {
		if Builtins[ref] == "" {
			return "", fmt.Errorf("%s: no built-in plugin %q (built-ins: %s)", p.Given, ref, strings.Join(BuiltinNames(), ", "))
		}
		if q, ok := c.Plugins[ref]; ok && q.Source == source {
			return ref, nil
		}
	} else {
		abs, err := filepath.Abs(ref)
		if err != nil {
			return "", fmt.Errorf("%s: %w", p.Given, err)
		}
		p.Source = kind + ":" + abs
	}
	for name, q := range c.Plugins {
		if q.Source == p.Source {
			return name, nil
		}
	}
	base := nonName.ReplaceAllString(strings.TrimSuffix(filepath.Base(ref), filepath.Ext(ref)), "-")
	if base == "" || base == "-" {
		base = kind
	}
	name := base
	for i := 2; ; i++ {
		if _, taken := c.Plugins[name]; !taken {
			break
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
	if c.Plugins == nil {
		c.Plugins = map[string]Plugin{}
	}
	c.Plugins[name] = p.WithDefaults(name)
	return name, nil
}

// CheckRequestPlugin checks a server request's choice of plugin name for role: it must
// be declared, allowed by [server] allow_plugins, and able to play role as far as the
// config can tell. The error names the plugin (for a 400 response).
func (c *Config) CheckRequestPlugin(role sdk.Role, name string) error {
	if _, ok := c.Plugins[name]; !ok {
		return fmt.Errorf("unknown plugin %q (declared: %s)", name, strings.Join(c.pluginNames(), ", "))
	}
	if !c.Server.Allowed(name) {
		return fmt.Errorf("plugin %q is not allowed per request ([server] allow_plugins)", name)
	}
	if roles := c.Roles(name); roles != nil && !containsRole(roles, role) {
		return fmt.Errorf("plugin %q is not a %s plugin (its roles: %v)", name, role, roles)
	}
	return nil
}

func containsRole(roles []sdk.Role, r sdk.Role) bool {
	for _, x := range roles {
		if x == r {
			return true
		}
	}
	return false
}
