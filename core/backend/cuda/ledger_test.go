package cuda

import (
	"strings"
	"testing"
)

// TestWriteLedgerMarksLibraryCalls: a library call's row (cuBLAS: its events bracket the
// host call) is marked and explained under the table; a ledger of kernel launches only
// has neither.
func TestWriteLedgerMarksLibraryCalls(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stats map[string]*KernelStat
		want  []string
		not   []string
	}{
		{"with cuBLAS", map[string]*KernelStat{
			"cublas_gemm":      {Name: "cublas_gemm", Calls: 4, MS: 0.3, HostInCall: true},
			"dequant_f16_q4_k": {Name: "dequant_f16_q4_k", Calls: 4, MS: 0.1},
		}, []string{"cublas_gemm †", "† a library call", "dequant_f16_q4_k "}, []string{"dequant_f16_q4_k †"}},
		{"kernels only", map[string]*KernelStat{
			"swiglu": {Name: "swiglu", Calls: 2, MS: 0.1},
		}, []string{"swiglu "}, []string{"†"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &Backend{led: ledger{stats: tc.stats}}
			var sb strings.Builder
			b.WriteLedger(&sb)
			got := sb.String()
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("ledger lacks %q:\n%s", w, got)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("ledger has %q:\n%s", n, got)
				}
			}
		})
	}
}
