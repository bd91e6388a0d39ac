package model_test

import (
	"strings"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/golden"
	"github.com/minfer/minfer/internal/modeltest"
)

// TestForwardBatchInvariance: batched sequences get their own forwards' bits and
// caches (modeltest.BatchInvariance) on every architecture and both KV cache types.
func TestForwardBatchInvariance(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	for _, tc := range []struct {
		file string
		kt   backend.KVType
	}{
		{"stories260K", backend.KVF16},
		{"synthetic/synth-llama-q4_0", backend.KVQ8_0},
		{"synthetic/synth-qwen2-q4_0", backend.KVF16},
		{"synthetic/synth-qwen3-q8_0", backend.KVQ8_0},
	} {
		t.Run(tc.file+"/"+tc.kt.String(), func(t *testing.T) {
			modeltest.BatchInvariance(t, golden.LoadModel(t, b, "models/"+tc.file+".gguf", "target"), tc.kt)
		})
	}
}

func TestForwardBatchErrors(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	m := golden.LoadModel(t, b, "models/stories260K.gguf", "target")
	c1, _ := m.NewKV(4, backend.KVF16)
	c2, _ := m.NewKV(4, backend.KVF16)
	defer c1.Close()
	defer c2.Close()
	for _, tc := range []struct {
		name string
		seqs []model.Seq
		want string
	}{
		{"none", nil, "no sequences"},
		{"empty sequence", []model.Seq{{IDs: []int32{1}, Cache: c1}, {Cache: c2}}, "sequence 1: model: forward of no tokens"},
		{"repeated cache", []model.Seq{{IDs: []int32{1}, Cache: c1}, {IDs: []int32{2}, Cache: c1}}, "repeats a cache"},
		{"bad id", []model.Seq{{IDs: []int32{1}, Cache: c1}, {IDs: []int32{-3}, Cache: c2}}, "token id -3"},
		{"full cache", []model.Seq{{IDs: []int32{1}, Cache: c1}, {IDs: []int32{1, 2, 3, 4, 5}, Cache: c2}}, "sequence 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.ForwardBatch(tc.seqs, false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if c1.Len() != 0 || c2.Len() != 0 {
				t.Fatalf("a refused batch changed the caches (%d, %d)", c1.Len(), c2.Len())
			}
		})
	}
}
