// Package modeltest holds checks that a loaded model must pass on any backend, for the
// tests of the CPU and CUDA backends alike.
package modeltest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
)

// BatchInvariance checks model.ForwardBatch on m: sequences at different positions of
// their own caches (kt), with different row counts, run as one batched forward get
// exactly the bits each gets from its own Forward — every row's logits, the last row's
// or none, as each sequence's Out asks, in any mix — and leave their caches as their
// own forwards would (the next one-token step agrees too).
func BatchInvariance(t *testing.T, m *model.Model, kt backend.KVType) {
	t.Helper()
	v := m.Params.Vocab
	tok := func(seq, i int) int32 { return int32((seq*104729 + i*7919 + 13) % v) }
	prefix := []int{0, 5, 2, 9} // tokens already in each sequence's cache
	rows := []int{1, 3, 1, 5}   // tokens each brings to the batch
	newCaches := func() []*kv.Cache {
		cs := make([]*kv.Cache, len(prefix))
		for j := range cs {
			c, err := m.NewKV(64, kt)
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
	read := func(l model.Logits) []float32 { return readLogits(t, m, l) }
	for _, tc := range []struct {
		name string
		outs []model.Out // per sequence
	}{
		{"all", []model.Out{model.OutAll, model.OutAll, model.OutAll, model.OutAll}},
		{"last", []model.Out{model.OutLast, model.OutLast, model.OutLast, model.OutLast}},
		{"mixed", []model.Out{model.OutAll, model.OutNone, model.OutLast, model.OutLast}},
		{"mixed, none last", []model.Out{model.OutLast, model.OutAll, model.OutAll, model.OutNone}},
		{"none", []model.Out{model.OutNone, model.OutNone, model.OutNone, model.OutNone}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alone := newCaches()
			var want []float32
			for j, c := range alone {
				l, err := m.Forward(batchIDs(j), c, tc.outs[j] == model.OutAll)
				if err != nil {
					t.Fatal(err)
				}
				if tc.outs[j] != model.OutNone {
					want = append(want, read(l)...)
				}
			}
			together := newCaches()
			seqs := make([]model.Seq, len(together))
			for j, c := range together {
				seqs[j] = model.Seq{IDs: batchIDs(j), Cache: c, Out: tc.outs[j]}
			}
			batchedBits(t, m, seqs, want, "")
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

// ManySequences checks model.ForwardBatch on n sequences at once — more than a GPU
// launch takes (so its rows span several), with caches of four sizes (so a split-K
// attention splits them differently), 1-4 rows each, every Out kind — against each
// sequence's own Forward, bit for bit, and the caches' lengths after.
func ManySequences(t *testing.T, m *model.Model, kt backend.KVType, n int) {
	t.Helper()
	v := m.Params.Vocab
	tok := func(seq, i int) int32 { return int32((seq*7919 + i*104729 + 5) % v) }
	outs := []model.Out{model.OutLast, model.OutAll, model.OutNone}
	newCache := func(j int) *kv.Cache {
		c, err := m.NewKV(32<<(j%4), kt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		for i := range j % 5 { // a prefix of 0-4 tokens
			if _, err := m.Forward([]int32{tok(j, i)}, c, false); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	ids := func(j int) []int32 {
		out := make([]int32, 1+j%4) // against Out's cycle of 3: every kind with every count
		for i := range out {
			out[i] = tok(j, j%5+i)
		}
		return out
	}
	read := func(l model.Logits) []float32 { return readLogits(t, m, l) }
	var want []float32
	seqs := make([]model.Seq, n)
	for j := range n {
		out := outs[j%len(outs)]
		l, err := m.Forward(ids(j), newCache(j), out == model.OutAll)
		if err != nil {
			t.Fatal(err)
		}
		if out != model.OutNone {
			want = append(want, read(l)...)
		}
		seqs[j] = model.Seq{IDs: ids(j), Cache: newCache(j), Out: out}
	}
	batchedBits(t, m, seqs, want, fmt.Sprintf("%d sequences: ", n))
	for j, q := range seqs {
		if got, want := q.Cache.Len(), j%5+len(q.IDs); got != want {
			t.Fatalf("sequence %d: cache length %d, want %d", j, got, want)
		}
	}
}

// readLogits copies l's rows to the host.
func readLogits(t *testing.T, m *model.Model, l model.Logits) []float32 {
	t.Helper()
	out := make([]float32, l.Rows*l.Cols)
	if err := m.ReadLogits(l, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// batchedBits runs seqs as one m.ForwardBatch and checks that its logits are want's
// bits (the sequences' own forwards' rows, in order); a failure is prefixed with what.
func batchedBits(t *testing.T, m *model.Model, seqs []model.Seq, want []float32, what string) {
	t.Helper()
	l, err := m.ForwardBatch(seqs)
	if err != nil {
		t.Fatal(err)
	}
	got := readLogits(t, m, l)
	if len(got) != len(want) {
		t.Fatalf("%s%d logits, want %d", what, len(got), len(want))
	}
	v := m.Params.Vocab
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%slogit %d (row %d): batched %v, alone %v", what, i, i/v, got[i], want[i])
		}
	}
}

// BatchReplay checks model.ForwardBatch over many steps whose batches keep a shape
// (rows and output kind per sequence) while their caches change — other sequences, in
// another order, at other lengths — as a server's decoding batch does: each sequence's
// rows are the bits of its own Forward at every step. On a backend that captures a
// graph per batch shape and replays it on the step's caches (backend.SeqGraphs), the
// steps after a shape's second one are replays on caches it was not captured with.
func BatchReplay(t *testing.T, m *model.Model, kt backend.KVType) {
	t.Helper()
	v := m.Params.Vocab
	tok := func(seq, i int) int32 { return int32((seq*15485863 + i*7919 + 101) % v) }
	const nseq = 6
	together, alone := make([]*kv.Cache, nseq), make([]*kv.Cache, nseq)
	for j := range nseq {
		for _, cs := range [][]*kv.Cache{together, alone} {
			c, err := m.NewKV(96, kt)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			for i := range j * 3 % 7 { // prefixes of 0-6 tokens
				if _, err := m.Forward([]int32{tok(j, i)}, c, false); err != nil {
					t.Fatal(err)
				}
			}
			cs[j] = c
		}
	}
	// Two shapes, alternated: three decoding sequences; and verify-like rows of 2 and
	// 3 (every row out) around a decoding one.
	shapes := [][]struct {
		n   int
		out model.Out
	}{
		{{1, model.OutLast}, {1, model.OutLast}, {1, model.OutLast}},
		{{2, model.OutAll}, {1, model.OutLast}, {3, model.OutAll}},
	}
	read := func(l model.Logits) []float32 { return readLogits(t, m, l) }
	for step := range 10 {
		shape := shapes[step%2]
		perm := rand.New(rand.NewPCG(uint64(step), 7)).Perm(nseq) // another set and order every step
		var want []float32
		seqs := make([]model.Seq, len(shape))
		for k, sh := range shape {
			j := perm[k]
			ids := make([]int32, sh.n)
			for i := range ids {
				ids[i] = tok(j, together[j].Len()+i)
			}
			l, err := m.Forward(ids, alone[j], sh.out == model.OutAll)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, read(l)...)
			seqs[k] = model.Seq{IDs: ids, Cache: together[j], Out: sh.out}
		}
		batchedBits(t, m, seqs, want, fmt.Sprintf("step %d: ", step))
	}
	for j := range nseq {
		if together[j].Len() != alone[j].Len() {
			t.Fatalf("sequence %d: cache length %d, want %d", j, together[j].Len(), alone[j].Len())
		}
	}
}
