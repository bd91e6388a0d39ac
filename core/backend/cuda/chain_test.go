//go:build cuda

package cuda_test

import (
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/internal/modeltest"
)

// TestDraftChainGPU: on the GPU, a draft chain of d steps (each step's token picked
// and fed on the device, graphs replayed back to back) gives the tokens, logits and
// log-sum-exps of d steps whose picks the host reads and feeds (RowStats, k = 1),
// bitwise, the second chain replaying the first's graphs, and leaves the cache as they
// do (modeltest.DraftChain), on the synthetic models of every architecture, with graphs
// and without (MINFER_NO_GRAPHS=1).
func TestDraftChainGPU(t *testing.T) {
	for _, mode := range []string{"", "1"} {
		t.Run("MINFER_NO_GRAPHS="+mode, func(t *testing.T) {
			t.Setenv("MINFER_NO_GRAPHS", mode)
			g := open(t)
			defer g.Close()
			for _, arch := range []string{"llama", "qwen2", "qwen3"} {
				for _, q := range []string{"q4_k_m", "q8_0"} {
					m := loadOn(t, g, testdata(t, "models", "synthetic", "synth-"+arch+"-"+q+".gguf"))
					for _, d := range []int{1, 2, 4, 7, 8} {
						for _, catchUp := range []int{1, 3} {
							modeltest.DraftChain(t, m, backend.KVF16, d, catchUp)
						}
					}
					m.Close()
				}
			}
		})
	}
}
