package model_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/golden"
)

// TestForwardBatchInvariance: sequences at different positions of their own caches,
// with different row counts, run as one batched forward, get exactly the bits each gets
// from its own Forward — every row's logits (all) or each one's last row — and leave
// their caches as their own forwards would (the next single-token step agrees too).
// Every architecture, both KV cache types.
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
		m := golden.LoadModel(t, b, "models/"+tc.file+".gguf", "target")
		v := m.Params.Vocab
		tok := func(seq, i int) int32 { return int32((seq*104729 + i*7919 + 13) % v) }
		prefix := []int{0, 5, 2, 9} // tokens already in each sequence's cache
		rows := []int{1, 3, 1, 5}   // tokens each brings to the batch
		newCaches := func() []*kv.Cache {
			cs := make([]*kv.Cache, len(prefix))
			for j := range cs {
				c, err := m.NewKV(64, tc.kt)
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
		batchIDs := func(j int) []int32 {
			ids := make([]int32, rows[j])
			for i := range ids {
				ids[i] = tok(j, prefix[j]+i)
			}
			return ids
		}
		read := func(l model.Logits) []float32 {
			out := make([]float32, l.Rows*l.Cols)
			if err := m.ReadLogits(l, out); err != nil {
				t.Fatal(err)
			}
			return out
		}
		for _, all := range []bool{true, false} {
			name := tc.file + "/" + tc.kt.String() + map[bool]string{true: "/all", false: "/last"}[all]
			t.Run(name, func(t *testing.T) {
				// each alone
				alone := newCaches()
				var want []float32
				for j, c := range alone {
					l, err := m.Forward(batchIDs(j), c, all)
					if err != nil {
						t.Fatal(err)
					}
					want = append(want, read(l)...)
				}
				// all together
				together := newCaches()
				seqs := make([]model.Seq, len(together))
				for j, c := range together {
					seqs[j] = model.Seq{IDs: batchIDs(j), Cache: c}
				}
				l, err := m.ForwardBatch(seqs, all)
				if err != nil {
					t.Fatal(err)
				}
				got := read(l)
				if len(got) != len(want) {
					t.Fatalf("%d logits, want %d", len(got), len(want))
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("logit %d (row %d): batched %v, alone %v", i, i/v, got[i], want[i])
					}
				}
				// the caches hold what the sequences' own forwards stored
				for j := range together {
					if together[j].Len() != alone[j].Len() {
						t.Fatalf("sequence %d: cache length %d, want %d", j, together[j].Len(), alone[j].Len())
					}
					next := []int32{tok(j, 40)}
					la, err := m.Forward(next, alone[j], false)
					if err != nil {
						t.Fatal(err)
					}
					a := read(la)
					lt, err := m.Forward(next, together[j], false)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(read(lt), a) {
						t.Fatalf("sequence %d: the step after the batch differs", j)
					}
				}
			})
		}
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
