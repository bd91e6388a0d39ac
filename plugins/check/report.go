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

// JSONReport is what minfer plugin check --json prints: the text report's facts (the
// module, the limits, each plugin with the params it declares, each check) as one
// object.
type JSONReport struct {
	Module  string       `json:"module"`
	ABI     string       `json:"abi"`
	SHA256  string       `json:"sha256"`
	Limits  JSONLimits   `json:"limits"`
	Plugins []JSONPlugin `json:"plugins"`
	Checks  []JSONCheck  `json:"checks"`
	Failed  int          `json:"failed"`
}

// JSONLimits are the per-call deadline and memory cap the checks ran under.
type JSONLimits struct {
	Timeout  string `json:"timeout"`
	MemoryMB int    `json:"memory_mb"`
}

// JSONPlugin is one plugin the module declares. Params are the keys it declares it
// reads (plugins.DeclaredParams): left out when it declares nothing, [] when none.
type JSONPlugin struct {
	Name    string    `json:"name"`
	Version string    `json:"version"`
	Roles   []string  `json:"roles"`
	Params  *[]string `json:"params,omitempty"`
}

// JSONCheck is one check's outcome.
type JSONCheck struct {
	Plugin string `json:"plugin"`
	Role   string `json:"role"`
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
	Note   string `json:"note,omitempty"`
}

// WriteJSON writes the checks of the module file as a JSONReport: the plugins infos
// (as Check returned them), the limits of opts and the results.
func WriteJSON(w io.Writer, file string, infos []sdk.Info, opts CheckOptions, results []CheckResult) error {
	out := JSONReport{Module: file, Limits: JSONLimits{Timeout: opts.Deadline().String(), MemoryMB: opts.Memory()},
		Plugins: []JSONPlugin{}, Checks: []JSONCheck{}, Failed: Failed(results)}
	if len(infos) > 0 {
		out.ABI, out.SHA256 = fmt.Sprintf("v%d.%d", infos[0].ABIMajor, infos[0].ABIMinor), infos[0].Checksum
	}
	for _, i := range infos {
		p := JSONPlugin{Name: i.Name, Version: i.Version, Roles: []string{}, Params: plugins.DeclaredParams(i)}
		for _, r := range i.Roles {
			p.Roles = append(p.Roles, string(r))
		}
		out.Plugins = append(out.Plugins, p)
	}
	for _, r := range results {
		j := JSONCheck{Plugin: r.Plugin, Role: string(r.Role), Check: r.Name, OK: r.Err == nil, Note: r.Note}
		if r.Err != nil {
			j.Error = r.Err.Error()
		}
		out.Checks = append(out.Checks, j)
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
