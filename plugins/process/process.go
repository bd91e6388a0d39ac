// Package process is the host of out-of-process plugins (config source "process:PATH"):
// it starts the plugin executable with hashicorp/go-plugin, negotiates the protocol
// version over the handshake (sdk/process), and returns sdk.DepthPolicy, sdk.Sampler and
// sdk.Penalty values whose calls cross gRPC: one call per round and role, the whole round
// in the call, the caller's deadline (capped by Options.Timeout) carried to the plugin.
//
// Failure is contained. A plugin that crashes, hangs past the deadline, panics, returns
// an error or a malformed result makes that call fail with an *Error naming the plugin,
// role and method; the instance is then unusable (its later calls return the same
// error), the host process never panics, and other instances and plugins keep working.
// The plugin runs in its own process group; Close, and a failed start, kill the whole
// group, so what a plugin starts (a shell script's children) dies with it.
package process

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minfer/minfer/sdk"
	sp "github.com/minfer/minfer/sdk/process"
)

// Defaults for Options.
const (
	DefaultTimeout      = 2 * time.Second  // per call (config: [plugins.NAME] timeout)
	DefaultStartTimeout = 30 * time.Second // start-up, handshake, instance creation
)

// Options configure Open. The zero value is usable.
type Options struct {
	// Params is the plugin's params as a JSON object (plugins.Params, encoded), handed
	// to every instance the Client creates; nil = "{}".
	Params []byte
	// Timeout is the deadline of one call; a caller's earlier deadline wins. 0 =
	// DefaultTimeout.
	Timeout time.Duration
	// StartTimeout bounds starting the process and creating an instance. 0 =
	// DefaultStartTimeout; an earlier deadline of Open's ctx wins.
	StartTimeout time.Duration
	// Log receives the plugin's stdout and stderr, line by line, prefixed with
	// "plugin NAME: ". nil = discarded.
	Log io.Writer
	// SHA256, when set, is the checksum the executable must have.
	SHA256 []byte
}

// Sentinel causes, matched with errors.Is on an *Error.
var (
	ErrExited    = errors.New("plugin process exited")
	ErrClosed    = errors.New("plugin closed")
	ErrMalformed = sp.ErrMalformed
)

// Error is a failure of a process plugin. Err is the cause: context.DeadlineExceeded for
// a call past its deadline, ErrExited for a dead process, ErrMalformed, ErrClosed, or
// the plugin's own error.
type Error struct {
	Plugin string   // the plugin's name in the config
	Role   sdk.Role // "" for start-up
	Method string   // e.g. "NextDepth"; "start" while starting
	Err    error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("process plugin %q", e.Plugin)
	if e.Role != "" {
		s += ": " + string(e.Role)
	}
	return s + ": " + e.Method + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Client is one running plugin process. Its methods are safe for concurrent use.
type Client struct {
	name string
	opts Options
	pc   *plugin.Client
	cmd  *exec.Cmd          // the plugin process, the leader of its own process group
	stop context.CancelFunc // kills cmd's group through exec (cmd.Cancel), once it runs
	conn *sp.Conn
	info sp.Info
	pid  int

	mu     sync.Mutex
	closed bool
	hung   bool // a call passed its deadline: Close kills without asking
}

// Open starts the plugin executable at path (already resolved by the caller) under the
// config name name, and asks it for its roles. The process runs until Close.
func Open(ctx context.Context, name, path string, opts Options) (*Client, error) {
	fail := func(err error) error { return &Error{Plugin: name, Method: "start", Err: err} }
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < opts.StartTimeout {
		opts.StartTimeout = max(time.Until(dl), time.Millisecond)
	}
	if len(opts.Params) == 0 {
		opts.Params = []byte("{}")
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, fail(err)
	case !st.Mode().IsRegular():
		return nil, fail(fmt.Errorf("%s is not a regular file", path))
	case st.Mode().Perm()&0o111 == 0:
		return nil, fail(fmt.Errorf("%s is not executable (chmod +x)", path))
	}
	var secure *plugin.SecureConfig
	if opts.SHA256 != nil {
		secure = &plugin.SecureConfig{Checksum: opts.SHA256, Hash: sha256.New()}
	}
	logOut := opts.Log
	if logOut == nil {
		logOut = io.Discard
	}
	prefix := "plugin " + name + ": "
	// stop kills the plugin's process group once the process exists, whenever start
	// asks (exec runs Cancel only after Start has set cmd.Process: no race with it).
	stopCtx, stop := context.WithCancel(context.Background())
	cmd := exec.CommandContext(stopCtx, path)
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	orphanKill(cmd)
	pc := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sp.Handshake,
		VersionedPlugins: sp.ClientPlugins(),
		Cmd:              cmd,
		SecureConfig:     secure,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		StartTimeout:     opts.StartTimeout,
		Stderr:           &lineWriter{w: logOut, prefix: prefix},
		SyncStdout:       &lineWriter{w: logOut, prefix: prefix},
		SyncStderr:       &lineWriter{w: logOut, prefix: prefix},
		Logger: hclog.New(&hclog.LoggerOptions{
			// The plugin's output already reaches Log through Stderr; failures reach the
			// caller as errors.
			Name: "minfer." + name, Level: hclog.Off, Output: io.Discard,
		}),
		GRPCDialOptions: []grpc.DialOption{grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(sp.MaxMessageBytes), grpc.MaxCallSendMsgSize(sp.MaxMessageBytes))},
	})
	c := &Client{name: name, opts: opts, pc: pc, cmd: cmd, stop: stop}
	if err := c.start(ctx); err != nil {
		// A child that never handshakes may have started others that hold the output
		// pipes open, and go-plugin's Kill waits for those pipes: kill the group first.
		c.killGroup()
		pc.Kill()
		stop()
		return nil, fail(err)
	}
	return c, nil
}

// killGroup kills the plugin's process group (the plugin and every process it
// started that stayed in its group).
func (c *Client) killGroup() {
	if c.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
}

// closeGrace is how long Close lets the plugin exit on its own before it kills the
// process group.
const closeGrace = 2 * time.Second

func (c *Client) start(ctx context.Context) error {
	// go-plugin waits up to StartTimeout for the handshake and takes no context:
	// wait beside it, so a host told to stop (SIGTERM) does not wait it out. c.stop
	// kills the process group even where the process has not started yet (killGroup
	// alone found no process then, and the wait lasted the whole StartTimeout).
	type started struct {
		rpc plugin.ClientProtocol
		err error
	}
	ch := make(chan started, 1)
	go func() {
		rpc, err := c.pc.Client()
		ch <- started{rpc, err}
	}()
	var st started
	select {
	case st = <-ch:
	case <-ctx.Done():
		c.stop() // the handshake wait ends with the process
		<-ch
		return ctx.Err()
	}
	rpc, err := st.rpc, st.err
	if errors.Is(err, plugin.ErrChecksumsDoNotMatch) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w (want an executable built with minfer's sdk/process, protocol %d)", firstLine{err}, sp.ProtocolVersion)
	}
	if rc := c.pc.ReattachConfig(); rc != nil {
		c.pid = rc.Pid
	}
	raw, err := rpc.Dispense(sp.MetaKey)
	if err != nil {
		return err
	}
	conn, ok := raw.(*sp.Conn)
	if !ok {
		return fmt.Errorf("BUG: dispensed %T", raw)
	}
	c.conn = conn
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	info, err := conn.Info(ctx)
	if err != nil {
		return fmt.Errorf("info: %w", c.cause(ctx, err))
	}
	if info.Protocol != sp.ProtocolVersion {
		return fmt.Errorf("plugin speaks protocol %d, want %d", info.Protocol, sp.ProtocolVersion)
	}
	if len(info.Roles) == 0 {
		return errors.New("plugin serves no role")
	}
	c.info = info
	return nil
}

// Roles returns the roles the plugin serves.
func (c *Client) Roles() []sdk.Role { return slices.Clone(c.info.Roles) }

// Info returns what the plugin says about itself (its own name and version).
func (c *Client) Info() sp.Info { return c.info }

// PID returns the plugin process id.
func (c *Client) PID() int { return c.pid }

// Policy creates a depth-policy instance in the plugin (one per sequence) with
// Options.Params. The value also implements io.Closer, freeing the instance in the
// plugin.
func (c *Client) Policy() (sdk.DepthPolicy, error) { return c.PolicyWith(nil) }

// Sampler creates a sampler instance (one per sequence); it implements io.Closer too.
func (c *Client) Sampler() (sdk.Sampler, error) { return c.SamplerWith(nil) }

// Penalty creates a penalty instance (one per sequence); it implements io.Closer too.
func (c *Client) Penalty() (sdk.Penalty, error) { return c.PenaltyWith(nil) }

// Drafter creates a drafter instance (one per sequence); it implements io.Closer too.
func (c *Client) Drafter() (sdk.Drafter, error) { return c.DrafterWith(nil) }

// DrafterWith is Drafter with the instance's own params (see PolicyWith).
func (c *Client) DrafterWith(params []byte) (sdk.Drafter, error) {
	in, err := c.newInstance(sdk.RoleDrafter, params)
	if err != nil {
		return nil, err
	}
	return &drafter{in: in}, nil
}

// PolicyWith is Policy with the instance's own params (a JSON object; nil =
// Options.Params), e.g. a request's overrides: params travel with each instance, so
// one process serves instances with different params.
func (c *Client) PolicyWith(params []byte) (sdk.DepthPolicy, error) {
	in, err := c.newInstance(sdk.RolePolicy, params)
	if err != nil {
		return nil, err
	}
	return &policy{in}, nil
}

// SamplerWith is Sampler with the instance's own params (see PolicyWith).
func (c *Client) SamplerWith(params []byte) (sdk.Sampler, error) {
	in, err := c.newInstance(sdk.RoleSampler, params)
	if err != nil {
		return nil, err
	}
	return &sampler{in}, nil
}

// PenaltyWith is Penalty with the instance's own params (see PolicyWith).
func (c *Client) PenaltyWith(params []byte) (sdk.Penalty, error) {
	in, err := c.newInstance(sdk.RolePenalty, params)
	if err != nil {
		return nil, err
	}
	return &penalty{in}, nil
}

// Close stops the plugin process and waits for it to exit; a process that hung in a
// call is killed at once. Later calls on its instances fail with ErrClosed. Close is
// idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	hung := c.hung
	c.mu.Unlock()
	if hung {
		c.killGroup()
	}
	// go-plugin's Kill asks the plugin to exit, then kills it, then waits for its
	// output pipes, which a process it started may hold open for ever: after the
	// grace, kill the group, which ends the wait. The group is killed in any case, so
	// nothing the plugin started outlives it.
	done := make(chan struct{})
	go func() {
		c.pc.Kill()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeGrace):
	}
	c.killGroup()
	<-done
	c.stop() // the process has ended: this only releases the context
	return nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *Client) newInstance(role sdk.Role, params []byte) (*instance, error) {
	if params == nil {
		params = c.opts.Params
	}
	fail := func(err error) error { return &Error{Plugin: c.name, Role: role, Method: "New", Err: err} }
	if c.isClosed() {
		return nil, fail(ErrClosed)
	}
	if !slices.Contains(c.info.Roles, role) {
		return nil, fail(fmt.Errorf("the plugin does not serve this role (it serves %v)", c.info.Roles))
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.StartTimeout)
	defer cancel()
	in, err := c.conn.New(ctx, role, params)
	if err != nil {
		return nil, fail(c.cause(ctx, err))
	}
	return &instance{c: c, in: in}, nil
}

// cause turns an error of a call made under ctx into the cause an *Error carries.
func (c *Client) cause(ctx context.Context, err error) error {
	st, _ := status.FromError(err)
	switch {
	case st.Code() == codes.DeadlineExceeded || errors.Is(ctx.Err(), context.DeadlineExceeded):
		c.mu.Lock()
		c.hung = true
		c.mu.Unlock()
		return fmt.Errorf("no answer before the deadline (per-call timeout %v): %w", c.opts.Timeout, context.DeadlineExceeded)
	case st.Code() == codes.Canceled || errors.Is(ctx.Err(), context.Canceled):
		return context.Canceled
	case c.isClosed():
		return ErrClosed
	case st.Code() == codes.Unavailable:
		if c.waitExited() {
			return fmt.Errorf("%w (crashed?): %s", ErrExited, st.Message())
		}
		return fmt.Errorf("connection lost: %s", st.Message())
	case st.Code() == codes.Unknown || st.Code() == codes.Internal || st.Code() == codes.NotFound:
		return errors.New(st.Message()) // the plugin's own error or panic
	}
	return err
}

// waitExited reports whether the process has exited, giving go-plugin a moment to
// notice a crash that the connection saw first.
func (c *Client) waitExited() bool {
	for range 40 {
		if c.pc.Exited() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return c.pc.Exited()
}

// instance is one role instance in the plugin process. The first failure sticks.
type instance struct {
	c  *Client
	in sp.Instance

	mu  sync.Mutex
	err error
}

// call runs f under the per-call deadline; any failure ends the instance's use.
func (i *instance) call(ctx context.Context, method string, f func(ctx context.Context) error) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.err != nil {
		return i.err
	}
	if i.c.isClosed() {
		return &Error{Plugin: i.c.name, Role: i.in.Role, Method: method, Err: ErrClosed}
	}
	ctx, cancel := context.WithTimeout(ctx, i.c.opts.Timeout)
	defer cancel()
	err := f(ctx)
	if err == nil {
		return nil
	}
	if !errors.Is(err, ErrMalformed) {
		err = i.c.cause(ctx, err)
	}
	i.err = &Error{Plugin: i.c.name, Role: i.in.Role, Method: method, Err: err}
	return i.err
}

// Close frees the instance in the plugin.
func (i *instance) Close() error {
	if i.c.isClosed() {
		return nil
	}
	return i.call(context.Background(), "Free", func(ctx context.Context) error {
		return i.c.conn.Free(ctx, i.in)
	})
}

type policy struct{ *instance }

var _ sdk.DepthPolicy = (*policy)(nil)

func (p *policy) NextDepth(ctx context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	var d sdk.DepthDecision
	err := p.call(ctx, "NextDepth", func(ctx context.Context) (err error) {
		d, err = p.c.conn.NextDepth(ctx, p.in, last)
		if err == nil && (math.IsNaN(float64(d.MinConf)) || d.MinConf < 0 || d.MinConf > 1) {
			err = fmt.Errorf("%w: min_conf %v outside [0, 1]", ErrMalformed, d.MinConf)
		}
		return err
	})
	return d, err
}

type sampler struct{ *instance }

var _ sdk.Sampler = (*sampler)(nil)

func (s *sampler) Needs() sdk.Needs { return sdk.Needs{TopK: s.in.TopK} }

func (s *sampler) Sample(ctx context.Context, r *sdk.SampleRound) (sdk.SampleResult, error) {
	var res sdk.SampleResult
	err := s.call(ctx, "Sample", func(ctx context.Context) (err error) {
		res, err = s.c.conn.Sample(ctx, s.in, r)
		switch {
		case err != nil:
		case res.Accepted < 0 || res.Accepted > len(r.Draft):
			err = fmt.Errorf("%w: accepted %d of %d draft tokens", ErrMalformed, res.Accepted, len(r.Draft))
		case res.Next < 0:
			err = fmt.Errorf("%w: next token %d", ErrMalformed, res.Next)
		}
		return err
	})
	return res, err
}

type penalty struct{ *instance }

var _ sdk.Penalty = (*penalty)(nil)

func (p *penalty) Window() int { return p.in.Window }

func (p *penalty) Apply(ctx context.Context, rows []sdk.PenaltyRow) error {
	return p.call(ctx, "Apply", func(ctx context.Context) error {
		return p.c.conn.Apply(ctx, p.in, rows)
	})
}

type drafter struct{ in *instance }

var _ sdk.Drafter = (*drafter)(nil)

// Draft asks the plugin; its answer is checked against the request (sdk.CheckDraft).
func (d *drafter) Draft(ctx context.Context, q *sdk.DraftRequest) (sdk.DraftResult, error) {
	var res sdk.DraftResult
	err := d.in.call(ctx, "Draft", func(ctx context.Context) (err error) {
		res, err = d.in.c.conn.Draft(ctx, d.in.in, q)
		if err == nil {
			if cerr := sdk.CheckDraft(q, res); cerr != nil {
				err = fmt.Errorf("%w: %v", ErrMalformed, cerr)
			}
		}
		return err
	})
	return res, err
}

func (d *drafter) Close() error { return d.in.Close() }

// Err is the failure that ended the instance's use, or nil: every later call fails at
// once (the engine turns a drafter off at its first failure, whatever its host).
func (d *drafter) Err() error {
	d.in.mu.Lock()
	defer d.in.mu.Unlock()
	return d.in.err
}

// firstLine shows only the first line of a multi-line error (go-plugin's start errors
// carry a paragraph of advice).
type firstLine struct{ err error }

func (f firstLine) Error() string {
	s, _, _ := strings.Cut(f.err.Error(), "\n")
	return strings.TrimSpace(s)
}

func (f firstLine) Unwrap() error { return f.err }

// lineWriter prefixes every line written through it.
type lineWriter struct {
	w      io.Writer
	prefix string
	mid    bool // inside a line
	n      int  // bytes of the current line written
	mu     sync.Mutex
}

// maxLogLine is how much of one line of plugin output is echoed; the rest of the
// line is dropped (a plugin printing megabytes on one line must not flood the log).
const maxLogLine = 512

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		if !l.mid {
			if _, err := io.WriteString(l.w, l.prefix); err != nil {
				return 0, err
			}
			l.mid, l.n = true, 0
		}
		line := p
		i := bytes.IndexByte(p, '\n')
		if i >= 0 {
			line = p[:i]
		}
		if keep := maxLogLine - l.n; keep > 0 {
			k := min(keep, len(line))
			if _, err := l.w.Write(line[:k]); err != nil {
				return 0, err
			}
			if k < len(line) {
				if _, err := io.WriteString(l.w, " … (line cut)"); err != nil {
					return 0, err
				}
			}
		}
		l.n += len(line)
		if i < 0 {
			return n, nil
		}
		if _, err := l.w.Write([]byte{'\n'}); err != nil {
			return 0, err
		}
		l.mid = false
		p = p[i+1:]
	}
	return n, nil
}
