package engine

import (
	"context"
	"fmt"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/internal/enginetest"
	"github.com/minfer/minfer/sdk"
)

// fakeLM is a deterministic "model" for testing the round loop without a backend: the
// logits row after a prefix depends only on that prefix (through a rolling hash), so
// it has the row identity of a real backend by construction.
type fakeLM struct {
	v, n   int
	hashes []uint64 // hashes[p]: hash of the prefix ending at position p
	// noise > 0 makes a "different model": the same rows plus seeded noise.
	noise float32
	salt  uint64
	// script, when set, makes the token after position p script[p+1] (a strong logit),
	// unless wrong[p+1] is set, which then wins instead.
	script []int32
	wrong  map[int]int32
	// ties > 0 sets every ties-th logit of a row (from id 3) to one value above the
	// rest, so the best candidates tie.
	ties int
	// stats makes the fake compute forwardStats (on the host, with the judge's own
	// functions: the device path must give exactly the host path's SampleRows).
	stats      bool
	statsCalls int
	st         model.RowStats
	out        []float32
	calls      int
	rows       int
	sizes      []int // tokens of each forward
}

func mix(h, x uint64) uint64 {
	h ^= x + 0x9e3779b97f4a7c15 + (h << 6) + (h >> 2)
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

func (f *fakeLM) row(p int, dst []float32) {
	h := f.hashes[p]
	for j := range dst {
		x := mix(h, uint64(j))
		dst[j] = float32(int64(x%8192)-4096) / 1024 // [-4, 4) in steps of 1/1024
		if f.noise > 0 {
			dst[j] += f.noise * float32(int64(mix(x, f.salt)%2048)-1024) / 1024
		}
	}
	if f.script != nil && p+1 < len(f.script) {
		t := f.script[p+1]
		if w, ok := f.wrong[p+1]; ok {
			t = w
		}
		dst[t] = 20
	}
	if f.ties > 0 {
		for j := 3; j < len(dst); j += f.ties {
			dst[j] = 10
		}
	}
}

func (f *fakeLM) forward(ids []int32, all bool) ([]float32, error) {
	if len(f.hashes)+len(ids) > f.n {
		return nil, fmt.Errorf("fake: context full")
	}
	f.calls++
	f.rows += len(ids)
	f.sizes = append(f.sizes, len(ids))
	for _, id := range ids {
		var prev uint64 = 1469598103934665603
		if len(f.hashes) > 0 {
			prev = f.hashes[len(f.hashes)-1]
		}
		f.hashes = append(f.hashes, mix(prev, uint64(id)+1))
	}
	nr := 1
	if all {
		nr = len(ids)
	}
	f.out = f.out[:0]
	for r := range nr {
		p := len(f.hashes) - nr + r
		row := make([]float32, f.v)
		f.row(p, row)
		f.out = append(f.out, row...)
	}
	return f.out, nil
}

func (f *fakeLM) fill(ids []int32) error {
	_, err := f.forward(ids, false)
	return err
}

func (f *fakeLM) hasStats() bool { return f.stats }

func (f *fakeLM) forwardStats(ids []int32, all bool, k int, pick []int32) (*model.RowStats, error) {
	if !f.stats {
		return nil, fmt.Errorf("BUG: fake: forwardStats without stats")
	}
	rows, err := f.forward(ids, all)
	if err != nil {
		return nil, err
	}
	f.statsCalls++
	nr := len(rows) / f.v
	st := &f.st
	st.K = k
	st.IDs, st.Vals = make([]int32, nr*k), make([]float32, nr*k)
	st.Max, st.LSE, st.Picked = make([]float32, nr), make([]float32, nr), make([]float32, nr)
	for r := range nr {
		row := rows[r*f.v : (r+1)*f.v]
		if k > 0 {
			backend.TopKRow(row, st.IDs[r*k:(r+1)*k], st.Vals[r*k:(r+1)*k])
		}
		st.Max[r], st.LSE[r] = maxLSE(row)
		if pick != nil && pick[r] >= 0 {
			st.Picked[r] = row[pick[r]]
		}
	}
	return st, nil
}

func (f *fakeLM) len() int { return len(f.hashes) }
func (f *fakeLM) truncate(n int) error {
	if n < 0 || n > len(f.hashes) {
		return fmt.Errorf("fake: truncate %d of %d", n, len(f.hashes))
	}
	f.hashes = f.hashes[:n]
	return nil
}
func (f *fakeLM) ctx() int   { return f.n }
func (f *fakeLM) vocab() int { return f.v }

func (f *fakeLM) served() (int, int) {
	if len(f.sizes) == 0 {
		return 0, 0
	}
	return 1, f.sizes[len(f.sizes)-1]
}

// fakeVocab: token i reads as Tok[i] (or "<i>"), EOG ids end a generation.
type fakeVocab = enginetest.Vocab[TextStream]

// repPenalty is llama.cpp's repetition penalty (divide positive logits, multiply
// negative ones) over a window, natively.
type repPenalty struct {
	window int
	p      float32
	seen   [][]int32 // History of every row of every call, for inspection
}

func (r *repPenalty) Window() int { return r.window }
func (r *repPenalty) Apply(_ context.Context, rows []sdk.PenaltyRow) error {
	for i := range rows {
		r.seen = append(r.seen, append([]int32(nil), rows[i].History...))
		for x, l := range rows[i].Logits {
			if l > 0 {
				rows[i].Logits[x] = l / r.p
			} else {
				rows[i].Logits[x] = l * r.p
			}
		}
	}
	return nil
}

// newFakeSession builds a session over fakes.
func newFakeSession(target, draft *fakeLM, v Vocab, draftMax int) *Session {
	s := &Session{target: target, vocab: v, batch: 7, draftMax: draftMax}
	if draft != nil {
		s.draft = draft
	}
	s.setDefaults()
	return s
}
