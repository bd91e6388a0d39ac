package wasm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/minfer/minfer/sdk"
)

// CallOptions configures one plugin handle. Zero fields take the module's Options.
type CallOptions struct {
	Timeout time.Duration // per-call deadline
	// Config is the name the config declares the plugin under ([plugins.NAME]); errors
	// name it beside the module's own name for the plugin when the two differ.
	Config string
}

// handle is the state shared by the three role handles: one instance running one
// plugin for one sequence.
type handle struct {
	m       *Module
	in      *instance
	name    string
	role    sdk.Role
	timeout time.Duration
	fn      api.Function
	req     []byte
	err     error // first failure; every later call returns it
	config  string
}

// named sets the config's name on err (a *Error) and returns it.
func (h *handle) named(err error) error {
	var e *Error
	if h.config != "" && errors.As(err, &e) {
		e.Config = h.config
	}
	return err
}

func (m *Module) open(ctx context.Context, name string, role sdk.Role, params []byte, co CallOptions) (*handle, error) {
	h := &handle{m: m, name: name, role: role, timeout: co.Timeout, config: co.Config}
	info, ok := m.Lookup(name)
	if !ok {
		return nil, h.named(&Error{Plugin: name, Role: role, Kind: "load", Err: fmt.Errorf("module %s has no plugin %q", m.opts.Name, name)})
	}
	if !info.Has(role) {
		return nil, h.named(&Error{Plugin: name, Role: role, Kind: "load", Err: fmt.Errorf("plugin declares roles %v, not %s", info.Roles, role)})
	}
	if h.timeout <= 0 {
		h.timeout = m.opts.Timeout
	}
	in, err := m.acquire(ctx)
	if err != nil {
		return nil, err
	}
	if err := in.start(ctx, name, role, params, setupTimeout(h.timeout)); err != nil {
		m.release(ctx, in)
		return nil, h.named(err)
	}
	h.in = in
	h.fn = in.fn[roleSyms[role][len(roleSyms[role])-1]]
	return h, nil
}

// call sends req and returns the response view.
func (h *handle) call(ctx context.Context, req []byte) ([]byte, error) {
	if h.err != nil {
		return nil, h.err
	}
	if h.in == nil {
		return nil, &Error{Plugin: h.name, Role: h.role, Kind: "load", Err: errors.New("handle closed")}
	}
	resp, err := h.in.callNamed(ctx, h.fn, h.name, h.role, req, h.timeout, true)
	if err != nil {
		h.err = h.named(err)
		err = h.err
	}
	return resp, err
}

// malformed records a bad response.
func (h *handle) malformed(err error) error {
	h.in.dead = true
	h.err = h.named(&Error{Plugin: h.name, Role: h.role, Kind: "malformed", Err: err})
	return h.err
}

// scalar calls a () -> i32 export once (window, needs).
func (h *handle) scalar(ctx context.Context, sym string) (int, error) {
	v, err := h.in.callScalar(ctx, h.in.fn[sym], h.role, setupTimeout(h.timeout))
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Plugin = h.name
		}
		return 0, h.named(err)
	}
	if v < 0 {
		return 0, h.named(h.in.fail(h.name, h.role, "plugin", fmt.Errorf("%s: %s", sym, h.in.lastError(ctx, setupTimeout(h.timeout)))))
	}
	return int(v), nil
}

// Close gives the instance back to the pool (or discards it after a failure).
func (h *handle) Close() error {
	if h.in != nil {
		h.m.release(context.Background(), h.in)
		h.in = nil
	}
	return nil
}

// Err is the failure that ended the handle's use, or nil.
func (h *handle) Err() error { return h.err }

// Policy is a DepthPolicy running in a module instance.
type Policy struct{ h *handle }

var _ sdk.DepthPolicy = (*Policy)(nil)

// Policy starts plugin name as a depth policy with its JSON params.
func (m *Module) Policy(ctx context.Context, name string, params []byte, co CallOptions) (*Policy, error) {
	h, err := m.open(ctx, name, sdk.RolePolicy, params, co)
	if err != nil {
		return nil, err
	}
	return &Policy{h}, nil
}

// NextDepth implements sdk.DepthPolicy.
func (p *Policy) NextDepth(ctx context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	p.h.req = sdk.AppendPolicyRequest(p.h.req[:0], &last)
	resp, err := p.h.call(ctx, p.h.req)
	if err != nil {
		return sdk.DepthDecision{}, err
	}
	d, err := sdk.DecodePolicyResponse(resp)
	if err != nil {
		return sdk.DepthDecision{}, p.h.malformed(err)
	}
	return d, nil
}

// Close returns the instance to the pool.
func (p *Policy) Close() error { return p.h.Close() }

// Err is the failure that ended this handle's use, or nil.
func (p *Policy) Err() error { return p.h.Err() }

// Sampler is a Sampler running in a module instance.
type Sampler struct {
	h     *handle
	needs sdk.Needs
}

var _ sdk.Sampler = (*Sampler)(nil)

// Sampler starts plugin name as a sampler with its JSON params.
func (m *Module) Sampler(ctx context.Context, name string, params []byte, co CallOptions) (*Sampler, error) {
	h, err := m.open(ctx, name, sdk.RoleSampler, params, co)
	if err != nil {
		return nil, err
	}
	k, err := h.scalar(ctx, sdk.ExportSamplerNeeds)
	if err != nil {
		h.Close()
		return nil, err
	}
	return &Sampler{h: h, needs: sdk.Needs{TopK: k}}, nil
}

// Needs implements sdk.Sampler (as the instance reported after init).
func (s *Sampler) Needs() sdk.Needs { return s.needs }

// Sample implements sdk.Sampler.
func (s *Sampler) Sample(ctx context.Context, r *sdk.SampleRound) (sdk.SampleResult, error) {
	s.h.req = sdk.AppendSampleRequest(s.h.req[:0], r)
	resp, err := s.h.call(ctx, s.h.req)
	if err != nil {
		return sdk.SampleResult{}, err
	}
	res, err := sdk.DecodeSampleResponse(resp, r)
	if err != nil {
		return sdk.SampleResult{}, s.h.malformed(err)
	}
	return res, nil
}

// Close returns the instance to the pool.
func (s *Sampler) Close() error { return s.h.Close() }

// Err is the failure that ended this handle's use, or nil.
func (s *Sampler) Err() error { return s.h.Err() }

// Penalty is a Penalty running in a module instance.
type Penalty struct {
	h      *handle
	window int
}

var _ sdk.Penalty = (*Penalty)(nil)

// Penalty starts plugin name as a penalty with its JSON params.
func (m *Module) Penalty(ctx context.Context, name string, params []byte, co CallOptions) (*Penalty, error) {
	h, err := m.open(ctx, name, sdk.RolePenalty, params, co)
	if err != nil {
		return nil, err
	}
	w, err := h.scalar(ctx, sdk.ExportPenaltyWindow)
	if err != nil {
		h.Close()
		return nil, err
	}
	return &Penalty{h: h, window: w}, nil
}

// Window implements sdk.Penalty (as the instance reported after init).
func (p *Penalty) Window() int { return p.window }

// Apply implements sdk.Penalty. On error rows are unchanged.
func (p *Penalty) Apply(ctx context.Context, rows []sdk.PenaltyRow) error {
	p.h.req = sdk.AppendPenaltyRequest(p.h.req[:0], rows)
	resp, err := p.h.call(ctx, p.h.req)
	if err != nil {
		return err
	}
	if err := sdk.DecodePenaltyResponse(resp, rows); err != nil {
		return p.h.malformed(err)
	}
	return nil
}

// Close returns the instance to the pool.
func (p *Penalty) Close() error { return p.h.Close() }

// Err is the failure that ended this handle's use, or nil.
func (p *Penalty) Err() error { return p.h.Err() }

// Drafter is a Drafter running in a module instance.
type Drafter struct {
	h   *handle
	res sdk.DraftResult
}

var _ sdk.Drafter = (*Drafter)(nil)

// Drafter starts plugin name as a drafter with its JSON params.
func (m *Module) Drafter(ctx context.Context, name string, params []byte, co CallOptions) (*Drafter, error) {
	h, err := m.open(ctx, name, sdk.RoleDrafter, params, co)
	if err != nil {
		return nil, err
	}
	return &Drafter{h: h}, nil
}

// Draft implements sdk.Drafter. The result's slices are reused by the next call.
func (d *Drafter) Draft(ctx context.Context, q *sdk.DraftRequest) (sdk.DraftResult, error) {
	d.h.req = sdk.AppendDraftRequest(d.h.req[:0], q)
	resp, err := d.h.call(ctx, d.h.req)
	if err != nil {
		return sdk.DraftResult{}, err
	}
	if err := sdk.DecodeDraftResponse(resp, q, &d.res); err != nil {
		return sdk.DraftResult{}, d.h.malformed(err)
	}
	return d.res, nil
}

// Close returns the instance to the pool.
func (d *Drafter) Close() error { return d.h.Close() }

// Err is the failure that ended this handle's use, or nil.
func (d *Drafter) Err() error { return d.h.Err() }
