package cpu

import (
	"math"
	"slices"

	"github.com/minfer/minfer/core/backend"
)

var _ backend.RowStatser = (*Backend)(nil)

// rowStatsChunk is the span of a row one task of RowStats summarises (its max and
// Σ exp(x − max)); the parts of a row combine in chunk order, so the results depend only
// on n, not on nt or the thread count. A 151,936-value row makes 19 tasks, so a single
// row (a decode step) spreads over every worker.
const rowStatsChunk = 8192

// lsePart is one chunk's max (NaN ignored), Σ exp(x − max), whether it held a NaN, and
// (the best candidate's id, for k = 1) the chunk-relative index of its first max, or of
// its first −Inf when it holds no greater number, or −1 when it holds only NaN.
type lsePart struct {
	m, s float32
	nan  bool
	best int
}

// RowStats computes each row's k best values, max, log-sum-exp and picked logit (see
// backend.RowStatser). The exponentials are expf's (AVX-512 where the CPU has it), so
// the engine's judge and the draft's confidence get them at a fraction of the cost of
// its scalar path.
func (b *Backend) RowStats(logits backend.Buffer, nt, n, k int, pick []int32, ids []int32, vals []float32, maxv, lse, picked []float32) error {
	if b.closed {
		return errClosed
	}
	checkNT(nt, "RowStats")
	l := f32(logits, nt*n, "RowStats logits")
	if err := backend.CheckRowStats("cpu", nt, n, k, pick, ids, vals, maxv, lse, picked); err != nil {
		return err
	}
	if err := b.takeErr(); err != nil {
		return err
	}
	chunks := (n + rowStatsChunk - 1) / rowStatsChunk
	if cap(b.parts) < nt*chunks {
		b.parts = make([]lsePart, nt*chunks)
	}
	parts := b.parts[:nt*chunks]
	b.pool.chunksWork(nt*n, nt*chunks, 1, func(w, lo, hi int) {
		buf := b.lseScratch(w)
		for i := lo; i < hi; i++ {
			r, c := i/chunks, i%chunks
			parts[i] = lseOf(l[r*n+c*rowStatsChunk:r*n+min((c+1)*rowStatsChunk, n)], buf)
		}
	})
	b.parallelRows(nt, func(r int) {
		row := l[r*n : (r+1)*n]
		maxv[r], lse[r] = combineLSE(parts[r*chunks : (r+1)*chunks])
		switch {
		case k == 1: // the chunks found it: the first max, as TopK ranks
			ids[r] = int32(bestOf(parts[r*chunks : (r+1)*chunks]))
			vals[r] = row[ids[r]]
		case k > 1:
			backend.TopKRow(row, ids[r*k:(r+1)*k], vals[r*k:(r+1)*k])
		}
		picked[r] = 0
		if pick[r] >= 0 {
			picked[r] = row[pick[r]]
		}
	})
	return nil
}

// lseScratch is worker w's buffer for a chunk's exponentials.
func (b *Backend) lseScratch(w int) []float32 {
	sc := &b.workers[w]
	if len(sc.lse) < rowStatsChunk {
		sc.lse = make([]float32, rowStatsChunk)
	}
	return sc.lse
}

// lseOf summarises one chunk, using buf (len ≥ len(x)) for x − max and its exponentials.
func lseOf(x, buf []float32) lsePart {
	p := lsePart{m: float32(math.Inf(-1)), best: -1}
	for i, v := range x {
		if v > p.m { // NaN never is
			p.m, p.best = v, i
		}
	}
	if math.IsInf(float64(p.m), 0) { // +Inf, or no number above −Inf: no sum needed
		p.nan = slices.ContainsFunc(x, func(v float32) bool { return v != v })
		if p.best < 0 {
			p.best = slices.IndexFunc(x, func(v float32) bool { return v == v }) // a −Inf, or −1
		}
		return p
	}
	e := buf[:len(x)]
	for i, v := range x {
		e[i] = v - p.m
	}
	expfs(e, e)
	// Σ e as ggml_vec_dot_f32(e, 1): four 16-wide accumulators, a fixed order for a given
	// length. Under a finite max every exp(x − max) is in [0, 1], so the sum is NaN
	// exactly when x holds a NaN.
	p.s = dotVecF32(e, ones[:len(e)])
	p.nan = p.s != p.s
	return p
}

// ones is the other operand of lseOf's sum.
var ones = func() []float32 {
	v := make([]float32, rowStatsChunk)
	for i := range v {
		v[i] = 1
	}
	return v
}()

// bestOf is the row index of TopK's first candidate from the row's chunk summaries: the
// first chunk's best among those of the largest max; a row of only NaN gives 0.
func bestOf(parts []lsePart) int {
	at := -1
	for c, p := range parts {
		if p.best >= 0 && (at < 0 || p.m > parts[at].m) {
			at = c
		}
	}
	if at < 0 {
		return 0
	}
	return at*rowStatsChunk + parts[at].best
}

// combineLSE merges a row's chunk summaries, in order, into its max and log Σ exp with
// RowStats' special cases (backend.SpecialLSE).
func combineLSE(parts []lsePart) (float32, float32) {
	m, nan := float32(math.Inf(-1)), false
	for _, p := range parts {
		if p.m > m {
			m = p.m
		}
		nan = nan || p.nan
	}
	if lse, ok := backend.SpecialLSE(m, nan); ok {
		return m, lse
	}
	var s float32
	for _, p := range parts {
		if !math.IsInf(float64(p.m), -1) { // a chunk of only −Inf adds nothing
			s += p.s * expf(p.m-m)
		}
	}
	return m, m + float32(math.Log(float64(s)))
}
