package wasm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/minfer/minfer/sdk"
)

// instance is one instantiated module. Used by one goroutine at a time.
type instance struct {
	m     *Module
	mod   api.Module
	mem   api.Memory
	fn    map[string]api.Function
	stack [2]uint64
	buf   uint32 // request buffer from minfer_alloc (0: none yet)
	cap   uint32
	dead  bool // trapped, timed out or returned garbage: never reuse
	log   *prefixWriter
}

func (m *Module) newInstance(ctx context.Context) (*instance, error) {
	log := &prefixWriter{w: m.log, prefix: "[plugin " + m.opts.Name + "] "}
	cfg := wazero.NewModuleConfig().WithName("").WithStdout(log).WithStderr(log).WithStartFunctions()
	if _, ok := m.compiled.ExportedFunctions()["_initialize"]; ok {
		cfg = cfg.WithStartFunctions("_initialize")
	}
	sctx, cancel := context.WithTimeout(experimental.WithMemoryAllocator(ctx, memoryAllocator), startTimeout)
	defer cancel()
	mod, err := m.rt.InstantiateModule(sctx, m.compiled, cfg)
	if err != nil {
		return nil, &Error{Plugin: m.opts.Name, Kind: "load", Err: fmt.Errorf("instantiate: %w", err)}
	}
	in := &instance{m: m, mod: mod, mem: mod.Memory(), fn: map[string]api.Function{}, log: log}
	for name := range abiSigs {
		if f := mod.ExportedFunction(name); f != nil {
			in.fn[name] = f
		}
	}
	return in, nil
}

func (in *instance) close(ctx context.Context) {
	in.dead = true
	in.mod.Close(ctx)
}

// fail builds an *Error and, for every kind but a plugin-reported error on a healthy
// instance, marks the instance dead.
func (in *instance) fail(name string, role sdk.Role, kind string, err error) error {
	in.dead = true
	return &Error{Plugin: name, Role: role, Kind: kind, Err: err}
}

// invoke calls fn with the stack already set, under the per-call deadline.
func (in *instance) invoke(ctx context.Context, fn api.Function, name string, role sdk.Role, timeout time.Duration) error {
	if in.dead {
		return &Error{Plugin: name, Role: role, Kind: "trap", Err: errors.New("instance unusable after an earlier failure")}
	}
	if err := ctx.Err(); err != nil { // the request was cancelled (Ctrl-C, client gone)
		return &Error{Plugin: name, Role: role, Kind: "cancelled", Err: err}
	}
	var err error
	mark := in.log.mark()
	if in.m.opts.Trusted { // not interruptible: check the deadline afterwards
		start := time.Now()
		err = fn.CallWithStack(ctx, in.stack[:])
		if took := time.Since(start); err == nil && took > timeout {
			return in.fail(name, role, "timeout", fmt.Errorf("answered after %v, deadline %v", took.Round(time.Microsecond), timeout))
		}
	} else {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err = fn.CallWithStack(cctx, in.stack[:])
		cancel()
	}
	if err == nil {
		return nil
	}
	var exit *sys.ExitError
	switch {
	case ctx.Err() != nil: // the caller's context ended, not the per-call deadline
		return in.fail(name, role, "cancelled", ctx.Err())
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded:
		return in.fail(name, role, "timeout", fmt.Errorf("no answer within %v", timeout))
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeContextCanceled:
		return in.fail(name, role, "timeout", context.Canceled)
	case errors.As(err, &exit):
		err = fmt.Errorf("module exited with code %d", exit.ExitCode())
	default: // wazero appends a multi-line wasm stack trace: keep the first line
		if msg, _, cut := strings.Cut(err.Error(), "\n"); cut {
			err = errors.New(msg)
		}
	}
	if last, ok := in.log.since(mark); ok {
		if len(last) > maxQuotedOutput { // a runaway line is up to 4 KiB
			last = strings.ToValidUTF8(last[:maxQuotedOutput], "") + "…"
		}
		err = fmt.Errorf("%w (the module's last output: %q)", err, last)
	}
	return in.fail(name, role, "trap", err)
}

// maxQuotedOutput is how much of the module's last output line a trap's error quotes.
const maxQuotedOutput = 300

// callScalar calls a () -> i32 export.
func (in *instance) callScalar(ctx context.Context, fn api.Function, role sdk.Role, timeout time.Duration) (int32, error) {
	if err := in.invoke(ctx, fn, in.m.opts.Name, role, timeout); err != nil {
		return 0, err
	}
	return int32(uint32(in.stack[0])), nil
}

// write copies req into the guest's request buffer, growing it through
// minfer_alloc/minfer_free as needed, and returns its address.
func (in *instance) write(ctx context.Context, name string, role sdk.Role, req []byte, timeout time.Duration) (uint32, error) {
	if uint32(len(req)) > in.cap || in.buf == 0 {
		if in.buf != 0 {
			in.stack[0], in.stack[1] = uint64(in.buf), uint64(in.cap)
			if err := in.invoke(ctx, in.fn[sdk.ExportFree], name, role, timeout); err != nil {
				return 0, err
			}
			in.buf, in.cap = 0, 0
		}
		size := max(uint32(len(req)), 2*in.cap, 4096)
		in.stack[0] = uint64(size)
		if err := in.invoke(ctx, in.fn[sdk.ExportAlloc], name, role, timeout); err != nil {
			return 0, err
		}
		ptr := uint32(in.stack[0])
		if ptr == 0 {
			return 0, in.fail(name, role, "plugin", fmt.Errorf("%s(%d) failed", sdk.ExportAlloc, size))
		}
		in.buf, in.cap = ptr, size
	}
	if !in.mem.Write(in.buf, req) {
		return 0, in.fail(name, role, "malformed", fmt.Errorf("%s returned %#x, outside memory", sdk.ExportAlloc, in.buf))
	}
	return in.buf, nil
}

// callPacked writes req (when fn takes a buffer), calls fn and returns a view of the
// packed (ptr, len) response in guest memory, valid until the next call.
func (in *instance) callPacked(ctx context.Context, fn api.Function, role sdk.Role, req []byte, timeout time.Duration) ([]byte, error) {
	name := in.m.opts.Name
	return in.callNamed(ctx, fn, name, role, req, timeout, len(fn.Definition().ParamTypes()) == 2)
}

func (in *instance) callNamed(ctx context.Context, fn api.Function, name string, role sdk.Role, req []byte, timeout time.Duration, withBuf bool) ([]byte, error) {
	if withBuf {
		ptr, err := in.write(ctx, name, role, req, timeout)
		if err != nil {
			return nil, err
		}
		in.stack[0], in.stack[1] = uint64(ptr), uint64(len(req))
	}
	if err := in.invoke(ctx, fn, name, role, timeout); err != nil {
		return nil, err
	}
	res := int64(in.stack[0])
	if res < 0 {
		return nil, in.fail(name, role, "plugin", errors.New(in.lastError(ctx, timeout)))
	}
	ptr, n := sdk.Unpack(res)
	if n > maxResponse {
		return nil, in.fail(name, role, "malformed", fmt.Errorf("response of %d bytes", n))
	}
	b, ok := in.mem.Read(ptr, n)
	if !ok {
		return nil, in.fail(name, role, "malformed", fmt.Errorf("response at %#x+%d lies outside memory (%d bytes)", ptr, n, in.mem.Size()))
	}
	return b, nil
}

// lastError fetches minfer_last_error's message (best effort).
func (in *instance) lastError(ctx context.Context, timeout time.Duration) string {
	fn := in.fn[sdk.ExportLastError]
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := fn.CallWithStack(cctx, in.stack[:]); err != nil {
		return "failed (and minfer_last_error failed too)"
	}
	ptr, n := sdk.Unpack(int64(in.stack[0]))
	n = min(n, sdk.MaxErrorLen)
	b, ok := in.mem.Read(ptr, n)
	if !ok || n == 0 {
		return "failed without a message"
	}
	return string(b)
}

// start runs minfer_init for plugin name with params on this instance; the instance's
// output is prefixed with the plugin's name from then on.
func (in *instance) start(ctx context.Context, name string, role sdk.Role, params []byte, timeout time.Duration) error {
	in.log.setPrefix("[plugin " + name + "] ")
	req := sdk.AppendInitRequest(nil, name, params)
	ptr, err := in.write(ctx, name, role, req, timeout)
	if err != nil {
		return err
	}
	in.stack[0], in.stack[1] = uint64(ptr), uint64(len(req))
	if err := in.invoke(ctx, in.fn[sdk.ExportInit], name, role, timeout); err != nil {
		return err
	}
	if status := int32(uint32(in.stack[0])); status != 0 {
		return in.fail(name, role, "plugin", fmt.Errorf("init: %s", in.lastError(ctx, timeout)))
	}
	return nil
}
