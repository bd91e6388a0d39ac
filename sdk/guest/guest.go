// Package guest turns Go code into an ABI v1 WebAssembly plugin (sdk/ABI.md). A plugin
// is a main package that registers its plugins from an init function:
//
//	package main
//
//	import "github.com/minfer/minfer/sdk/guest"
//
//	func init() { guest.RegisterPolicy("mypolicy", "0.1.0", newPolicy) }
//
//	func main() {} // never called: the module is a reactor
//
// built with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o mypolicy.wasm .
//
// The factory receives the plugin's params table from minfer.toml as a JSON object
// ("{}" when there is none) each time the host starts a sequence on an instance; it
// returns a fresh plugin value. Registration must happen in init: with
// -buildmode=c-shared the module's _initialize runs package initialisers but not main.
//
// The exports themselves live in exports_wasip1.go; the rest of this package (Handler)
// is portable so the ABI can be exercised natively in tests.
package guest

import (
	"context"
	"fmt"

	"github.com/minfer/minfer/sdk"
)

type entry struct {
	info       sdk.Info
	newPolicy  func(params []byte) (sdk.DepthPolicy, error)
	newPenalty func(params []byte) (sdk.Penalty, error)
	newSampler func(params []byte) (sdk.Sampler, error)
	newDrafter func(params []byte) (sdk.Drafter, error)
}

var (
	entries []*entry
	byName  = map[string]*entry{}
)

func register(e *entry) {
	if _, dup := byName[e.info.Name]; dup {
		panic("BUG: guest: plugin registered twice: " + e.info.Name)
	}
	if len(e.info.Name) == 0 || len(e.info.Name) > sdk.MaxNameLen || len(e.info.Version) > sdk.MaxNameLen {
		panic("BUG: guest: bad plugin name or version: " + e.info.Name)
	}
	entries = append(entries, e)
	byName[e.info.Name] = e
}

// RegisterPolicy registers a depth policy under name (lower-case [a-z0-9._-]).
func RegisterPolicy(name, version string, f func(params []byte) (sdk.DepthPolicy, error)) {
	register(&entry{info: sdk.Info{Name: name, Version: version, Roles: []sdk.Role{sdk.RolePolicy}}, newPolicy: f})
}

// RegisterPenalty registers a penalty under name.
func RegisterPenalty(name, version string, f func(params []byte) (sdk.Penalty, error)) {
	register(&entry{info: sdk.Info{Name: name, Version: version, Roles: []sdk.Role{sdk.RolePenalty}}, newPenalty: f})
}

// RegisterSampler registers a sampler under name. needs is what the info record
// declares; an instance reports its own Needs() after init.
func RegisterSampler(name, version string, needs sdk.Needs, f func(params []byte) (sdk.Sampler, error)) {
	register(&entry{info: sdk.Info{Name: name, Version: version, Roles: []sdk.Role{sdk.RoleSampler}, Needs: needs}, newSampler: f})
}

// RegisterDrafter registers a drafter under name: a fresh value per sequence, told
// the tokens appended since its last call (see sdk.DraftRequest).
func RegisterDrafter(name, version string, f func(params []byte) (sdk.Drafter, error)) {
	register(&entry{info: sdk.Info{Name: name, Version: version, Roles: []sdk.Role{sdk.RoleDrafter}}, newDrafter: f})
}

// DeclareParams declares the keys of the params object that the registered plugin
// name reads (ABI v1.3), the role settings it wants merged in among them (draft_max,
// temperature, …; sdk/ABI.md lists them). The host then merges only those settings
// and refuses a [plugins.NAME] params key outside keys, naming it, so a misspelt key
// fails at start instead of being ignored. Without a declaration the plugin is offered
// every setting and every key. Call it from init, after the Register call.
func DeclareParams(name string, keys ...string) {
	e := byName[name]
	if e == nil {
		panic("BUG: guest: DeclareParams for a plugin not registered: " + name)
	}
	if err := sdk.CheckParamNames(keys); err != nil {
		panic("BUG: guest: DeclareParams " + name + ": " + err.Error())
	}
	e.info.Params, e.info.ParamsDeclared = append([]string(nil), keys...), true
}

// Registered returns the info of every registered plugin, in registration order.
func Registered() []sdk.Info {
	out := make([]sdk.Info, len(entries))
	for i, e := range entries {
		out[i] = e.info
	}
	return out
}

// Handler is one plugin instance behind the ABI: it decodes requests, calls the plugin
// and encodes responses. Returned byte slices are owned by the Handler and valid until
// its next call. A panic in plugin code becomes an error.
type Handler struct {
	name    string
	policy  sdk.DepthPolicy
	penalty sdk.Penalty
	sampler sdk.Sampler
	drafter sdk.Drafter

	resp    []byte
	outcome sdk.RoundOutcome
	rows    []sdk.PenaltyRow
	round   sdk.SampleRound
	draftQ  sdk.DraftRequest
}

// Info returns the encoded info record of the registered plugins.
func (h *Handler) Info() []byte {
	h.resp = sdk.AppendInfo(h.resp[:0], Registered())
	return h.resp
}

// Init starts a fresh plugin from an encoded init request, discarding any previous one.
func (h *Handler) Init(req []byte) (err error) {
	defer catch(&err)
	name, params, err := sdk.DecodeInitRequest(req)
	if err != nil {
		return err
	}
	e, ok := byName[name]
	if !ok {
		return fmt.Errorf("no plugin %q in this module", name)
	}
	if len(params) == 0 {
		params = []byte("{}")
	}
	*h = Handler{name: name, resp: h.resp}
	switch {
	case e.newPolicy != nil:
		h.policy, err = e.newPolicy(params)
	case e.newPenalty != nil:
		h.penalty, err = e.newPenalty(params)
	case e.newSampler != nil:
		h.sampler, err = e.newSampler(params)
	case e.newDrafter != nil:
		h.drafter, err = e.newDrafter(params)
	}
	if err != nil {
		*h = Handler{resp: h.resp}
		return err
	}
	return nil
}

// PolicyNext answers minfer_policy_next.
func (h *Handler) PolicyNext(req []byte) (resp []byte, err error) {
	defer catch(&err)
	if h.policy == nil {
		return nil, h.notRole(sdk.RolePolicy)
	}
	if err := sdk.DecodePolicyRequest(req, &h.outcome); err != nil {
		return nil, err
	}
	d, err := h.policy.NextDepth(context.Background(), h.outcome)
	if err != nil {
		return nil, err
	}
	h.resp = sdk.AppendPolicyResponse(h.resp[:0], d)
	return h.resp, nil
}

// PenaltyWindow answers minfer_penalty_window.
func (h *Handler) PenaltyWindow() (n int, err error) {
	defer catch(&err)
	if h.penalty == nil {
		return 0, h.notRole(sdk.RolePenalty)
	}
	if n = h.penalty.Window(); n < 0 {
		return 0, fmt.Errorf("plugin %q: negative window %d", h.name, n)
	}
	return n, nil
}

// PenaltyApply answers minfer_penalty_apply.
func (h *Handler) PenaltyApply(req []byte) (resp []byte, err error) {
	defer catch(&err)
	if h.penalty == nil {
		return nil, h.notRole(sdk.RolePenalty)
	}
	if h.rows, err = sdk.DecodePenaltyRequest(req, h.rows); err != nil {
		return nil, err
	}
	if err := h.penalty.Apply(context.Background(), h.rows); err != nil {
		return nil, err
	}
	h.resp = sdk.AppendPenaltyResponse(h.resp[:0], h.rows)
	return h.resp, nil
}

// SamplerNeeds answers minfer_sampler_needs.
func (h *Handler) SamplerNeeds() (k int, err error) {
	defer catch(&err)
	if h.sampler == nil {
		return 0, h.notRole(sdk.RoleSampler)
	}
	return h.sampler.Needs().TopK, nil
}

// Sample answers minfer_sample.
func (h *Handler) Sample(req []byte) (resp []byte, err error) {
	defer catch(&err)
	if h.sampler == nil {
		return nil, h.notRole(sdk.RoleSampler)
	}
	if err := sdk.DecodeSampleRequest(req, &h.round); err != nil {
		return nil, err
	}
	res, err := h.sampler.Sample(context.Background(), &h.round)
	if err != nil {
		return nil, err
	}
	h.resp = sdk.AppendSampleResponse(h.resp[:0], res)
	return h.resp, nil
}

// Draft answers minfer_draft. The drafter's answer is checked (sdk.CheckDraft) before
// it is encoded, so a guest's own bug is reported as its error, not as a malformed
// response.
func (h *Handler) Draft(req []byte) (resp []byte, err error) {
	defer catch(&err)
	if h.drafter == nil {
		return nil, h.notRole(sdk.RoleDrafter)
	}
	if err := sdk.DecodeDraftRequest(req, &h.draftQ); err != nil {
		return nil, err
	}
	res, err := h.drafter.Draft(context.Background(), &h.draftQ)
	if err != nil {
		return nil, err
	}
	if err := sdk.CheckDraft(&h.draftQ, res); err != nil {
		return nil, err
	}
	h.resp = sdk.AppendDraftResponse(h.resp[:0], res)
	return h.resp, nil
}

func (h *Handler) notRole(r sdk.Role) error {
	if h.name == "" {
		return fmt.Errorf("called before a successful init")
	}
	return fmt.Errorf("plugin %q is not a %s", h.name, r)
}

func catch(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("panic: %v", r)
	}
}
