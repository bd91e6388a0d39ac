package plugins

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/minfer/minfer/sdk"
)

// The built-in drafters (ngram, suffix) run as native Go by default, not in the
// embedded builtin.wasm: a drafter is called in every round it drafts, and Go compiled
// to WebAssembly runs their hash lookups 3-5× slower than natively (a round of the
// suffix drafter: 26 µs through the module, 4.8 µs native; docs/PERFORMANCE.md), which
// on the H200 bed was 10% of a round (issue 22's bound: 2%). They are minfer's own
// code, trusted as builtin.wasm is (its deadline too is checked only when a call
// returns), and a nativeDrafter holds them to the module's other rules.
// WithWasmDrafters (and WithInterruptibleBuiltins) run them in the module instead.

// nativeDrafter is a built-in drafter run natively, held to the rules of the trusted
// WebAssembly host: a call that answers after its deadline is a timeout; a drafter
// that holds more than the declared memory cap ([plugins.NAME] memory_mb) after a call
// has run out of memory; a panic is a trap, not the process's end; and after any
// failure every call fails with the first one's error, naming the plugin and role as
// the host's errors do.
type nativeDrafter struct {
	d        sdk.Drafter
	name     string // the config's name
	timeout  time.Duration
	capBytes int
	err      error
}

var _ sdk.Drafter = (*nativeDrafter)(nil)

// memoryUser is a built-in drafter that says how many bytes it holds.
type memoryUser interface{ MemoryBytes() int }

// Draft implements sdk.Drafter.
func (n *nativeDrafter) Draft(ctx context.Context, q *sdk.DraftRequest) (res sdk.DraftResult, err error) {
	if n.err != nil {
		return sdk.DraftResult{}, n.err
	}
	if err := ctx.Err(); err != nil { // the request was cancelled
		return sdk.DraftResult{}, n.fail("cancelled", err)
	}
	defer func() {
		if r := recover(); r != nil {
			res, err = sdk.DraftResult{}, n.fail("trap", fmt.Errorf("panic: %v", r))
		}
	}()
	start := time.Now()
	res, err = n.d.Draft(ctx, q)
	if err != nil {
		return sdk.DraftResult{}, n.fail("plugin", err)
	}
	if took := time.Since(start); took > n.timeout {
		return sdk.DraftResult{}, n.fail("timeout", fmt.Errorf("answered after %v, deadline %v", took.Round(time.Microsecond), n.timeout))
	}
	if m, ok := n.d.(memoryUser); ok && n.capBytes > 0 {
		if b := m.MemoryBytes(); b > n.capBytes {
			return sdk.DraftResult{}, n.fail("trap", fmt.Errorf("out of memory: it holds %.1f MiB, memory_mb is %d", float64(b)/(1<<20), n.capBytes>>20))
		}
	}
	return res, nil
}

func (n *nativeDrafter) fail(kind string, err error) error {
	n.err = fmt.Errorf("plugin %q %s: %s: %w", n.name, sdk.RoleDrafter, kind, err)
	return n.err
}

// Err is the failure that ended the drafter's use, or nil.
func (n *nativeDrafter) Err() error { return n.err }

// Close releases nothing: a native drafter holds no instance.
func (n *nativeDrafter) Close() error { return nil }

// errNoDrafter is a nativeDrafter's start without a drafter (a BUG of the table).
var errNoDrafter = errors.New("BUG: built-in has no drafter")
