package specbench

import (
	"strings"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine/bench"
	"github.com/minfer/minfer/internal/usage"
	"github.com/minfer/minfer/sdk"
)

// Rows makes the table's rows: one per depth, then one per depth policy of
// policyList (comma-separated names declared in cfg, or sources, which it declares in
// cfg as the --policy flag of run does). cfg's own policy is left as it was.
func Rows(cfg *config.Config, depths []config.Depth, policyList string) ([]bench.Row, error) {
	var rows []bench.Row
	for _, d := range depths {
		rows = append(rows, bench.Row{Label: d.String(), Depth: d})
	}
	if policyList == "" {
		return rows, nil
	}
	configured := cfg.Spec.Policy
	defer func() { cfg.Spec.Policy = configured }()
	for _, arg := range strings.Split(policyList, ",") {
		arg = strings.TrimSpace(arg)
		if arg == "" {
			return nil, usage.Errorf("specbench: --policies %q: an empty name", policyList)
		}
		if err := cfg.UsePluginFlag("--policies", sdk.RolePolicy, arg); err != nil {
			return nil, usage.Errorf("specbench: %v", err)
		}
		rows = append(rows, bench.Row{Label: "auto:" + arg, Depth: config.DepthAuto, Policy: cfg.Spec.Policy})
	}
	return rows, nil
}

// DrafterRows appends the rows of drafterList (see the usage): drafter:model, one per
// drafter plugin (declared in cfg, or a source, which it declares as --drafter does),
// and drafter:auto (the draft model and every plugin listed, or cfg's [spec] drafter
// when the list names none). cfg's own [spec] drafter is left as it was.
func DrafterRows(cfg *config.Config, rows []bench.Row, drafterList string) ([]bench.Row, error) {
	if drafterList == "" {
		return rows, nil
	}
	configured := cfg.Spec.Drafter
	defer func() { cfg.Spec.Drafter = configured }()
	var plugins []string
	auto := false
	for _, arg := range strings.Split(drafterList, ",") {
		switch arg = strings.TrimSpace(arg); arg {
		case "":
			return nil, usage.Errorf("specbench: --drafters %q: an empty name", drafterList)
		case "model":
			if cfg.Draft.Path == "" {
				return nil, usage.Errorf("specbench: --drafters model: no draft model (give --draft DRAFT)")
			}
			rows = append(rows, bench.Row{Label: "drafter:model", Depth: config.DepthAuto, Drafter: "-"})
		case "auto":
			auto = true
		default:
			if err := cfg.UsePluginFlag("--drafters", sdk.RoleDrafter, arg); err != nil {
				return nil, usage.Errorf("specbench: %v", err)
			}
			plugins = append(plugins, cfg.Spec.Drafter)
			rows = append(rows, bench.Row{Label: "drafter:" + arg, Depth: config.DepthAuto, Drafter: cfg.Spec.Drafter, NoDraftModel: true})
		}
	}
	if auto {
		all := strings.Join(plugins, ",")
		if all == "" {
			all = configured
		}
		if all == "" {
			all = "-"
		}
		rows = append(rows, bench.Row{Label: "drafter:auto", Depth: config.DepthAuto, Drafter: all})
	}
	return rows, nil
}

// ParseDepths reads "0,1,2,auto".
func ParseDepths(s string) ([]config.Depth, error) {
	var out []config.Depth
	for _, p := range strings.Split(s, ",") {
		var d config.Depth
		if err := d.UnmarshalText([]byte(strings.TrimSpace(p))); err != nil {
			return nil, usage.Errorf("specbench: --depths: %v", err)
		}
		out = append(out, d)
	}
	return out, nil
}
