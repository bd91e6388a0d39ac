package model_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/golden"
)

// rowStatser is the CPU backend with a host RowStats that records its arguments.
type rowStatser struct {
	*cpu.Backend
	nt, n, k int
	pick     []int32
}

func (b *rowStatser) RowStats(logits backend.Buffer, nt, n, k int, pick []int32, ids []int32, vals []float32, maxv, lse, picked []float32) error {
	b.nt, b.n, b.k, b.pick = nt, n, k, slices.Clone(pick[:nt])
	rows := make([]float32, nt*n)
	if err := b.ReadF32(logits, 0, rows); err != nil {
		return err
	}
	if k > 0 {
		if err := b.TopK(logits, nt, n, k, ids, vals); err != nil {
			return err
		}
	}
	for r := range nt {
		maxv[r], lse[r] = hostMaxLSE(rows[r*n : (r+1)*n])
		picked[r] = 0
		if pick[r] >= 0 {
			picked[r] = rows[r*n+int(pick[r])]
		}
	}
	return nil
}

// hostMaxLSE is the host's max and log-sum-exp of a row (backend.MaxLSE).
func hostMaxLSE(row []float32) (float32, float32) {
	m, lse := backend.MaxLSE(row)
	return m, float32(lse)
}

// noRowStats is a backend without row statistics: the CPU backend with its RowStats
// hidden (only backend.Backend's methods are promoted).
type noRowStats struct{ backend.Backend }

// TestRowStats: Model.RowStats hands the backend a forward's logits with its shape and
// the picks, returns what the backend computed, and reports a backend without it.
func TestRowStats(t *testing.T) {
	withStats := cpu.New(cpu.Options{Threads: 1})
	defer withStats.Close()
	if !golden.LoadModel(t, withStats, "models/stories260K.gguf", "target").HasRowStats() {
		t.Fatalf("HasRowStats on the CPU backend: got false, want true")
	}
	plain := noRowStats{cpu.New(cpu.Options{Threads: 2})}
	defer plain.Close()
	rs := &rowStatser{Backend: cpu.New(cpu.Options{Threads: 2})}
	defer rs.Close()

	m := golden.LoadModel(t, plain, "models/stories260K.gguf", "target")
	if m.HasRowStats() {
		t.Fatalf("HasRowStats without a RowStatser: got true, want false")
	}
	c, err := m.NewKV(16, backend.KVF16)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := m.Forward([]int32{1, 2, 3}, c, true)
	if err != nil {
		t.Fatal(err)
	}
	var st model.RowStats
	if err := m.RowStats(l, 2, nil, &st); !errors.Is(err, model.ErrNoRowStats) {
		t.Fatalf("RowStats without a RowStatser: got %v, want ErrNoRowStats", err)
	}

	m = golden.LoadModel(t, rs, "models/stories260K.gguf", "target")
	if !m.HasRowStats() {
		t.Fatalf("HasRowStats with a RowStatser: got false, want true")
	}
	c2, err := m.NewKV(16, backend.KVF16)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for _, tc := range []struct {
		name string
		all  bool
		k    int
		pick []int32
	}{
		{"all rows, picks", true, 4, []int32{7, -1, 0}},
		{"last row, no picks", false, 1, nil},
		{"no candidates", true, 0, []int32{-1, 5, 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := c2.Truncate(0); err != nil {
				t.Fatal(err)
			}
			l, err := m.Forward([]int32{1, 2, 3}, c2, tc.all)
			if err != nil {
				t.Fatal(err)
			}
			rows := make([]float32, l.Rows*l.Cols)
			if err := m.ReadLogits(l, rows); err != nil {
				t.Fatal(err)
			}
			if err := m.RowStats(l, tc.k, tc.pick, &st); err != nil {
				t.Fatal(err)
			}
			wantPick := tc.pick
			if wantPick == nil {
				wantPick = slices.Repeat([]int32{-1}, l.Rows)
			}
			if rs.nt != l.Rows || rs.n != m.Params.Vocab || rs.k != tc.k || !slices.Equal(rs.pick, wantPick) {
				t.Fatalf("backend got nt %d n %d k %d pick %v, want %d %d %d %v", rs.nt, rs.n, rs.k, rs.pick, l.Rows, m.Params.Vocab, tc.k, wantPick)
			}
			if st.K != tc.k || len(st.IDs) != l.Rows*tc.k || len(st.Max) != l.Rows {
				t.Fatalf("got K %d, %d ids, %d rows; want %d, %d, %d", st.K, len(st.IDs), len(st.Max), tc.k, l.Rows*tc.k, l.Rows)
			}
			for r := range l.Rows {
				row := rows[r*l.Cols : (r+1)*l.Cols]
				wm, wl := hostMaxLSE(row)
				wp := float32(0)
				if wantPick[r] >= 0 {
					wp = row[wantPick[r]]
				}
				if st.Max[r] != wm || st.LSE[r] != wl || st.Picked[r] != wp {
					t.Errorf("row %d: got max %v lse %v picked %v, want %v %v %v", r, st.Max[r], st.LSE[r], st.Picked[r], wm, wl, wp)
				}
				if tc.k > 0 && st.Vals[r*tc.k] != wm {
					t.Errorf("row %d: got best %v, want the max %v", r, st.Vals[r*tc.k], wm)
				}
			}
		})
	}
}
