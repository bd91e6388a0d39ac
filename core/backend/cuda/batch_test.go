//go:build cuda

package cuda_test

import (
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/internal/modeltest"
)

// TestForwardBatchInvariance: on the GPU, batched sequences get their own forwards'
// bits and caches (modeltest.BatchInvariance; the batcher keeps batches within the
// backend's identity bound).
func TestForwardBatchInvariance(t *testing.T) {
	g := open(t)
	defer g.Close()
	for _, file := range []string{"synth-llama-q4_0", "synth-qwen2-q8_0", "synth-qwen3-q4_k_m"} {
		t.Run(file, func(t *testing.T) {
			m := loadOn(t, g, testdata(t, "models", "synthetic", file+".gguf"))
			defer m.Close()
			modeltest.BatchInvariance(t, m, backend.KVF16)
		})
	}
}

// TestForwardBatchManySequences: on the GPU, 70 sequences in one batched forward (two
// launches of the *_seqs kernels, caches of four sizes) get their own forwards' bits.
// Their 175 rows are past the backend's identity bound (Caps().IdentityRows: from
// GEMMMinRows rows the matmuls take the f16 GEMM, whose rounding depends on the call),
// so the GEMM is switched off here (MINFER_NO_GEMM: every matmul in single-row bits):
// what the test checks is that the rotation and attention of more sequences than one
// launch takes give every row its own bits.
func TestForwardBatchManySequences(t *testing.T) {
	t.Setenv("MINFER_NO_GEMM", "1")
	g := open(t)
	defer g.Close()
	for _, kt := range []backend.KVType{backend.KVF16, backend.KVQ8_0} {
		t.Run(kt.String(), func(t *testing.T) {
			m := loadOn(t, g, testdata(t, "models", "synthetic", "synth-qwen2-q8_0.gguf"))
			defer m.Close()
			modeltest.ManySequences(t, m, kt, 70)
		})
	}
}

// TestForwardBatchReplay: on the GPU, a batched forward's graph captured for one shape
// and replayed on other caches (other sequences, order and lengths) gives every row its
// own forward's bits (modeltest.BatchReplay), on both cache types.
func TestForwardBatchReplay(t *testing.T) {
	g := open(t)
	defer g.Close()
	for _, kt := range []backend.KVType{backend.KVF16, backend.KVQ8_0} {
		t.Run(kt.String(), func(t *testing.T) {
			m := loadOn(t, g, testdata(t, "models", "synthetic", "synth-qwen2-q4_0.gguf"))
			defer m.Close()
			modeltest.BatchReplay(t, m, kt)
		})
	}
}
