package engine

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/sdk"
)

// judge turns a verify round's logits rows into the sampler's decision: the penalty
// adjusts each row for exactly the history sequential decoding would have had before
// it, then the sampler sees each row's candidates and accepts a prefix of the draft.
type judge struct {
	sampler sdk.Sampler
	penalty sdk.Penalty
	needs   sdk.Needs
	vocab   int

	prows  []sdk.PenaltyRow
	srows  []sdk.SampleRow
	window []int32
	iota   []int32
	ids    []int32
	vals   []float32
}

// run decides a round: rows holds len(draft)+1 rows of vocab logits (row i scores the
// token after hist+draft[:i]) and is modified in place by the penalty. step is the
// number of tokens generated so far.
func (j *judge) run(ctx context.Context, rows []float32, hist, draft []int32, seed, step uint64) (sdk.SampleResult, error) {
	nr, v := len(draft)+1, j.vocab
	if len(rows) < nr*v {
		return sdk.SampleResult{}, fmt.Errorf("BUG: engine: %d logits for %d rows of %d", len(rows), nr, v)
	}
	if err := j.applyPenalty(ctx, rows, hist, draft); err != nil {
		return sdk.SampleResult{}, err
	}
	k := j.needs.TopK
	if k < 0 || k > v {
		k = 0
	}
	if k == 0 && len(j.iota) != v {
		j.iota = make([]int32, v)
		for i := range j.iota {
			j.iota[i] = int32(i)
		}
	}
	if cap(j.ids) < nr*k {
		j.ids, j.vals = make([]int32, nr*k), make([]float32, nr*k)
	}
	j.srows = j.srows[:0]
	for i := range nr {
		row := rows[i*v : (i+1)*v]
		sr := sdk.SampleRow{}
		sr.MaxLogit, sr.LogSumExp = maxLSE(row)
		if i < len(draft) {
			sr.DraftLogit = row[draft[i]]
		}
		if k == 0 {
			sr.IDs, sr.Logits = j.iota, row
		} else {
			sr.IDs, sr.Logits = j.ids[i*k:(i+1)*k], j.vals[i*k:(i+1)*k]
			backend.TopKRow(row, sr.IDs, sr.Logits)
		}
		j.srows = append(j.srows, sr)
	}
	return j.sample(ctx, draft, seed, step)
}

// maxStatsK is the most candidates per row the engine asks a backend's RowStats for
// (every CUDA tier selects up to 64 on the device).
const maxStatsK = 64

// statsK is the candidate count with which the round's rows can be judged from their
// statistics alone (runStats), or 0 when the full rows are needed: the sampler wants
// 1…maxStatsK candidates and no penalty window has to adjust the rows first.
func (j *judge) statsK() int {
	k := j.needs.TopK
	if k < 1 || k > maxStatsK || k > j.vocab {
		return 0
	}
	if j.penalty != nil && j.penalty.Window() > 0 {
		return 0
	}
	return k
}

// runStats decides a round like run, from the rows' statistics (st.K == statsK(), one
// row per draft token plus one, Picked[i] the logit of draft[i]) instead of the rows:
// the sampler sees exactly the SampleRows run would build.
func (j *judge) runStats(ctx context.Context, st *model.RowStats, draft []int32, seed, step uint64) (sdk.SampleResult, error) {
	nr, k := len(draft)+1, st.K
	if k != j.needs.TopK || len(st.IDs) < nr*k || len(st.Vals) < nr*k || len(st.Max) < nr || len(st.LSE) < nr || len(st.Picked) < nr {
		return sdk.SampleResult{}, fmt.Errorf("BUG: engine: statistics of %d rows of %d candidates for %d rows of %d", len(st.Max), st.K, nr, j.needs.TopK)
	}
	j.srows = j.srows[:0]
	for i := range nr {
		sr := sdk.SampleRow{IDs: st.IDs[i*k : (i+1)*k], Logits: st.Vals[i*k : (i+1)*k], MaxLogit: st.Max[i], LogSumExp: st.LSE[i]}
		if i < len(draft) {
			sr.DraftLogit = st.Picked[i]
		}
		j.srows = append(j.srows, sr)
	}
	return j.sample(ctx, draft, seed, step)
}

// sample asks the sampler about the round in j.srows and checks its answer.
func (j *judge) sample(ctx context.Context, draft []int32, seed, step uint64) (sdk.SampleResult, error) {
	v := j.vocab
	res, err := j.sampler.Sample(ctx, &sdk.SampleRound{Rows: j.srows, Draft: draft, Seed: seed, Step: step})
	if err != nil {
		return res, fmt.Errorf("engine: sampler: %w", err)
	}
	if res.Accepted < 0 || res.Accepted > len(draft) || res.Next < 0 || int(res.Next) >= v {
		return res, fmt.Errorf("engine: sampler: invalid result (accepted %d of %d drafts, next %d, vocabulary %d)", res.Accepted, len(draft), res.Next, v)
	}
	return res, nil
}

// applyPenalty gives the penalty one row per verify row: the last Window tokens of
// hist+draft[:i], their distinct ids in first-seen order and the row's logits of them;
// the adjusted logits are written back into rows.
func (j *judge) applyPenalty(ctx context.Context, rows []float32, hist, draft []int32) error {
	if j.penalty == nil {
		return nil
	}
	w := j.penalty.Window()
	if w <= 0 {
		return nil
	}
	v := j.vocab
	j.prows = j.prows[:0]
	for i := range len(draft) + 1 {
		j.window = append(append(j.window[:0], hist...), draft[:i]...)
		win := j.window[max(0, len(j.window)-w):]
		pr := sdk.PenaltyRow{History: append([]int32(nil), win...)}
		seen := map[int32]bool{}
		for _, t := range win {
			if !seen[t] {
				seen[t] = true
				pr.IDs = append(pr.IDs, t)
				pr.Logits = append(pr.Logits, rows[i*v+int(t)])
			}
		}
		j.prows = append(j.prows, pr)
	}
	if err := j.penalty.Apply(ctx, j.prows); err != nil {
		return fmt.Errorf("engine: penalty: %w", err)
	}
	for i, pr := range j.prows {
		if len(pr.Logits) != len(pr.IDs) {
			return fmt.Errorf("engine: penalty: row %d: %d logits for %d ids", i, len(pr.Logits), len(pr.IDs))
		}
		for x, t := range pr.IDs {
			rows[i*v+int(t)] = pr.Logits[x]
		}
	}
	return nil
}

// maxLSE returns the largest value of row (NaN ignored) and log Σ exp(row), with the
// special cases of backend.SpecialLSE, as a backend's RowStats does. Rows of a large
// vocabulary are split over the cores (each part's max and sum, then combined): the
// engine runs it between forwards, when the cores are otherwise idle.
func maxLSE(row []float32) (float32, float32) {
	parts := min(runtime.GOMAXPROCS(0), 4, len(row)/(1<<14))
	if parts < 2 {
		p := partLSE(row)
		if lse, ok := backend.SpecialLSE(p.m, p.nan); ok {
			return p.m, lse
		}
		return p.m, p.m + float32(math.Log(p.sum))
	}
	ps := make([]lsePart, parts)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() {
			ps[p] = partLSE(row[p*len(row)/parts : (p+1)*len(row)/parts])
		})
	}
	wg.Wait()
	m, nan := float32(math.Inf(-1)), false
	for _, p := range ps {
		m, nan = max(m, p.m), nan || p.nan
	}
	if lse, ok := backend.SpecialLSE(m, nan); ok {
		return m, lse
	}
	var sum float64
	for _, p := range ps {
		if !math.IsInf(float64(p.m), -1) { // a part of only −Inf adds nothing
			sum += p.sum * math.Exp(float64(p.m-m))
		}
	}
	return m, m + float32(math.Log(sum))
}

// lsePart is a part of a row's max (NaN ignored), whether it holds a NaN, and
// Σ exp(x − max) when the max is finite.
type lsePart struct {
	m   float32
	nan bool
	sum float64
}

func partLSE(row []float32) lsePart {
	m, nan := backend.RowMax(row)
	if nan || math.IsInf(float64(m), 0) { // the sum decides nothing
		return lsePart{m: m, nan: nan}
	}
	var sum float64
	for _, x := range row {
		sum += float64(expNeg(x - m))
	}
	return lsePart{m: m, sum: sum}
}

// argmaxProb returns the best id of a logits row (backend.Argmax) and its softmax
// probability.
func argmaxProb(row []float32) (int32, float32) {
	best := backend.Argmax(row)
	_, lse := maxLSE(row)
	return int32(best), prob(row[best], lse)
}

// prob is the softmax probability of a logit in a row of log-sum-exp lse.
func prob(logit, lse float32) float32 { return float32(math.Exp(float64(logit - lse))) }

// topLogits is the k best raw logits of a row.
func topLogits(row []float32, k int) []TopLogit {
	k = min(k, len(row))
	ids, vals := make([]int32, k), make([]float32, k)
	backend.TopKRow(row, ids, vals)
	out := make([]TopLogit, k)
	for i := range out {
		out[i] = TopLogit{ID: ids[i], Logit: vals[i]}
	}
	return out
}
