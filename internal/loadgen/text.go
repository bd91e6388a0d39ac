package loadgen

import (
	"fmt"
	"io"
)

// WriteText writes res as minfer loadgen prints it: throughput, latency percentiles,
// TTFT and inter-token latency when streamed, and the first error.
func (res *Result) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s: %d clients, %d requests (%d failed), %d completion tokens in %.2f s: %.1f tokens/s\n",
		res.URL, res.Clients, res.Requests, res.Errors, res.CompletionTokens, res.WallS, res.TokPerS)
	p := res.LatencyS
	fmt.Fprintf(w, "latency s: p50 %.3f p90 %.3f p99 %.3f max %.3f\n", p.P50, p.P90, p.P99, p.Max)
	if res.TTFTS != nil {
		t, g := res.TTFTS, res.ITLS
		fmt.Fprintf(w, "ttft s: p50 %.3f p90 %.3f p99 %.3f | inter-token ms: p50 %.2f p90 %.2f p99 %.2f\n",
			t.P50, t.P90, t.P99, 1e3*g.P50, 1e3*g.P90, 1e3*g.P99)
	}
	if res.Errors > 0 {
		fmt.Fprintf(w, "first error: %s\n", res.FirstError)
	}
}
