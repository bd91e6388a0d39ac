package model_test

import (
	"github.com/minfer/minfer/internal/golden"
	"math"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
)

// TestRowIdentity: a forward over nt rows gives every row exactly the bits of nt
// single-token forwards at the same positions (nt = 1…64), for every architecture and
// both KV cache types; so does a last-row-only forward's one row. This is what speculative decoding's greedy identity rests on.
func TestRowIdentity(t *testing.T) {
	const maxNT = 64
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	all := make([]int, maxNT)
	for i := range all {
		all[i] = i + 1
	}
	some := []int{1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64}
	// every nt for one cache type per architecture, a spread of nt for the other
	// (stories260K's 8-wide heads cannot hold Q8_0 blocks, so llama's Q8_0 cache runs
	// on the synthetic llama)
	for _, tc := range []struct {
		file     string
		all, few []backend.KVType
	}{
		{"stories260K", []backend.KVType{backend.KVF16}, nil},
		{"synthetic/synth-llama-q4_0", nil, []backend.KVType{backend.KVQ8_0}},
		{"synthetic/synth-qwen2-q4_0", []backend.KVType{backend.KVQ8_0}, []backend.KVType{backend.KVF16}},
		{"synthetic/synth-qwen3-q8_0", []backend.KVType{backend.KVF16}, []backend.KVType{backend.KVQ8_0}},
	} {
		file := tc.file
		m := golden.LoadModel(t, b, "models/"+file+".gguf", "target")
		v := m.Params.Vocab
		ids := make([]int32, maxNT)
		for i := range ids {
			ids[i] = int32((i*7919 + 13) % v)
		}
		for k, kt := range append(tc.all, tc.few...) {
			nts := all
			if k >= len(tc.all) {
				nts = some
			}
			t.Run(file+"/"+kt.String(), func(t *testing.T) {
				kv, err := m.NewKV(maxNT, kt)
				if err != nil {
					t.Fatal(err)
				}
				defer kv.Close()
				// reference: one token at a time
				single := make([]float32, maxNT*v)
				for i, id := range ids {
					l, err := m.Forward([]int32{id}, kv, false)
					if err != nil {
						t.Fatal(err)
					}
					if err := m.ReadLogits(l, single[i*v:(i+1)*v]); err != nil {
						t.Fatal(err)
					}
				}
				got := make([]float32, maxNT*v)
				for _, nt := range nts {
					// rows pos0 … pos0+nt-1 in one forward, after pos0 rows in another
					pos0 := (maxNT - nt) / 2
					kv.Reset()
					if pos0 > 0 {
						if _, err := m.Forward(ids[:pos0], kv, false); err != nil {
							t.Fatal(err)
						}
					}
					l, err := m.Forward(ids[pos0:pos0+nt], kv, true)
					if err != nil {
						t.Fatal(err)
					}
					if err := m.ReadLogits(l, got[:nt*v]); err != nil {
						t.Fatal(err)
					}
					for i := range nt * v {
						w := single[pos0*v+i]
						if math.Float32bits(got[i]) != math.Float32bits(w) {
							t.Fatalf("nt %d (from position %d): row %d logit %d: got %v, want %v bit for bit", nt, pos0, i/v, i%v, got[i], w)
						}
					}
					if nt%8 != 1 {
						continue
					}
					// last row only (the last layer then runs for that row alone)
					kv.Reset()
					l, err = m.Forward(ids[:pos0+nt], kv, false)
					if err != nil {
						t.Fatal(err)
					}
					if err := m.ReadLogits(l, got[:v]); err != nil {
						t.Fatal(err)
					}
					for i := range v {
						w := single[(pos0+nt-1)*v+i]
						if math.Float32bits(got[i]) != math.Float32bits(w) {
							t.Fatalf("last row of %d: logit %d: got %v, want %v bit for bit", pos0+nt, i, got[i], w)
						}
					}
				}
			})
		}
	}
}
