package stack

import (
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
