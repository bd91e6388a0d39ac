package check

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/minfer/minfer/plugins"
	"github.com/minfer/minfer/sdk"
)

// Failed counts the checks that failed.
func Failed(results []CheckResult) int {
	n := 0
	for _, r := range results {
		if r.Err != nil {
			n++
		}
	}
	return n
}

// WriteJSON writes the checks as a JSON array of {plugin, role, check, ok, error, note}.
func WriteJSON(w io.Writer, results []CheckResult) error {
	type jr struct {
		Plugin string `json:"plugin"`
		Role   string `json:"role"`
		Check  string `json:"check"`
		OK     bool   `json:"ok"`
		Error  string `json:"error,omitempty"`
		Note   string `json:"note,omitempty"`
	}
	var out []jr
	for _, r := range results {
		j := jr{Plugin: r.Plugin, Role: string(r.Role), Check: r.Name, OK: r.Err == nil, Note: r.Note}
		if r.Err != nil {
			j.Error = r.Err.Error()
		}
		out = append(out, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// WriteLimits writes the limits the checks ran under, as minfer plugin check prints
// them before the report.
func WriteLimits(w io.Writer, opts CheckOptions) {
	fmt.Fprintf(w, "limits: %v a call, %d MiB of memory (a declared plugin's defaults; --timeout, --memory-mb set others)\n",
		opts.Deadline(), opts.Memory())
}

// WriteReport writes the checks of the module file (its plugins infos, each with the
// params it declares: plugins.ParamsLabel) as minfer plugin check prints them: one
// line per check, then the count of failures.
func WriteReport(w io.Writer, file string, infos []sdk.Info, results []CheckResult) {
	fmt.Fprintf(w, "module %s: ABI v%d.%d, sha256 %s\n", file, infos[0].ABIMajor, infos[0].ABIMinor, infos[0].Checksum)
	for _, i := range infos {
		fmt.Fprintf(w, "  plugin %s %s: %v, params %s\n", i.Name, i.Version, i.Roles, plugins.ParamsLabel(i))
	}
	failed := 0
	for _, r := range results {
		status := "ok  "
		detail := r.Note
		if r.Err != nil {
			status, detail = "FAIL", r.Err.Error()
			failed++
		}
		if detail != "" {
			detail = ": " + detail
		}
		fmt.Fprintf(w, "%s %s (%s) %s%s\n", status, r.Plugin, r.Role, r.Name, detail)
	}
	if failed == 0 {
		fmt.Fprintf(w, "all %d checks passed\n", len(results))
	} else {
		fmt.Fprintf(w, "%d of %d checks failed\n", failed, len(results))
	}
}
