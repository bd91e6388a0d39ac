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
}

// WriteList writes every plugin reg declares (name, roles, version, source, ABI
// version, checksum) as a table, or with asJSON as a JSON array of ListRow.
func WriteList(w io.Writer, reg *Registry, asJSON bool) error {
	var rows []ListRow
	for _, name := range reg.Names() {
		info, _ := reg.Info(name)
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
		rows = append(rows, r)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLES\tVERSION\tSOURCE\tABI\tSHA256")
	for _, r := range rows {
		sum := r.Checksum
		if len(sum) > 12 {
			sum = sum[:12]
		}
		abi := r.ABI
		if abi == "" {
			abi = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, strings.Join(r.Roles, ","), r.Version, r.Source, abi, sum)
	}
	return tw.Flush()
}
