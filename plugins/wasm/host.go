// Package wasm runs ABI v1 WebAssembly plugins (sdk/ABI.md) with wazero.
//
// Load compiles a module once (through an on-disk compilation cache, so later processes
// skip the compiler), checks its ABI and info record, and starts a pool of instances.
// Policy, Sampler, Penalty and Drafter take an instance from the pool, start the named plugin on
// it with its JSON params and return a handle implementing the sdk role interface; the
// handle's Close gives the instance back. One handle serves one sequence: its methods
// must not be called concurrently.
//
// Sandbox: no filesystem, no network, no environment or arguments, fake clocks and a
// deterministic random source (wazero's defaults); the only imports offered are
// wasi_snapshot_preview1 functions. Guest stdout and stderr go to Options.Log, each line
// prefixed with the running plugin's name (the module's name before one starts).
// Linear memory is capped at Options.MemoryMB and every call has the deadline
// Options.Timeout (wazero closes a module whose context is done, also inside loops; but
// see Options.Trusted for minfer's own module).
//
// A trap, a timeout, an error the plugin reports and a malformed result all return an
// *Error naming the plugin and role; the handle then refuses further calls and its
// instance is discarded (never returned to the pool). Nothing a module does panics the
// host.
package wasm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/minfer/minfer/sdk"
)

// MaxMemoryMB is the largest Options.MemoryMB: all a wasm32 memory holds.
const MaxMemoryMB = 4096

// Options configures Load. Zero fields take the defaults shown.
type Options struct {
	// Name identifies the module in errors and log lines ("builtin", a file name).
	Name string
	// Timeout is the deadline of every call into the module (100ms).
	Timeout time.Duration
	// MemoryMB caps the module's linear memory (64; at most MaxMemoryMB).
	MemoryMB int
	// Instances is the number of instances started by Load (2); more are started on
	// demand and kept up to 4×Instances.
	Instances int
	// Log receives the guest's stdout and stderr, line by line, prefixed
	// "[plugin NAME] " with the running plugin's name (nil: discarded).
	Log io.Writer
	// CacheDir holds compiled code across processes ("": UserCacheDir/minfer/wazero;
	// "-": compile in memory only).
	CacheDir string
	// SHA256, when set, is the hex checksum the module bytes must have.
	SHA256 string
	// Trusted marks minfer's own modules (builtin.wasm). wazero makes a call
	// interruptible by making compiled code leave to Go at every loop header, which
	// slows Go guests (a loop in every function) 10-15x: see docs/perf-plugins.md. A
	// trusted module is compiled without those checks, so its deadline is checked when
	// a call returns (a late answer is a timeout error) instead of being enforced
	// inside the call. Modules from users are never trusted.
	Trusted bool
}

// DefaultTimeout and DefaultMemoryMB apply when Options leaves them zero.
const (
	DefaultTimeout   = 100 * time.Millisecond
	DefaultMemoryMB  = 64
	defaultInstances = 2
	maxResponse      = 64 << 20
	startTimeout     = 10 * time.Second
)

// setupTimeout is the deadline of the calls made once per module or sequence (version,
// info, init, window, needs): not on the per-round path, and parsing params in a fresh
// instance may take a few ms more than a round's call.
func setupTimeout(perCall time.Duration) time.Duration { return max(perCall, time.Second) }

// Error is returned by every failing call into a plugin.
type Error struct {
	Plugin string   // plugin (or module) name
	Role   sdk.Role // role being called; "" while loading
	Kind   string   // "load", "abi", "trap", "timeout", "cancelled" (the caller's context ended), "plugin" (reported by the plugin), "malformed"
	Err    error
	// Config is the config's name for the plugin ([plugins.NAME], CallOptions.Config)
	// when it differs from Plugin, the module's name for it; "" otherwise.
	Config string
}

func (e *Error) Error() string {
	role := ""
	if e.Role != "" {
		role = " " + string(e.Role)
	}
	name := fmt.Sprintf("%q", e.Plugin)
	if e.Config != "" && e.Config != e.Plugin { // [plugins.mine] running the module's plugin "threshold"
		name = fmt.Sprintf("%q (the module's plugin %q)", e.Config, e.Plugin)
	}
	return fmt.Sprintf("plugin %s%s: %s: %v", name, role, e.Kind, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Module is a loaded, validated module and its instance pool. Safe for concurrent use.
type Module struct {
	opts     Options
	checksum string
	info     sdk.ModuleInfo
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	log      *lockedWriter // Options.Log, shared by the instances' prefixWriters
	pool     chan *instance

	mu     sync.Mutex
	closed bool
}

var caches sync.Map // dir → wazero.CompilationCache, shared by every runtime of the process

func compilationCache(dir string) (wazero.CompilationCache, error) {
	if dir == "-" {
		return wazero.NewCompilationCache(), nil
	}
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return wazero.NewCompilationCache(), nil // no cache dir: compile in memory
		}
		dir = filepath.Join(base, "minfer", "wazero")
	}
	if c, ok := caches.Load(dir); ok {
		return c.(wazero.CompilationCache), nil
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("compilation cache %s: %w", dir, err)
	}
	actual, _ := caches.LoadOrStore(dir, c)
	return actual.(wazero.CompilationCache), nil
}

// Load compiles and validates bin and starts its instance pool.
func Load(ctx context.Context, bin []byte, opts Options) (*Module, error) {
	if opts.Name == "" {
		opts.Name = "wasm"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MemoryMB <= 0 {
		opts.MemoryMB = DefaultMemoryMB
	}
	if opts.Instances <= 0 {
		opts.Instances = defaultInstances
	}
	loadErr := func(kind string, err error) error { return &Error{Plugin: opts.Name, Kind: kind, Err: err} }
	if opts.MemoryMB > MaxMemoryMB {
		return nil, loadErr("load", fmt.Errorf("memory cap %d MB above %d (all a wasm32 memory holds)", opts.MemoryMB, MaxMemoryMB))
	}
	sum := sha256.Sum256(bin)
	m := &Module{opts: opts, checksum: hex.EncodeToString(sum[:])}
	if opts.SHA256 != "" && !strings.EqualFold(opts.SHA256, m.checksum) {
		return nil, loadErr("load", fmt.Errorf("checksum %s, want %s", m.checksum, opts.SHA256))
	}
	cache, err := compilationCache(opts.CacheDir)
	if err != nil {
		return nil, loadErr("load", err)
	}
	cfg := wazero.NewRuntimeConfig().WithCompilationCache(cache).WithCloseOnContextDone(!opts.Trusted).
		WithMemoryLimitPages(uint32(opts.MemoryMB) * 16)
	m.rt = wazero.NewRuntimeWithConfig(ctx, cfg)
	m.log = &lockedWriter{w: opts.Log}
	if err := m.load(ctx, bin); err != nil {
		m.rt.Close(ctx)
		return nil, err
	}
	return m, nil
}

func (m *Module) load(ctx context.Context, bin []byte) error {
	fail := func(kind string, err error) error { return &Error{Plugin: m.opts.Name, Kind: kind, Err: err} }
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, m.rt); err != nil {
		return fail("load", err)
	}
	c, err := m.rt.CompileModule(ctx, bin)
	if err != nil {
		if strings.Contains(err.Error(), "over limit") {
			return fail("load", fmt.Errorf("the module needs more memory than the %d MB cap (memory_mb): %w", m.opts.MemoryMB, err))
		}
		return fail("load", fmt.Errorf("not a valid WebAssembly module: %w", err))
	}
	m.compiled = c
	if err := checkExports(c); err != nil {
		return fail("abi", err)
	}
	m.pool = make(chan *instance, 4*m.opts.Instances)
	first, err := m.newInstance(ctx)
	if err != nil {
		return err
	}
	if err := m.readInfo(ctx, first); err != nil {
		first.close(ctx)
		return err
	}
	m.pool <- first
	for i := 1; i < m.opts.Instances; i++ {
		in, err := m.newInstance(ctx)
		if err != nil {
			return err
		}
		m.pool <- in
	}
	return nil
}

type sig struct{ params, results []api.ValueType }

var (
	i32, i64 = api.ValueTypeI32, api.ValueTypeI64
	abiSigs  = map[string]sig{
		sdk.ExportABI:           {nil, []api.ValueType{i32}},
		sdk.ExportInfo:          {nil, []api.ValueType{i64}},
		sdk.ExportAlloc:         {[]api.ValueType{i32}, []api.ValueType{i32}},
		sdk.ExportFree:          {[]api.ValueType{i32, i32}, nil},
		sdk.ExportInit:          {[]api.ValueType{i32, i32}, []api.ValueType{i32}},
		sdk.ExportLastError:     {nil, []api.ValueType{i64}},
		sdk.ExportPolicyNext:    {[]api.ValueType{i32, i32}, []api.ValueType{i64}},
		sdk.ExportPenaltyWindow: {nil, []api.ValueType{i32}},
		sdk.ExportPenaltyApply:  {[]api.ValueType{i32, i32}, []api.ValueType{i64}},
		sdk.ExportSamplerNeeds:  {nil, []api.ValueType{i32}},
		sdk.ExportSample:        {[]api.ValueType{i32, i32}, []api.ValueType{i64}},
		sdk.ExportDraft:         {[]api.ValueType{i32, i32}, []api.ValueType{i64}},
	}
	required = []string{sdk.ExportABI, sdk.ExportInfo, sdk.ExportAlloc, sdk.ExportFree, sdk.ExportInit, sdk.ExportLastError}
	roleSyms = map[sdk.Role][]string{
		sdk.RolePolicy:  {sdk.ExportPolicyNext},
		sdk.RolePenalty: {sdk.ExportPenaltyWindow, sdk.ExportPenaltyApply},
		sdk.RoleSampler: {sdk.ExportSamplerNeeds, sdk.ExportSample},
		sdk.RoleDrafter: {sdk.ExportDraft},
	}
)

// checkExports verifies the version marker, the required exports and their signatures,
// the memory export and the imports.
func checkExports(c wazero.CompiledModule) error {
	ex := c.ExportedFunctions()
	if _, ok := ex[sdk.ExportABI]; !ok {
		for name := range ex {
			if v, ok := strings.CutPrefix(name, "minfer_abi_v"); ok {
				return fmt.Errorf("module speaks minfer ABI v%s; this host speaks v%d", v, sdk.ABIMajor)
			}
		}
		if _, ok := ex["_start"]; ok {
			return fmt.Errorf("not a minfer plugin: no %s export (a command module: build Go plugins with -buildmode=c-shared)", sdk.ExportABI)
		}
		return fmt.Errorf("not a minfer plugin: no %s export", sdk.ExportABI)
	}
	if _, ok := ex["_start"]; ok {
		// A WASI command's exports may only be called after _start has run its
		// runtime's set-up, and the host never calls _start (ABI.md).
		return fmt.Errorf("exports _start: a WASI command module, whose exports need _start to have run, which the host never calls; build it as a reactor (exporting _initialize, or neither): Go and TinyGo -buildmode=c-shared, Rust crate-type cdylib, wasi-sdk -mexec-model=reactor")
	}
	for name, want := range abiSigs {
		def, ok := ex[name]
		if !ok {
			continue
		}
		if !sameTypes(def.ParamTypes(), want.params) || !sameTypes(def.ResultTypes(), want.results) {
			return fmt.Errorf("export %s has signature %v -> %v, want %v -> %v", name,
				typeNames(def.ParamTypes()), typeNames(def.ResultTypes()), typeNames(want.params), typeNames(want.results))
		}
	}
	for _, name := range required {
		if _, ok := ex[name]; !ok {
			return fmt.Errorf("missing export %s", name)
		}
	}
	if _, ok := c.ExportedMemories()["memory"]; !ok {
		return fmt.Errorf("missing memory export \"memory\"")
	}
	for _, imp := range c.ImportedFunctions() {
		mod, name, _ := imp.Import()
		if mod != wasi_snapshot_preview1.ModuleName {
			return fmt.Errorf("imports %s.%s; plugins may only import %s", mod, name, wasi_snapshot_preview1.ModuleName)
		}
	}
	return nil
}

func sameTypes(a, b []api.ValueType) bool { return bytes.Equal(a, b) }

func typeNames(ts []api.ValueType) string {
	var s []string
	for _, t := range ts {
		s = append(s, api.ValueTypeName(t))
	}
	return "(" + strings.Join(s, ",") + ")"
}

// readInfo asks the first instance for the version marker and the info record.
func (m *Module) readInfo(ctx context.Context, in *instance) error {
	fail := func(kind string, err error) error { return &Error{Plugin: m.opts.Name, Kind: kind, Err: err} }
	minor, err := in.callScalar(ctx, in.fn[sdk.ExportABI], "", setupTimeout(m.opts.Timeout))
	if err != nil {
		return err
	}
	if minor < 0 || minor > sdk.ABIMinor {
		return fail("abi", fmt.Errorf("module needs ABI v%d.%d; this host speaks v%d.%d", sdk.ABIMajor, minor, sdk.ABIMajor, sdk.ABIMinor))
	}
	rec, err := in.callPacked(ctx, in.fn[sdk.ExportInfo], "", nil, setupTimeout(m.opts.Timeout))
	if err != nil {
		return err
	}
	info, err := sdk.ParseInfo(rec)
	if err != nil {
		return fail("abi", err)
	}
	if info.ABIMajor != sdk.ABIMajor || info.ABIMinor != int(minor) {
		return fail("abi", fmt.Errorf("info record says ABI v%d.%d, %s says v%d.%d", info.ABIMajor, info.ABIMinor, sdk.ExportABI, sdk.ABIMajor, minor))
	}
	for _, p := range info.Plugins {
		for _, r := range p.Roles {
			for _, sym := range roleSyms[r] {
				if in.fn[sym] == nil {
					return fail("abi", fmt.Errorf("plugin %q declares role %s but the module lacks export %s", p.Name, r, sym))
				}
			}
		}
	}
	m.info = info
	return nil
}

// Plugins lists the plugins the module declares, with Checksum filled.
func (m *Module) Plugins() []sdk.Info {
	out := make([]sdk.Info, len(m.info.Plugins))
	for i, p := range m.info.Plugins {
		p.Checksum = m.checksum
		out[i] = p
	}
	return out
}

// Lookup returns the info of the named plugin.
func (m *Module) Lookup(name string) (sdk.Info, bool) {
	for _, p := range m.Plugins() {
		if p.Name == name {
			return p, true
		}
	}
	return sdk.Info{}, false
}

// Checksum is the hex SHA-256 of the module bytes.
func (m *Module) Checksum() string { return m.checksum }

// Name is Options.Name.
func (m *Module) Name() string { return m.opts.Name }

// Timeout is the module's per-call deadline (Options.Timeout after defaults).
func (m *Module) Timeout() time.Duration { return m.opts.Timeout }

// Close closes every instance and the runtime. Handles still open fail afterwards.
func (m *Module) Close(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	return m.rt.Close(ctx)
}

// acquire takes an instance from the pool or starts a new one.
func (m *Module) acquire(ctx context.Context) (*instance, error) {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed {
		return nil, &Error{Plugin: m.opts.Name, Kind: "load", Err: errors.New("module closed")}
	}
	select {
	case in := <-m.pool:
		return in, nil
	default:
		return m.newInstance(ctx)
	}
}

// release returns a healthy instance to the pool.
func (m *Module) release(ctx context.Context, in *instance) {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if in.dead || closed {
		in.close(ctx)
		return
	}
	select {
	case m.pool <- in:
	default:
		in.close(ctx)
	}
}

// lockedWriter serialises the instances' lines to the log (nil: discarded).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	if l.w == nil {
		return len(b), nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// prefixWriter (one per instance) writes whole lines to w, each prefixed, and remembers the
// recent ones so that a trap's error can quote what the guest said (a Go guest prints
// "fatal error: out of memory" and its goroutines before it traps).
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
	lines  int        // lines written so far
	recent [64]string // line i is recent[i%64]
	fatal  string     // the latest "fatal error:" or "panic:" line
	fatalN int        // its line number
}

func (p *prefixWriter) setPrefix(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.prefix = s
}

// mark returns the number of lines written so far.
func (p *prefixWriter) mark() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lines
}

// since returns what the guest said after mark n: its "fatal error:" or "panic:" line
// if it printed one, else its first line.
func (p *prefixWriter) since(n int) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 { // a partial line before a trap
		p.add(string(p.buf))
		p.buf = p.buf[:0]
	}
	if p.lines <= n {
		return "", false
	}
	if p.fatal != "" && p.fatalN >= n {
		return p.fatal, true
	}
	first := max(n, p.lines-len(p.recent))
	return p.recent[first%len(p.recent)], true
}

func (p *prefixWriter) add(line string) {
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "fatal error:") || strings.HasPrefix(line, "panic:") {
		p.fatal, p.fatalN = line, p.lines
	}
	p.recent[p.lines%len(p.recent)] = line
	p.lines++
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			if len(p.buf) > 4096 { // a runaway line: flush what we have
				i = len(p.buf) - 1
			} else {
				break
			}
		}
		line := append([]byte(p.prefix), p.buf[:i+1]...)
		if line[len(line)-1] != '\n' {
			line = append(line, '\n')
		}
		if p.w != nil {
			p.w.Write(line)
		}
		p.add(string(p.buf[:i+1]))
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}
