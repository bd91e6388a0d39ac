package stack

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/minfer/minfer/core/engine"
)

// PrintTimings writes a result's timings on w, one line, and with spec its
// speculative statistics (by depth and by drafter).
func PrintTimings(w io.Writer, r *engine.Result, spec bool) {
	t := r.Timings
	fmt.Fprintf(w, "prompt: %d tokens, %.1f ms, %.2f t/s | generated: %d tokens, %.1f ms, %.2f t/s | ttft %.1f ms | stop: %s\n",
		r.PromptTokens, t.PromptMs, t.PromptTPS, len(r.Tokens), t.GenMs, t.GenTPS, t.TTFTMs, r.Stop)
	if spec {
		s := r.Spec
		fmt.Fprintf(w, "spec: policy %s, %d rounds, drafted %d, accepted %d (%.3f), %.2f tokens/round; ms draft %.1f verify %.1f plugins %.1f\n",
			s.Policy, s.Rounds, s.Drafted, s.Accepted, s.Acceptance, s.TokensPerRound, s.Ms.Draft, s.Ms.Verify, s.Ms.Plugins)
		for d := 0; d <= 64; d++ {
			if ds, ok := s.ByDepth[fmt.Sprint(d)]; ok {
				fmt.Fprintf(w, "  depth %2d: %d rounds, %d accepted\n", d, ds.Rounds, ds.Accepted)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(s.ByDrafter)) {
			ds := s.ByDrafter[name]
			fmt.Fprintf(w, "  drafter %s: %d rounds, drafted %d, accepted %d\n", name, ds.Rounds, ds.Drafted, ds.Accepted)
		}
	}
}

// RunJSON is run --json's output.
type RunJSON struct {
	PromptTokens int               `json:"prompt_tokens"`
	Tokens       []int32           `json:"tokens"`
	Text         string            `json:"text"`
	Stop         engine.StopReason `json:"stop"`
	Timings      engine.Timings    `json:"timings"`
	TopLogits    []engine.TopLogit `json:"top_logits,omitempty"`
	Spec         *engine.SpecStats `json:"spec,omitempty"`
}

// WriteJSON writes r as run --json prints it (with spec, its speculative statistics).
func WriteJSON(w io.Writer, r *engine.Result, spec bool) error {
	out := RunJSON{PromptTokens: r.PromptTokens, Tokens: r.Tokens, Text: r.Text, Stop: r.Stop,
		Timings: r.Timings, TopLogits: r.TopLogits}
	if out.Tokens == nil {
		out.Tokens = []int32{}
	}
	if spec {
		out.Spec = &r.Spec
	}
	return json.NewEncoder(w).Encode(out)
}
