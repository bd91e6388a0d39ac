package model_test

import (
	"math"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/golden"
)

// TestPagedCaches: paged caches (blocks of 8 positions, taken from an arena as they
// grow) give every forward the bits of a whole cache, also when a cache starts from
// another's prefix by sharing its blocks (Share, copy on write of the partial last
// block) and both go on writing; the arena counts a shared block once, and closing
// the caches gives every block back.
func TestPagedCaches(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	for _, tc := range []struct {
		file string
		kt   backend.KVType
	}{
		{"synthetic/synth-qwen2-q8_0", backend.KVF16},
		{"synthetic/synth-llama-q4_0", backend.KVQ8_0},
	} {
		t.Run(tc.file, func(t *testing.T) {
			m := golden.LoadModel(t, b, "models/"+tc.file+".gguf", "target")
			v := m.Params.Vocab
			tok := func(seed, i int) int32 { return int32((seed*104729 + i*7919 + 13) % v) }
			seq := func(seed, from, n int) []int32 {
				ids := make([]int32, n)
				for i := range ids {
					ids[i] = tok(seed, from+i)
				}
				return ids
			}
			// run feeds ids in chunks of 5 then one token at a time, returning every
			// forward's logits
			run := func(c *kv.Cache, ids []int32, steps int) []float32 {
				t.Helper()
				var out []float32
				read := func(l model.Logits, err error) {
					t.Helper()
					if err != nil {
						t.Fatal(err)
					}
					row := make([]float32, l.Rows*l.Cols)
					if err := m.ReadLogits(l, row); err != nil {
						t.Fatal(err)
					}
					out = append(out, row...)
				}
				for i := 0; i < len(ids); i += 5 {
					read(m.Forward(ids[i:min(i+5, len(ids))], c, true))
				}
				for range steps {
					read(m.Forward([]int32{tok(99, c.Len())}, c, false))
				}
				return out
			}
			equal := func(what string, got, want []float32) {
				t.Helper()
				if len(got) != len(want) {
					t.Fatalf("%s: %d logits, want %d", what, len(got), len(want))
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s: logit %d = %v, the whole cache gives %v", what, i, got[i], want[i])
					}
				}
			}
			whole := func(ids []int32, steps int) []float32 {
				c, err := m.NewKV(64, tc.kt)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				return run(c, ids, steps)
			}
			bs, err := m.NewBlocks(8, 16, tc.kt)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Free(bs.Arena())
			paged := func() *kv.Cache {
				c, err := bs.NewCache(64)
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			prefix := seq(1, 0, 20) // 2.5 blocks
			a := paged()
			equal("alone", run(a, prefix, 0), whole(prefix, 0))
			if got := bs.Used(); got != 3 {
				t.Fatalf("20 positions: %d blocks used, want 3", got)
			}
			c := paged()
			if err := c.Share(a, 20); err != nil {
				t.Fatal(err)
			}
			if got := bs.Used(); got != 3 {
				t.Fatalf("after sharing 20 positions: %d blocks used, want 3 (shared blocks count once)", got)
			}
			// c writes into the shared partial block: it copies it; a then does too
			// and must still read its own positions
			own := seq(2, 20, 7)
			got := run(c, own, 3)
			equal("shared prefix", got, whole(append(append([]int32(nil), prefix...), own...), 3)[len(prefix)*v:])
			if got := bs.Used(); got != 3+2 { // c: its copy of block 2 and a block for positions 24-29
				t.Fatalf("after the sharer wrote: %d blocks used, want 5", got)
			}
			other := seq(3, 20, 6)
			got = run(a, other, 2)
			equal("the sharer's source", got, whole(append(append([]int32(nil), prefix...), other...), 2)[len(prefix)*v:])
			// a speculative rollback into the shared part and a rewrite
			if err := c.Truncate(12); err != nil {
				t.Fatal(err)
			}
			redo := seq(4, 12, 9)
			got = run(c, redo, 0)
			equal("rewritten after a rollback", got, whole(append(append([]int32(nil), prefix[:12]...), redo...), 0)[12*v:])
			// the source still reads what it wrote, after the sharer rewrote the
			// positions they shared
			wantA := whole(append(append([]int32(nil), prefix...), other...), 4)
			equal("the source after the sharer's rewrite", run(a, nil, 2), wantA[len(wantA)-2*v:])
			c.Close()
			a.Close()
			if got := bs.Used(); got != 0 {
				t.Fatalf("after closing every cache: %d blocks used, want 0", got)
			}
		})
	}
}
