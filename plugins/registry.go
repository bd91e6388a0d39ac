// Package plugins is the plugin registry the CLI and the engine use: it loads every
// plugin declared in minfer.toml ([plugins.NAME], config.Plugin) once, at start-up, and
// hands out a fresh instance per sequence.
//
// Sources:
//
//	builtin:NAME  a plugin of plugins/builtin, run with WithWasmBuiltins from the
//	              embedded builtin.wasm, its checksum verified, as a trusted module
//	              (deadline checked when a call returns; see wasm.Options.Trusted and
//	              WithInterruptibleBuiltins), or
//	              natively (the default since issue 22; see native.go)
//	file:PATH     an ABI v1 WebAssembly module (sdk/ABI.md); it must declare exactly one
//	              plugin, or one whose name is the config NAME
//	process:PATH  a go-plugin executable (sdk/process, plugins/process)
//
// Modules with the same bytes and memory cap share one compiled module and instance
// pool (all built-ins share builtin.wasm's). Instances are started by NewRegistry
// (WithInstances per module) and more on demand; per-call deadlines and memory caps come
// from each declaration (config.Plugin Timeout and MemoryMB).
//
// The values Policy, Sampler, Penalty and Drafter return also implement io.Closer: Close gives
// the instance back when the sequence ends (Release does it for any value). After a
// failed call (trap, timeout, malformed result, plugin error) a value keeps returning
// that error; the error names the plugin and role.
package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/plugins/builtin"
	"github.com/minfer/minfer/plugins/process"
	"github.com/minfer/minfer/plugins/wasm"
	"github.com/minfer/minfer/sdk"
)

// Info describes a declared plugin (Source and Checksum filled).
type Info = sdk.Info

// Option configures NewRegistry.
type Option func(*options)

type options struct {
	instances    int
	cacheDir     string
	dir          string
	wasmBuiltins bool
	untrusted    bool
}

// WithInstances sets how many instances of each WebAssembly module are started up
// front (the number of sequences decoded concurrently, times the roles each uses).
func WithInstances(n int) Option { return func(o *options) { o.instances = n } }

// WithCacheDir sets the wazero compilation cache directory ("-" = memory only).
func WithCacheDir(dir string) Option { return func(o *options) { o.cacheDir = dir } }

// WithDir resolves relative file: and process: paths against dir (the config file's
// directory, config.Config.Dir) instead of the working directory.
func WithDir(dir string) Option { return func(o *options) { o.dir = dir } }

// WithNativeBuiltins runs builtin: plugins as native Go (the default: see native.go,
// unless the environment sets MINFER_WASM_BUILTINS=1), undoing an earlier
// WithWasmBuiltins.
func WithNativeBuiltins() Option { return func(o *options) { o.wasmBuiltins = false } }

// WithWasmBuiltins runs builtin: plugins in the embedded builtin.wasm, through the ABI
// as a user's module runs, instead of natively.
func WithWasmBuiltins() Option { return func(o *options) { o.wasmBuiltins = true } }

// WithInterruptibleBuiltins runs the built-ins in the embedded module, compiled like a
// user's, with deadlines enforced inside calls (10-15x slower; see wasm.Options.Trusted).
func WithInterruptibleBuiltins() Option { return func(o *options) { o.untrusted = true } }

// Registry holds the loaded plugins. Its methods are safe for concurrent use.
type Registry struct {
	opts    options
	log     io.Writer
	entries map[string]*entry
	modules map[string]*wasm.Module // by module key
	procs   []*process.Client
}

type entry struct {
	name   string // config name
	decl   config.Plugin
	kind   string
	ref    string
	info   Info
	mod    *wasm.Module    // builtin (wasm) and file sources
	plugin string          // plugin name inside mod
	native builtin.Plugin  // builtin sources run natively
	proc   *process.Client // process sources
	path   string          // process sources
}

// NewRegistry loads every plugin of decls (keyed by config name). log receives guest
// output (nil: discarded). Any plugin that fails to load fails the whole registry with
// an error naming it as the user gave it (config.Plugin.Where).
func NewRegistry(ctx context.Context, decls map[string]config.Plugin, log io.Writer, opts ...Option) (*Registry, error) {
	r := &Registry{log: log, entries: map[string]*entry{}, modules: map[string]*wasm.Module{}}
	r.opts.instances = 2
	// MINFER_WASM_BUILTINS=1: every command's built-ins in builtin.wasm (an option given
	// here still decides: the tests' WithNativeBuiltins, say).
	r.opts.wasmBuiltins = os.Getenv("MINFER_WASM_BUILTINS") == "1"
	for _, o := range opts {
		o(&r.opts)
	}
	names := slices.Sorted(maps.Keys(decls))
	for _, name := range names {
		if err := r.load(ctx, name, decls[name].WithDefaults(name)); err != nil {
			r.Close()
			return nil, fmt.Errorf("plugins: %s: %w", decls[name].Where(name), err)
		}
	}
	return r, nil
}

func (r *Registry) load(ctx context.Context, name string, decl config.Plugin) error {
	kind, ref, err := decl.SourceKind()
	if err != nil {
		return err
	}
	e := &entry{name: name, decl: decl, kind: kind, ref: ref}
	switch kind {
	case config.SourceBuiltin:
		if err := r.loadBuiltin(ctx, e); err != nil {
			return err
		}
	case config.SourceFile:
		if err := r.loadFile(ctx, e); err != nil {
			return err
		}
	case config.SourceProcess:
		e.path = r.resolve(ref)
		c, err := openProcess(ctx, name, e.path, process.Options{Params: mustParams(decl.Params, nil), Timeout: decl.Timeout, Log: r.log})
		if err != nil {
			return err
		}
		r.procs = append(r.procs, c)
		e.proc = c
		pi := c.Info()
		e.info = Info{Name: pi.Name, Version: pi.Version, Roles: c.Roles(), Params: pi.Params, ParamsDeclared: pi.ParamsDeclared}
	}
	e.info.Source = decl.Source
	if err := checkDeclaredParams(name, decl, e.info); err != nil {
		return err
	}
	for _, role := range decl.Roles {
		if !e.info.Has(sdk.Role(role)) {
			return fmt.Errorf("roles: %s is declared for it, but the plugin offers %v", role, e.info.Roles)
		}
	}
	r.entries[name] = e
	return nil
}

func (r *Registry) loadBuiltin(ctx context.Context, e *entry) error {
	p, ok := builtin.Lookup(e.ref)
	if !ok {
		return fmt.Errorf("source %q: no built-in plugin %q (have %s)", e.decl.Source, e.ref, strings.Join(config.BuiltinNames(), ", "))
	}
	if !r.opts.wasmBuiltins && !r.opts.untrusted {
		e.native, e.info = p, p.Info
		return nil
	}
	m, err := r.module(ctx, "builtin", builtin.WASM, e.decl, builtin.SHA256())
	if err != nil {
		return err
	}
	e.mod, e.plugin = m, e.ref
	e.info, _ = m.Lookup(e.ref)
	return nil
}

func (r *Registry) loadFile(ctx context.Context, e *entry) error {
	path := r.resolve(e.ref)
	bin, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	m, err := r.module(ctx, path, bin, e.decl, "")
	if err != nil {
		return err
	}
	ps := m.Plugins()
	switch info, ok := m.Lookup(e.name); {
	case ok:
		e.info = info
	case len(ps) == 1:
		e.info = ps[0]
	default:
		var have []string
		for _, p := range ps {
			have = append(have, p.Name)
		}
		if e.decl.Given != "" { // a flag's source has no entry to name
			return fmt.Errorf("%s declares plugins %s: a flag cannot pick one; declare it in a [plugins.NAME] table named after it (source = %q) and give that name",
				path, strings.Join(have, ", "), e.decl.Source)
		}
		return fmt.Errorf("%s declares plugins %s; name the entry after one of them", path, strings.Join(have, ", "))
	}
	e.mod, e.plugin = m, e.info.Name
	return nil
}

// module loads (or reuses) a module; modules with the same bytes key and memory cap
// share one instance pool.
func (r *Registry) module(ctx context.Context, key string, bin []byte, decl config.Plugin, sum string) (*wasm.Module, error) {
	key = fmt.Sprintf("%s|%dMB", key, decl.MemoryMB)
	if m, ok := r.modules[key]; ok {
		return m, nil
	}
	m, err := wasm.Load(ctx, bin, wasm.Options{Name: filepath.Base(strings.TrimSuffix(key[:strings.LastIndex(key, "|")], ".wasm")),
		Timeout: decl.Timeout, MemoryMB: decl.MemoryMB, Instances: r.opts.instances, Log: r.log,
		CacheDir: r.opts.cacheDir, SHA256: sum, Trusted: sum != "" && !r.opts.untrusted})
	if err != nil {
		return nil, err
	}
	r.modules[key] = m
	return m, nil
}

func (r *Registry) resolve(p string) string {
	if r.opts.dir == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(r.opts.dir, p)
}

// Names returns the declared plugin names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.entries))
	for n := range r.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Info returns what the named plugin declares.
func (r *Registry) Info(name string) (Info, bool) {
	e, ok := r.entries[name]
	if !ok {
		return Info{}, false
	}
	return e.info, true
}

func (r *Registry) lookup(name string, role sdk.Role) (*entry, error) {
	e, ok := r.entries[name]
	if !ok {
		return nil, fmt.Errorf("plugins: no plugin %q declared (have %s)", name, strings.Join(r.Names(), ", "))
	}
	if !e.info.Has(role) {
		return nil, fmt.Errorf("plugins: plugin %q is not a %s (it offers %v)", name, role, e.info.Roles)
	}
	return e, nil
}

// Policy starts a depth-policy instance of the named plugin for one sequence. overrides
// are applied over the declared params table (nil: none).
func (r *Registry) Policy(ctx context.Context, name string, overrides map[string]any) (sdk.DepthPolicy, Info, error) {
	return start(r, ctx, name, overrides, policyKit)
}

// Sampler starts a sampler instance of the named plugin for one sequence.
func (r *Registry) Sampler(ctx context.Context, name string, overrides map[string]any) (sdk.Sampler, Info, error) {
	return start(r, ctx, name, overrides, samplerKit)
}

// Penalty starts a penalty instance of the named plugin for one sequence.
func (r *Registry) Penalty(ctx context.Context, name string, overrides map[string]any) (sdk.Penalty, Info, error) {
	return start(r, ctx, name, overrides, penaltyKit)
}

// Drafter starts a drafter instance of the named plugin for one sequence.
func (r *Registry) Drafter(ctx context.Context, name string, overrides map[string]any) (sdk.Drafter, Info, error) {
	return start(r, ctx, name, overrides, drafterKit)
}

// roleKit is how each kind of entry starts an instance of one role (T, its sdk
// interface): from its WebAssembly module, in its process, or natively (the instance
// wrapped with a Close that releases nothing).
type roleKit[T any] struct {
	role   sdk.Role
	wasm   func(m *wasm.Module, ctx context.Context, plugin string, params []byte, co wasm.CallOptions) (T, error)
	proc   func(c *process.Client, params []byte) (T, error)
	native func(e *entry, params []byte) (T, error)
}

var (
	policyKit = roleKit[sdk.DepthPolicy]{role: sdk.RolePolicy,
		wasm: func(m *wasm.Module, ctx context.Context, n string, p []byte, co wasm.CallOptions) (sdk.DepthPolicy, error) {
			return asRole[sdk.DepthPolicy](m.Policy(ctx, n, p, co))
		},
		proc: (*process.Client).PolicyWith,
		native: func(e *entry, p []byte) (sdk.DepthPolicy, error) {
			if e.native.NewPolicy == nil {
				return nil, errNoRole
			}
			v, err := e.native.NewPolicy(p)
			if err != nil {
				return nil, err
			}
			return &nativePolicy{guard: e.guard(sdk.RolePolicy), p: v}, nil
		}}
	samplerKit = roleKit[sdk.Sampler]{role: sdk.RoleSampler,
		wasm: func(m *wasm.Module, ctx context.Context, n string, p []byte, co wasm.CallOptions) (sdk.Sampler, error) {
			return asRole[sdk.Sampler](m.Sampler(ctx, n, p, co))
		},
		proc: (*process.Client).SamplerWith,
		native: func(e *entry, p []byte) (sdk.Sampler, error) {
			if e.native.NewSampler == nil {
				return nil, errNoRole
			}
			v, err := e.native.NewSampler(p)
			if err != nil {
				return nil, err
			}
			return &nativeSampler{guard: e.guard(sdk.RoleSampler), s: v}, nil
		}}
	penaltyKit = roleKit[sdk.Penalty]{role: sdk.RolePenalty,
		wasm: func(m *wasm.Module, ctx context.Context, n string, p []byte, co wasm.CallOptions) (sdk.Penalty, error) {
			return asRole[sdk.Penalty](m.Penalty(ctx, n, p, co))
		},
		proc: (*process.Client).PenaltyWith,
		native: func(e *entry, p []byte) (sdk.Penalty, error) {
			if e.native.NewPenalty == nil {
				return nil, errNoRole
			}
			v, err := e.native.NewPenalty(p)
			if err != nil {
				return nil, err
			}
			return &nativePenalty{guard: e.guard(sdk.RolePenalty), p: v}, nil
		}}
	drafterKit = roleKit[sdk.Drafter]{role: sdk.RoleDrafter,
		wasm: func(m *wasm.Module, ctx context.Context, n string, p []byte, co wasm.CallOptions) (sdk.Drafter, error) {
			return asRole[sdk.Drafter](m.Drafter(ctx, n, p, co))
		},
		proc: (*process.Client).DrafterWith,
		native: func(e *entry, p []byte) (sdk.Drafter, error) {
			if e.native.NewDrafter == nil {
				return nil, errNoRole
			}
			v, err := e.native.NewDrafter(p)
			if err != nil {
				return nil, err
			}
			return &nativeDrafter{guard: e.guard(sdk.RoleDrafter), d: v, capBytes: e.decl.WithDefaults(e.name).MemoryMB << 20}, nil
		}}
)

// asRole returns v as T, or T's nil and err: never an interface holding a nil *V.
func asRole[T, V any](v V, err error) (T, error) {
	if err != nil {
		var none T
		return none, err
	}
	return any(v).(T), nil
}

// start starts an instance of k's role of the named plugin with its effective params
// (the declaration's, overrides merged over them).
//
// A process plugin's instance is made in the plugin's one process: params travel with
// each instance (sdk/process New), so every request shares the process whatever its
// overrides: a request costs one instance, not a process start (before, a request with
// overrides, which serve always has, started a process of its own: +100 ms).
func start[T any](r *Registry, ctx context.Context, name string, overrides map[string]any, k roleKit[T]) (T, Info, error) {
	var none T
	e, err := r.lookup(name, k.role)
	if err != nil {
		return none, Info{}, err
	}
	var v T
	switch {
	case e.mod != nil:
		v, err = k.wasm(e.mod, ctx, e.plugin, mustParams(e.decl.Params, overrides), wasm.CallOptions{Timeout: e.decl.Timeout, Config: e.name})
	case e.proc != nil:
		var params []byte // nil: the declaration's, which the process was opened with
		if len(overrides) > 0 {
			params = mustParams(e.decl.Params, overrides)
		}
		v, err = k.proc(e.proc, params)
	default:
		if v, err = k.native(e, mustParams(e.decl.Params, overrides)); err != nil {
			err = fmt.Errorf("plugins: %s: %w", name, err)
		}
	}
	if err != nil {
		return none, Info{}, err
	}
	return v, e.info, nil
}

// openProcess starts a process plugin (a variable so that tests count the starts).
var openProcess = process.Open

// guard is the rules a native built-in of this entry is held to in role (see
// native.go): the declared deadline, and the config's name in its errors.
func (e *entry) guard(role sdk.Role) guard {
	d := e.decl.WithDefaults(e.name) // (NewRegistry's are; a test's may not be)
	return guard{name: e.name, role: role, timeout: d.Timeout}
}

// Release closes v if it is an io.Closer (every value the Registry hands out is).
func Release(v any) error {
	if c, ok := v.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Close stops every module and process. Instances still open fail afterwards.
func (r *Registry) Close() error {
	var errs []error
	for _, m := range r.modules {
		errs = append(errs, m.Close(context.Background()))
	}
	for _, c := range r.procs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// mustParams merges overrides over params and encodes the result as a JSON object.
// Config values are TOML values, always encodable; a value that is not is dropped
// with its key named in the JSON as null, which the plugin reports.
func mustParams(params, overrides map[string]any) []byte {
	m := make(map[string]any, len(params)+len(overrides))
	maps.Copy(m, params)
	maps.Copy(m, overrides)
	b, err := json.Marshal(m)
	if err != nil {
		for k, v := range m {
			if _, err := json.Marshal(v); err != nil {
				m[k] = nil
			}
		}
		b, _ = json.Marshal(m)
	}
	return b
}
