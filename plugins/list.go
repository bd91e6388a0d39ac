package plugins

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

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
	var rows []ListRow
	var infos []Info
	for _, name := range reg.Names() {
		info, _ := reg.Info(name)
		infos = append(infos, info)
		r := ListRow{Name: name, Version: info.Version, Source: info.Source, Checksum: info.Checksum}
		for _, role := range info.Roles {
			r.Roles = append(r.Roles, string(role))
		}
		if info.ABIMajor > 0 {
			r.ABI = fmt.Sprintf("v%d.%d", info.ABIMajor, info.ABIMinor)
		}
		if info.Has(sdk.RoleSampler) {
			k := info.Needs.TopK
			r.TopK = &k
		}
		r.Params = DeclaredParams(info)
		rows = append(rows, r)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLES\tVERSION\tSOURCE\tABI\tSHA256\tPARAMS")
	for i, r := range rows {
		sum := r.Checksum
		if len(sum) > 12 {
			sum = sum[:12]
		}
		abi := r.ABI
		if abi == "" {
			abi = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, strings.Join(r.Roles, ","), r.Version, r.Source, abi, sum, ParamsLabel(infos[i]))
	}
	return tw.Flush()
}
