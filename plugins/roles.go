package plugins

import (
	"context"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/sdk"
)

// Roles are one request's plugin instances, as Registry.Roles builds them. Close
// releases them (back to their pools, or their processes); a Roles is used by one
// request at a time.
type Roles struct {
	Sampler sdk.Sampler
	Penalty sdk.Penalty     // nil when [sampling] penalty names none
	Policy  sdk.DepthPolicy // nil unless speculative
	// PolicyName and PolicyVersion are the configured policy's name and declared
	// version (the server reports them).
	PolicyName, PolicyVersion string
	// Drafters are the [spec] drafter plugins' instances (nil unless speculative),
	// DrafterNames their names, in the configured order.
	Drafters     []sdk.Drafter
	DrafterNames []string
	owned        []any
}

// Close releases every instance; a second Close does nothing.
func (r *Roles) Close() {
	for _, v := range r.owned {
		Release(v)
	}
	r.owned = nil
}

// RolesOptions are the per-command parts of role assembly.
type RolesOptions struct {
	// Spec asks for a depth policy and the [spec] drafter plugins (the command has a
	// draft model, or drafters are configured).
	Spec bool
	// Tracer, when set, records every speculative round of the policy.
	Tracer *Tracer
}

// Roles starts the plugin instances of one request the way run, serve and specbench
// all use them: the sampler cfg names, the penalty (when one is configured) and, with
// o.Spec, the depth policy and the drafters, each with the parameters cfg gives it
// (Params: its [plugins.NAME] params over the settings of its roles it reads); the
// policy is wrapped in the [spec] fallback when one is configured, then in o.Tracer.
// An error names the plugin; instances started before it are released.
func (r *Registry) Roles(ctx context.Context, cfg *config.Config, o RolesOptions) (*Roles, error) {
	rs := &Roles{}
	params := func(name string) (map[string]any, error) { return r.Params(cfg, name) }
	fail := func(err error) (*Roles, error) { rs.Close(); return nil, err }
	name := cfg.Sampling.SamplerName()
	ov, err := params(name)
	if err != nil {
		return fail(err)
	}
	if rs.Sampler, _, err = r.Sampler(ctx, name, ov); err != nil {
		return fail(err)
	}
	rs.owned = append(rs.owned, rs.Sampler)
	if name := cfg.Sampling.Penalty; name != "" {
		if ov, err = params(name); err != nil {
			return fail(err)
		}
		if rs.Penalty, _, err = r.Penalty(ctx, name, ov); err != nil {
			return fail(err)
		}
		rs.owned = append(rs.owned, rs.Penalty)
	}
	if !o.Spec {
		return rs, nil
	}
	rs.PolicyName = cfg.Spec.PolicyName()
	if ov, err = params(rs.PolicyName); err != nil {
		return fail(err)
	}
	var info Info
	if rs.Policy, info, err = r.Policy(ctx, rs.PolicyName, ov); err != nil {
		return fail(err)
	}
	rs.PolicyVersion = info.Version
	rs.owned = append(rs.owned, rs.Policy)
	if fb := cfg.Spec.Fallback; fb != "" {
		if ov, err = params(fb); err != nil {
			return fail(err)
		}
		fp, _, err := r.Policy(ctx, fb, ov)
		if err != nil {
			return fail(err)
		}
		rs.owned = append(rs.owned, fp)
		rs.Policy = &fallbackPolicy{DepthPolicy: rs.Policy, fallback: fp, name: rs.PolicyName, fbName: fb, log: r.log}
	}
	// the config's floors hold for every policy, which need not read them (sdk/ABI.md)
	rs.Policy = WithFloors(rs.Policy, SpecFloors(cfg))
	if o.Tracer != nil {
		rs.Policy = o.Tracer.Wrap(rs.Policy, rs.PolicyName)
	}
	for _, name := range cfg.Spec.DrafterNames() {
		if ov, err = params(name); err != nil {
			return fail(err)
		}
		d, _, err := r.Drafter(ctx, name, ov)
		if err != nil {
			return fail(err)
		}
		rs.owned = append(rs.owned, d)
		rs.Drafters, rs.DrafterNames = append(rs.Drafters, d), append(rs.DrafterNames, name)
	}
	return rs, nil
}
