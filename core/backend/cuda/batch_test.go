//go:build cuda

package cuda_test

import (
	"math"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
)

// TestForwardBatchInvariance: on the GPU, sequences at different positions of their
// own caches run as one batched forward get exactly the bits of their own forwards
// (within the backend's identity bound), every row and last rows alike.
func TestForwardBatchInvariance(t *testing.T) {
	g := open(t)
	defer g.Close()
	for _, file := range []string{"synth-llama-q4_0", "synth-qwen2-q8_0", "synth-qwen3-q4_k_m"} {
		m := loadOn(t, g, testdata(t, "models", "synthetic", file+".gguf"))
		v := m.Params.Vocab
		tok := func(seq, i int) int32 { return int32((seq*104729 + i*7919 + 13) % v) }
		prefix, rows := []int{0, 5, 2, 9}, []int{1, 3, 1, 5}
		newCaches := func() []*kv.Cache {
			cs := make([]*kv.Cache, len(prefix))
			for j := range cs {
				c, err := m.NewKV(64, backend.KVF16)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				for i := range prefix[j] {
					if _, err := m.Forward([]int32{tok(j, i)}, c, false); err != nil {
						t.Fatal(err)
					}
				}
				cs[j] = c
			}
			return cs
		}
		ids := func(j int) []int32 {
			out := make([]int32, rows[j])
			for i := range out {
				out[i] = tok(j, prefix[j]+i)
			}
			return out
		}
		read := func(l model.Logits) []float32 {
			out := make([]float32, l.Rows*l.Cols)
			if err := m.ReadLogits(l, out); err != nil {
				t.Fatal(err)
			}
			return out
		}
		for _, all := range []bool{true, false} {
			var want []float32
			for j, c := range newCaches() {
				l, err := m.Forward(ids(j), c, all)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, read(l)...)
			}
			cs := newCaches()
			seqs := make([]model.Seq, len(cs))
			for j, c := range cs {
				seqs[j] = model.Seq{IDs: ids(j), Cache: c}
			}
			l, err := m.ForwardBatch(seqs, all)
			if err != nil {
				t.Fatal(err)
			}
			got := read(l)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s all=%v: logit %d (row %d): batched %v, alone %v", file, all, i, i/v, got[i], want[i])
				}
			}
		}
		m.Close()
	}
}
