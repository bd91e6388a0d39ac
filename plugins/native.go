package plugins

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/minfer/minfer/sdk"
)

// The built-ins run as native Go by default, not in the embedded builtin.wasm: each is
// called in every round, and Go compiled to WebAssembly runs them many times slower
// than natively, the host's copies aside (a round of the suffix drafter: 12.7-26.4 µs
// through the module, 2.3-5.5 µs native; the adaptive policy 31 µs against 0.3 µs;
// docs/PERFORMANCE.md). On the H200 bed the drafter's calls were 10% of a round and
// every plugin call together 7.7-14.2% (issue 22's bound: 2%). They are minfer's own
// code, trusted as builtin.wasm is (whose deadline too is checked only when a call
// returns), and a guard holds them to the module's other rules. WithWasmBuiltins (and
// WithInterruptibleBuiltins) run them in the module instead, through the ABI as a
// user's plugin runs.

// guard holds a native built-in to the rules of the trusted WebAssembly host: a call
// that answers after its deadline is a timeout; a panic is a trap, not the process's
// end; and after any failure every call fails with the first one's error, naming the
// plugin and role as the host's errors do.
type guard struct {
	name    string // the config's name
	role    sdk.Role
	timeout time.Duration
	err     error
}

// call runs f under the guard's rules.
func (g *guard) call(ctx context.Context, f func() error) (err error) {
	if g.err != nil {
		return g.err
	}
	if err := ctx.Err(); err != nil { // the request was cancelled
		return g.fail("cancelled", err)
	}
	defer func() {
		if r := recover(); r != nil {
			err = g.fail("trap", fmt.Errorf("panic: %v", r))
		}
	}()
	start := time.Now()
	if err := f(); err != nil {
		var t trap
		if errors.As(err, &t) {
			return g.fail("trap", t.error)
		}
		return g.fail("plugin", err)
	}
	if took := time.Since(start); took > g.timeout {
		return g.fail("timeout", fmt.Errorf("answered after %v, deadline %v", took.Round(time.Microsecond), g.timeout))
	}
	return nil
}

func (g *guard) fail(kind string, err error) error {
	g.err = fmt.Errorf("plugin %q %s: %s: %w", g.name, g.role, kind, err)
	return g.err
}

// Err is the failure that ended the plugin's use, or nil.
func (g *guard) Err() error { return g.err }

// Close releases nothing: a native built-in holds no instance.
func (g *guard) Close() error { return nil }

// nativePolicy, nativeSampler and nativePenalty are built-ins of those roles run
// natively under a guard.
type nativePolicy struct {
	guard
	p sdk.DepthPolicy
}

func (n *nativePolicy) NextDepth(ctx context.Context, last sdk.RoundOutcome) (d sdk.DepthDecision, err error) {
	err = n.call(ctx, func() (err error) { d, err = n.p.NextDepth(ctx, last); return err })
	if err != nil {
		return sdk.DepthDecision{}, err
	}
	return d, nil
}

type nativeSampler struct {
	guard
	s sdk.Sampler
}

func (n *nativeSampler) Needs() sdk.Needs { return n.s.Needs() }

func (n *nativeSampler) Sample(ctx context.Context, r *sdk.SampleRound) (res sdk.SampleResult, err error) {
	err = n.call(ctx, func() (err error) { res, err = n.s.Sample(ctx, r); return err })
	if err != nil {
		return sdk.SampleResult{}, err
	}
	return res, nil
}

type nativePenalty struct {
	guard
	p sdk.Penalty
}

func (n *nativePenalty) Window() int { return n.p.Window() }

func (n *nativePenalty) Apply(ctx context.Context, rows []sdk.PenaltyRow) error {
	return n.call(ctx, func() error { return n.p.Apply(ctx, rows) })
}

var (
	_ sdk.DepthPolicy = (*nativePolicy)(nil)
	_ sdk.Sampler     = (*nativeSampler)(nil)
	_ sdk.Penalty     = (*nativePenalty)(nil)
	_ sdk.Drafter     = (*nativeDrafter)(nil)
)

// nativeDrafter is a built-in drafter run natively under a guard, which also holds it
// to the declared memory cap ([plugins.NAME] memory_mb): a drafter that holds more
// after a call has run out of memory, as it would in the module.
type nativeDrafter struct {
	guard
	d        sdk.Drafter
	capBytes int
}

// memoryUser is a built-in drafter that says how many bytes it holds.
type memoryUser interface{ MemoryBytes() int }

// Draft implements sdk.Drafter.
func (n *nativeDrafter) Draft(ctx context.Context, q *sdk.DraftRequest) (res sdk.DraftResult, err error) {
	err = n.call(ctx, func() (err error) {
		if res, err = n.d.Draft(ctx, q); err != nil {
			return err
		}
		if m, ok := n.d.(memoryUser); ok && n.capBytes > 0 {
			if b := m.MemoryBytes(); b > n.capBytes {
				return trap{fmt.Errorf("out of memory: it holds %.1f MiB, memory_mb is %d", float64(b)/(1<<20), n.capBytes>>20)}
			}
		}
		return nil
	})
	if err != nil {
		return sdk.DraftResult{}, err
	}
	return res, nil
}

// trap is a failure of a native built-in that the module would have trapped at (not
// the plugin's own error).
type trap struct{ error }

// errNoRole is a native built-in started in a role it lacks (a BUG of the table).
var errNoRole = errors.New("BUG: the built-in lacks the role")
