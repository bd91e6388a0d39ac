package specbench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/minfer/minfer/core/engine/bench"
)

// Result is what specbench measured (its --json output).
type Result struct {
	Target      string            `json:"target"`
	Draft       string            `json:"draft"`
	Drafter     string            `json:"drafter,omitempty"` // the [spec] drafter plugins of every row but drafter:NAME
	Prompts     int               `json:"prompts"`
	NPredict    int               `json:"n_predict"`
	Reps        int               `json:"repetitions"`
	Depths      []bench.RowResult `json:"depths"`
	VerifyMs    []float64         `json:"verify_cost_ms"` // [nt-1]: ms per target forward of nt rows
	DraftStepMs float64           `json:"draft_step_ms"`
	// DraftChainStepMs is the draft's cost per step of a bench.ChainDepth-step chain
	// on the device (bench.DraftChainStep); 0 where the backend runs no chains.
	DraftChainStepMs float64 `json:"draft_chain_step_ms"`
}

// WriteTable writes r as specbench prints it: a header line, the table of rows, the
// rounds by drafter and the verify-cost curve.
func (r *Result) WriteTable(w io.Writer) {
	draft := r.Draft
	if draft == "" {
		draft = "none"
	}
	if r.Drafter != "" {
		draft += ", drafter " + r.Drafter
	}
	fmt.Fprintf(w, "target %s, draft %s: %d prompts × %d tokens, %d repetitions\n\n", r.Target, draft, r.Prompts, r.NPredict, r.Reps)
	wd := len("depth")
	for _, d := range r.Depths {
		wd = max(wd, len([]rune(d.Depth)))
	}
	fmt.Fprintf(w, "| %*s | %18s | acceptance | tokens/round | speedup | = depth 0 | draft ms/round | verify ms/round | plugins µs/round | drafter µs/round | round ms | plugin share |\n", wd, "depth", "tokens/s")
	fmt.Fprintf(w, "| %s | %s | ---------- | ------------ | ------- | --------- | -------------- | --------------- | ---------------- | ---------------- | -------- | ------------ |\n", strings.Repeat("-", wd), strings.Repeat("-", 18))
	// Without a depth-0 run there is nothing to compare with: no speedup, no identity.
	base := slices.ContainsFunc(r.Depths, func(d bench.RowResult) bool { return d.Depth == "0" })
	for _, d := range r.Depths {
		speedup, same := fmt.Sprintf("%6.2fx", d.Speedup), fmt.Sprint(d.Identical)
		if !base {
			speedup, same = "-", "-"
		}
		fmt.Fprintf(w, "| %*s | %18s | %10.3f | %12.2f | %7s | %9s | %14.3f | %15.3f | %16.1f | %16.1f | %8.3f | %11.2f%% |\n", wd, d.Depth, fmt.Sprintf("%.2f ± %.2f", d.TPSMean, d.TPSStd),
			d.Acceptance, d.TokensPerRound, speedup, same, d.PerRound.Draft, d.PerRound.Verify, 1e3*d.PerRound.Plugins,
			1e3*d.PerRound.Drafters, d.RoundMs, 100*d.PluginShare)
	}
	for _, d := range r.Depths {
		if len(d.RoundsByDrafter) > 1 {
			var parts []string
			for _, name := range slices.Sorted(maps.Keys(d.RoundsByDrafter)) {
				parts = append(parts, fmt.Sprintf("%s %d", name, d.RoundsByDrafter[name]))
			}
			fmt.Fprintf(w, "%s: drafting rounds by drafter: %s\n", d.Depth, strings.Join(parts, ", "))
		}
	}
	for _, d := range r.Depths {
		if d.DrafterPromptMs > 0 {
			fmt.Fprintf(w, "%s: drafter plugins took in the prompt in %.3f ms a request (during its prefill)\n", d.Depth, d.DrafterPromptMs)
		}
	}
	if len(r.VerifyMs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nverify cost C_T(nt), ms per target forward:\n")
	for i, ms := range r.VerifyMs {
		fmt.Fprintf(w, "  nt %2d: %7.3f ms (%.2f× nt=1)\n", i+1, ms, ms/r.VerifyMs[0])
	}
	if r.Draft != "" {
		fmt.Fprintf(w, "draft step: %.3f ms\n", r.DraftStepMs)
		if r.DraftChainStepMs > 0 {
			fmt.Fprintf(w, "draft chain step: %.3f ms (a chain of %d steps on the device, per step)\n", r.DraftChainStepMs, bench.ChainDepth)
		}
	}
}
