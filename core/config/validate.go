package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/minfer/minfer/sdk"
)

// Validate checks every value of c and the references between sections (plugin names,
// their roles). It returns nil or one *Error per problem, joined; each names the key
// and the value, e.g.
//
//	config: [model] kv = "q4": want "f16" or "q8_0"
//
// It does not open files: model paths and plugin modules are checked when loaded.
func (c *Config) Validate() error {
	errs := c.validate()
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}

// checker collects problems.
type checker struct{ errs []*Error }

func (v *checker) addf(key string, value any, format string, args ...any) {
	v.errs = append(v.errs, &Error{Key: key, Value: render(value), Msg: fmt.Sprintf(format, args...)})
}

func render(value any) string {
	switch x := value.(type) {
	case nil:
		return ""
	case string:
		return strconv.Quote(x)
	case []string:
		q := make([]string, len(x))
		for i, s := range x {
			q[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	return fmt.Sprint(value)
}

// oneOf checks that s is one of allowed.
func (v *checker) oneOf(key, s string, allowed ...string) {
	if slices.Contains(allowed, s) {
		return
	}
	q := make([]string, len(allowed))
	for i, a := range allowed {
		q[i] = strconv.Quote(a)
	}
	want := strings.Join(q, ", ")
	if n := len(q); n == 2 {
		want = q[0] + " or " + q[1]
	} else if n > 2 {
		want = strings.Join(q[:n-1], ", ") + " or " + q[n-1]
	}
	v.addf(key, s, "want %s", want)
}

func (v *checker) atLeast(key string, n, min int) {
	if n < min {
		v.addf(key, n, "want an integer ≥ %d", min)
	}
}

func (v *checker) inRange(key string, n, lo, hi int) {
	if n < lo || n > hi {
		v.addf(key, n, "want an integer in [%d, %d]", lo, hi)
	}
}

// Upper bounds of values that are accepted by type but break at run time: each slot
// of parallel is a session with its own buffers (100000 ran out of memory); threads
// beyond the cores only add scheduling (100000 made a run 60× slower); a batch or
// context this large cannot be allocated.
const (
	maxParallel = 1024
	// maxBatchRows: a batched forward's scratch grows with its rows (a 4096-row forward
	// of a 7B already holds ~1 GiB of activations).
	maxBatchRows = 4096
	maxQueue     = 1 << 20
	maxConns     = 1 << 20
	maxThreads   = 1024
	maxBatch     = 1 << 16
	maxCtx       = 1 << 24
)

func (v *checker) between(key string, x, lo, hi float64) {
	if math.IsNaN(x) || x < lo || x > hi {
		v.addf(key, x, "want a number in [%g, %g]", lo, hi)
	}
}

func (c *Config) validate() []*Error {
	v := &checker{}
	c.validateModels(v)
	c.validateSpec(v)
	c.validateSampling(v)
	c.validatePlugins(v)
	c.validateServer(v)
	v.oneOf("log.level", c.Log.Level, LogLevels...)
	return v.errs
}

func (c *Config) validateModels(v *checker) {
	v.oneOf("model.device", c.Model.Device, DeviceAuto, DeviceCPU, DeviceCUDA)
	v.inRange("model.ctx", c.Model.Ctx, 0, maxCtx)
	v.inRange("model.batch", c.Model.Batch, 1, maxBatch)
	v.inRange("model.threads", c.Model.Threads, 0, maxThreads)
	v.oneOf("model.kv", c.Model.KV, KVF16, KVQ8_0)
	v.oneOf("model.cpu_order", c.Model.CPUOrder, CPUOrderAVX512, CPUOrderAVX2)
	if c.Draft.Device != "" {
		v.oneOf("draft.device", c.Draft.Device, DeviceAuto, DeviceCPU, DeviceCUDA)
	}
	v.oneOf("draft.kv", c.Draft.KV, KVF16, KVQ8_0)
}

// maxDraft bounds draft_max: a verify forward of more rows is never worth it and the
// backends size their scratch by it.
const maxDraft = 256

func (c *Config) validateSpec(v *checker) {
	s := c.Spec
	if s.DraftMax < 1 || s.DraftMax > maxDraft {
		v.addf("spec.draft_max", s.DraftMax, "want an integer in [1, %d]", maxDraft)
	}
	if s.Depth != DepthAuto && (s.Depth < 0 || int(s.Depth) > s.DraftMax) {
		v.addf("spec.depth", s.Depth, "want \"auto\" or an integer in [0, draft_max = %d]", s.DraftMax)
	}
	if s.Depth != DepthAuto {
		c.checkRef(v, "spec.depth", s.Depth.String(), "static", sdk.RolePolicy)
	}
	c.checkRef(v, "spec.policy", s.Policy, s.Policy, sdk.RolePolicy)
	v.between("spec.min_conf", s.MinConf, 0, 1)
	v.inRange("spec.max_batch_rows", s.MaxBatchRows, 0, maxBatchRows)
	if s.BatchDepth != BatchDepthOff && s.BatchDepth != BatchDepthAuto && (s.BatchDepth < 0 || int(s.BatchDepth) > s.DraftMax) {
		v.addf("spec.batch_depth", s.BatchDepth, "want \"off\", \"auto\" or an integer in [0, draft_max = %d]", s.DraftMax)
	}
	if s.DraftMin < 0 || s.DraftMin > s.DraftMax {
		v.addf("spec.draft_min", s.DraftMin, "want an integer in [0, draft_max = %d]", s.DraftMax)
	}
	for i, name := range s.DrafterNames() {
		c.checkRef(v, "spec.drafter", s.Drafter, name, sdk.RoleDrafter)
		if slices.Contains(s.DrafterNames()[:i], name) {
			v.addf("spec.drafter", s.Drafter, "names %q twice", name)
		}
	}
	if s.Fallback != "" {
		c.checkRef(v, "spec.fallback", s.Fallback, s.Fallback, sdk.RolePolicy)
		if s.Fallback == s.Policy {
			v.addf("spec.fallback", s.Fallback, "is the policy itself; name another plugin or \"\"")
		}
	}
}

func (c *Config) validateSampling(v *checker) {
	s := c.Sampling
	if s.Sampler != "" {
		c.checkRef(v, "sampling.sampler", s.Sampler, s.Sampler, sdk.RoleSampler)
	} else {
		// The automatic choice must exist too (a config may have replaced it).
		name := s.SamplerName()
		c.checkRef(v, "sampling.sampler", s.Sampler, name, sdk.RoleSampler)
	}
	if s.Penalty != "" {
		c.checkRef(v, "sampling.penalty", s.Penalty, s.Penalty, sdk.RolePenalty)
	}
	if math.IsNaN(s.Temperature) || math.IsInf(s.Temperature, 0) || s.Temperature < 0 {
		v.addf("sampling.temperature", s.Temperature, "want a number ≥ 0 (0 = greedy)")
	}
	v.atLeast("sampling.top_k", s.TopK, 0)
	if math.IsNaN(s.TopP) || s.TopP <= 0 || s.TopP > 1 {
		v.addf("sampling.top_p", s.TopP, "want a number in (0, 1] (1 = off)")
	}
	v.between("sampling.min_p", s.MinP, 0, 1)
	if math.IsNaN(s.RepeatPenalty) || math.IsInf(s.RepeatPenalty, 0) || s.RepeatPenalty <= 0 {
		v.addf("sampling.repeat_penalty", s.RepeatPenalty, "want a number > 0 (1 = off)")
	}
	v.atLeast("sampling.repeat_last_n", s.RepeatLastN, -1)
	v.between("sampling.presence_penalty", s.PresencePenalty, -2, 2)
	v.between("sampling.frequency_penalty", s.FrequencyPenalty, -2, 2)
	if s.Seed < -1 {
		v.addf("sampling.seed", s.Seed, "want -1 (random) or an integer ≥ 0")
	}
	v.atLeast("sampling.n_predict", s.NPredict, -1)
}

var roleNames = []string{string(sdk.RolePolicy), string(sdk.RoleSampler), string(sdk.RolePenalty), string(sdk.RoleDrafter)}

func (c *Config) validatePlugins(v *checker) {
	for _, name := range c.pluginNames() {
		p := c.Plugins[name]
		key := "plugins." + name
		if name == "" || strings.ContainsAny(name, " \t\n\"'.") {
			v.addf(key, nil, "plugin name %q: want letters, digits, '-' or '_'", name)
			continue
		}
		kind, ref, err := p.SourceKind()
		switch {
		case p.Source == "":
			v.addf(key+".source", nil, "missing: want \"builtin:NAME\", \"file:PATH\" or \"process:PATH\"")
		case err != nil:
			v.addf(key+".source", p.Source, "want \"builtin:NAME\", \"file:PATH\" or \"process:PATH\"")
		case kind == SourceBuiltin && Builtins[ref] == "":
			v.addf(key+".source", p.Source, "no built-in plugin %q (built-ins: %s)", ref, strings.Join(BuiltinNames(), ", "))
		}
		if p.Timeout <= 0 {
			v.addf(key+".timeout", p.Timeout.String(), "want a duration > 0")
		}
		if p.MemoryMB < 1 || p.MemoryMB > 4096 {
			v.addf(key+".memory_mb", p.MemoryMB, "want an integer in [1, 4096] (a wasm32 memory holds at most 4 GiB)")
		}
		for i, r := range p.Roles {
			if !slices.Contains(roleNames, r) {
				v.addf(key+".roles", p.Roles, "unknown role %q: want %s", r, strings.Join(roleNames, ", "))
			} else if slices.Contains(p.Roles[:i], r) {
				v.addf(key+".roles", p.Roles, "role %q listed twice", r)
			}
		}
		if err == nil && kind == SourceBuiltin && len(p.Roles) > 0 {
			if role := Builtins[ref]; role != "" && (len(p.Roles) != 1 || p.Roles[0] != string(role)) {
				v.addf(key+".roles", p.Roles, "built-in %q is a %s plugin only", ref, role)
			}
		}
	}
}

// pluginNames returns the declared plugin names, sorted.
func (c *Config) pluginNames() []string {
	names := make([]string, 0, len(c.Plugins))
	for n := range c.Plugins {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Roles returns the roles plugin name is known to play: its roles list, else a
// built-in's role; nil when only loading the plugin can tell.
func (c *Config) Roles(name string) []sdk.Role {
	p, ok := c.Plugins[name]
	if !ok {
		return nil
	}
	var roles []sdk.Role
	for _, r := range p.Roles {
		roles = append(roles, sdk.Role(r))
	}
	if len(roles) == 0 {
		if kind, ref, err := p.SourceKind(); err == nil && kind == SourceBuiltin && Builtins[ref] != "" {
			roles = []sdk.Role{Builtins[ref]}
		}
	}
	return roles
}

// checkRef checks that the value at key (shown as value) refers, through plugin name,
// to a declared plugin that can play role.
func (c *Config) checkRef(v *checker, key, value, name string, role sdk.Role) {
	if _, ok := c.Plugins[name]; !ok {
		if _, _, err := (Plugin{Source: name}).SourceKind(); err == nil { // only a flag takes a source
			v.addf(key, value, "a plugin source, not a name: declare it in a [plugins.NAME] table (source = %q) and give that NAME here", name)
			return
		}
		v.addf(key, value, "no plugin %q declared (declared: %s)", name, strings.Join(c.pluginNames(), ", "))
		return
	}
	if roles := c.Roles(name); roles != nil && !slices.Contains(roles, role) {
		v.addf(key, value, "plugin %q is not a %s plugin (its roles: %v)", name, role, roles)
	}
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (c *Config) validateServer(v *checker) {
	s := c.Server
	if _, port, err := net.SplitHostPort(s.Addr); err != nil {
		v.addf("server.addr", s.Addr, "want host:port (e.g. \"127.0.0.1:8080\", \":8080\")")
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.addf("server.addr", s.Addr, "port %q: want 0..65535", port)
	}
	v.inRange("server.parallel", s.Parallel, 1, maxParallel)
	v.inRange("server.queue", s.Queue, 0, maxQueue)
	v.inRange("server.max_conns", s.MaxConns, 0, maxConns)
	v.inRange("server.batch_rows", s.BatchRows, 0, maxBatchRows)
	v.inRange("server.kv_pool_mb", s.KVPoolMB, 0, 1<<24)
	for _, d := range []struct {
		key string
		d   time.Duration
		min time.Duration
	}{
		// A timeout below these drops every response or connection; 0 turns it off.
		{"server.read_timeout", s.ReadTimeout, time.Second},
		{"server.write_timeout", s.WriteTimeout, time.Second},
		{"server.idle_timeout", s.IdleTimeout, time.Second},
		{"server.read_header_timeout", s.ReadHeaderTimeout, 100 * time.Millisecond},
		{"server.send_timeout", s.SendTimeout, time.Second},
	} {
		if d.d < 0 || (d.d > 0 && d.d < d.min) {
			v.addf(d.key, d.d.String(), "want 0 (none) or a duration ≥ %v (a shorter one drops every response)", d.min)
		}
	}
	if s.APIKeyEnv != "" && !envName.MatchString(s.APIKeyEnv) {
		v.addf("server.api_key_env", s.APIKeyEnv, "want the name of an environment variable (letters, digits, '_'), not the key itself")
	}
	for _, a := range s.AllowPlugins {
		if a == "*" {
			continue
		}
		if _, ok := c.Plugins[a]; !ok {
			v.addf("server.allow_plugins", s.AllowPlugins, "no plugin %q declared (declared: %s)", a, strings.Join(c.pluginNames(), ", "))
		}
	}
	v.atLeast("server.max_tokens", s.MaxTokens, 0)
}
