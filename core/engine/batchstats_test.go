package engine

import (
	"slices"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/golden"
)

// TestBatchStats: the one row-statistics call of a batched forward gives each job that
// asks for them (with the shared k) exactly what its own call on its rows gives —
// candidates, max, log-sum-exp and picked logits, picks or none — and leaves alone the
// jobs with another k, with a plain read, or with no rows.
func TestBatchStats(t *testing.T) {
	b := cpu.New(cpu.Options{Threads: 2})
	defer b.Close()
	m := golden.LoadModel(t, b, "models/stories260K.gguf", "target")
	const k = 5
	type want struct {
		ids  []int32
		out  model.Out
		pick []int32
		k    int
		read bool // a plain read, no stats
	}
	cases := []want{
		{ids: []int32{1, 5, 9}, out: model.OutAll, pick: []int32{3, -1, 7}, k: k},
		{ids: []int32{2, 4}, out: model.OutLast, k: k},
		{ids: []int32{6, 7, 8, 10}, out: model.OutNone, k: k},
		{ids: []int32{11}, out: model.OutLast, k: 2},
		{ids: []int32{12, 13}, out: model.OutAll, read: true},
		{ids: []int32{14, 15}, out: model.OutAll, pick: []int32{20, 21}, k: k},
	}
	var jobs []*job
	var seqs []model.Seq
	for _, c := range cases {
		cache, err := m.NewKV(16, backend.KVF16)
		if err != nil {
			t.Fatal(err)
		}
		defer cache.Close()
		j := &job{c: cache, ids: c.ids, out: c.out, start: -1}
		if !c.read && c.out != model.OutNone {
			j.stats = &statsReq{k: c.k, pick: c.pick, st: &model.RowStats{}}
		}
		jobs = append(jobs, j)
		seqs = append(seqs, model.Seq{IDs: c.ids, Cache: cache, Out: c.out})
	}
	l, err := m.ForwardBatch(seqs)
	if err != nil {
		t.Fatal(err)
	}
	bt := &batcher{m: m, staging: map[int]backend.Buffer{}}
	served := bt.batchStats(jobs, l)
	row := 0
	for i, c := range cases {
		j, n := jobs[i], c.out.RowsOut(len(c.ids))
		if got, wantServed := served[j], j.stats != nil && c.k == k; got != wantServed {
			t.Errorf("job %d: served %v, want %v", i, got, wantServed)
		}
		if served[j] {
			view, err := bt.rows(l, row, n)
			if err != nil {
				t.Fatal(err)
			}
			var alone model.RowStats
			if err := m.RowStats(view, k, c.pick, &alone); err != nil {
				t.Fatal(err)
			}
			got := j.stats.st
			if got.K != k || !slices.Equal(got.IDs, alone.IDs) || !slices.Equal(got.Vals, alone.Vals) ||
				!slices.Equal(got.Max, alone.Max) || !slices.Equal(got.LSE, alone.LSE) || !slices.Equal(got.Picked, alone.Picked) {
				t.Errorf("job %d: batched stats %+v, want its own call's %+v", i, *got, alone)
			}
		}
		row += n
	}
	if served := bt.batchStats(jobs[3:5], l); served != nil {
		t.Errorf("one job asking: served %v, want nil (its own read)", served)
	}
}
