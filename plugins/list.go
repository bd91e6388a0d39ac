package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/sdk"
)

// ListRow is one declared plugin as minfer plugin list shows it.
type ListRow struct {
	Name     string   `json:"name"`
	Roles    []string `json:"roles"`
	Version  string   `json:"version"`
	Source   string   `json:"source"`
	ABI      string   `json:"abi,omitempty"`
	Checksum string   `json:"sha256,omitempty"`
	TopK     *int     `json:"top_k,omitempty"`
	// Params are the keys the plugin declares it reads (ABI v1.3, a process plugin's
	// Params); nil (left out of the JSON) when it declares none, [] when it declares
	// that it reads none.
	Params *[]string `json:"params,omitempty"`
	// Error is why the plugin did not load (ListDeclared); the fields after Source are
	// then empty.
	Error string `json:"error,omitempty"`
}

// ParamsLabel says which params keys a plugin declares it reads, as plugin list and
// plugin check print them: the keys (every built-in declares its own), "none" (it
// declares that it reads none) or "-" (it declares nothing: it is offered every setting
// of its roles and every key).
func ParamsLabel(info Info) string {
	switch {
	case !info.ParamsDeclared:
		return "-"
	case len(info.Params) == 0:
		return "none"
	}
	return strings.Join(info.Params, ",")
}

// DeclaredParams is the params declaration of info as the JSON of plugin list and
// plugin check carries it: nil (left out) when the plugin declares nothing, a copy of
// its keys ([] when it declares that it reads none) otherwise.
func DeclaredParams(info Info) *[]string {
	if !info.ParamsDeclared {
		return nil
	}
	keys := append([]string{}, info.Params...)
	return &keys
}

// WriteList writes every plugin reg declares (name, roles, version, source, ABI
// version, checksum, declared params: ParamsLabel) as a table, or with asJSON as a
// JSON array of ListRow.
func WriteList(w io.Writer, reg *Registry, asJSON bool) error {
	return WriteRows(w, Rows(reg), asJSON)
}

// Rows returns a ListRow for every plugin reg declares, in name order.
func Rows(reg *Registry) []ListRow {
	var rows []ListRow
	for _, name := range reg.Names() {
		info, _ := reg.Info(name)
		rows = append(rows, row(name, info))
	}
	return rows
}

func row(name string, info Info) ListRow {
	r := ListRow{Name: name, Version: info.Version, Source: info.Source, Checksum: info.Checksum, Params: DeclaredParams(info)}
	for _, role := range info.Roles {
		r.Roles = append(r.Roles, string(role))
	}
	switch kind, _, _ := (config.Plugin{Source: info.Source}).SourceKind(); {
	case info.ABIMajor > 0:
		r.ABI = fmt.Sprintf("v%d.%d", info.ABIMajor, info.ABIMinor)
	case kind == config.SourceBuiltin:
		r.ABI = "native" // run as Go, not through the ABI (see native.go)
	}
	if info.Has(sdk.RoleSampler) {
		k := info.Needs.TopK
		r.TopK = &k
	}
	return r
}

// ListDeclared loads every plugin of decls (keyed by config name) as NewRegistry does
// and returns a ListRow for each, in name order. Where the registry as a whole fails to
// load, each plugin is loaded on its own (the built-ins together first), so that the
// rows say which plugins load and which do not: a failed one's row holds its Source and
// its Error, and the error returned counts and names them. log and opts are
// NewRegistry's.
func ListDeclared(ctx context.Context, decls map[string]config.Plugin, log io.Writer, opts ...Option) ([]ListRow, error) {
	if reg, err := NewRegistry(ctx, decls, log, opts...); err == nil {
		defer reg.Close()
		return Rows(reg), nil
	}
	builtins := map[string]config.Plugin{}
	var others []string
	for name, d := range decls {
		if kind, _, err := d.WithDefaults(name).SourceKind(); err == nil && kind == config.SourceBuiltin {
			builtins[name] = d
		} else {
			others = append(others, name)
		}
	}
	var rows []ListRow
	load := func(group map[string]config.Plugin) error {
		reg, err := NewRegistry(ctx, group, log, opts...)
		if err != nil {
			return err
		}
		defer reg.Close()
		rows = append(rows, Rows(reg)...)
		return nil
	}
	var failed []string
	one := func(name string) {
		if err := load(map[string]config.Plugin{name: decls[name]}); err != nil {
			where := decls[name].Where(name)
			msg := strings.TrimPrefix(err.Error(), "plugins: "+where+": ")
			rows = append(rows, ListRow{Name: name, Roles: []string{}, Source: decls[name].WithDefaults(name).Source, Error: msg})
			failed = append(failed, where+": "+msg)
		}
	}
	if load(builtins) != nil {
		for name := range builtins {
			one(name)
		}
	}
	for _, name := range others {
		one(name)
	}
	slices.SortFunc(rows, func(a, b ListRow) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(failed)
	return rows, fmt.Errorf("plugins: %d of %d declared plugins failed to load: %s", len(failed), len(decls), strings.Join(failed, "; "))
}

// WriteRows writes rows as a table (a row that failed to load shows its error in place
// of its roles and what follows them), or with asJSON as a JSON array.
func WriteRows(w io.Writer, rows []ListRow, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLES\tVERSION\tSOURCE\tABI\tSHA256\tPARAMS")
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t%s\t-\t-\tnot loaded: %s\n", r.Name, r.Source, r.Error)
			continue
		}
		sum := r.Checksum
		if len(sum) > 12 {
			sum = sum[:12]
		}
		abi := r.ABI
		if abi == "" {
			abi = "-"
		}
		label := "-"
		if r.Params != nil {
			label = ParamsLabel(Info{Params: *r.Params, ParamsDeclared: true})
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, strings.Join(r.Roles, ","), r.Version, r.Source, abi, sum, label)
	}
	return tw.Flush()
}
