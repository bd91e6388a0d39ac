package engine

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/internal/golden"
	"github.com/minfer/minfer/sdk"
)

// recRounds records every SampleRound (deeply) and decides from every field of the
// rows: a draft token is accepted while its probability (DraftLogit, LogSumExp) is at
// least a third of the best one's (MaxLogit), and the next token is candidate
// Step % K of the deciding row — so a difference in any field shows in the tokens too.
type recRounds struct {
	k      int
	rounds []sdk.SampleRound
}

func (r *recRounds) Needs() sdk.Needs { return sdk.Needs{TopK: r.k} }
func (r *recRounds) Sample(_ context.Context, s *sdk.SampleRound) (sdk.SampleResult, error) {
	c := *s
	c.Draft = slices.Clone(s.Draft)
	c.Rows = make([]sdk.SampleRow, len(s.Rows))
	for i, row := range s.Rows {
		row.IDs, row.Logits = slices.Clone(row.IDs), slices.Clone(row.Logits)
		c.Rows[i] = row
	}
	r.rounds = append(r.rounds, c)
	p := func(l, lse float32) float64 { return math.Exp(float64(l - lse)) }
	for i := range s.Draft {
		row := s.Rows[i]
		if p(row.DraftLogit, row.LogSumExp) < p(row.MaxLogit, row.LogSumExp)/3 {
			return sdk.SampleResult{Accepted: i, Next: row.IDs[int(s.Step)%len(row.IDs)]}, nil
		}
	}
	last := s.Rows[len(s.Draft)]
	return sdk.SampleResult{Accepted: len(s.Draft), Next: last.IDs[int(s.Step)%len(last.IDs)]}, nil
}

// confPolicy asks for a fixed depth with an early-exit confidence and records the
// outcomes' draft confidences.
type confPolicy struct {
	depth int
	conf  float32
	seen  [][]float32
}

func (p *confPolicy) NextDepth(_ context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	p.seen = append(p.seen, slices.Clone(last.DraftConf))
	return sdk.DepthDecision{Depth: p.depth, MinConf: p.conf}, nil
}

// TestStatsPathMatchesRowPath: judging a round from the rows' statistics (what a
// backend with RowStats computes) gives the sampler exactly the SampleRows of the
// full-row path, and drafting from the statistics exactly the same tokens and
// confidences, on rows with tied best candidates; and the statistics path is taken
// exactly when it is exact (1 ≤ K ≤ 64, no penalty window, no top logits that round).
func TestStatsPathMatchesRowPath(t *testing.T) {
	const v = 300
	prompt := []int32{4, 8, 15, 16, 23, 42, 7, 9, 11}
	type tcase struct {
		name      string
		k         int
		ties      int
		depth     int
		conf      float32
		penalty   bool
		topLogits int
		// wantStats: whether verify rounds after the first use the statistics
		wantStats bool
	}
	cases := []tcase{
		{name: "greedy k=1 plain", k: 1, wantStats: true},
		{name: "k=1 ties depth 4", k: 1, ties: 7, depth: 4, wantStats: true},
		{name: "k=5 ties depth 3", k: 5, ties: 11, depth: 3, conf: 0.02, wantStats: true},
		{name: "k=40 ties depth 8", k: 40, ties: 5, depth: 8, wantStats: true},
		{name: "k=64 depth 2", k: 64, depth: 2, conf: 0.025, wantStats: true},
		{name: "k=64 top logits", k: 64, ties: 9, depth: 2, topLogits: 5, wantStats: true},
		{name: "k=65 full rows", k: 65, depth: 2},
		{name: "penalty full rows", k: 5, ties: 7, depth: 3, penalty: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			type out struct {
				res     *Result
				rounds  []sdk.SampleRound
				conf    [][]float32
				tgt, dr *fakeLM
			}
			run := func(stats bool) out {
				tgt := &fakeLM{v: v, n: 512, ties: tc.ties, stats: stats}
				var dr *fakeLM
				req := Request{Prompt: prompt, NPredict: 40, TopLogits: tc.topLogits, Seed: 3}
				rec := &recRounds{k: tc.k}
				req.Sampler = rec
				pol := &confPolicy{depth: tc.depth, conf: tc.conf}
				if tc.depth > 0 {
					dr = &fakeLM{v: v, n: 512, ties: tc.ties, noise: 0.5, salt: 4, stats: stats}
					req.Policy = pol
				}
				if tc.penalty {
					req.Penalty = &repPenalty{window: 8, p: 1.3}
				}
				return out{generate(t, tgt, dr, fakeVocab{}, req), rec.rounds, pol.seen, tgt, dr}
			}
			rows, stats := run(false), run(true)
			if !reflect.DeepEqual(stats.rounds, rows.rounds) {
				for i := range min(len(stats.rounds), len(rows.rounds)) {
					if !reflect.DeepEqual(stats.rounds[i], rows.rounds[i]) {
						t.Fatalf("round %d: got %+v, want %+v", i, stats.rounds[i], rows.rounds[i])
					}
				}
				t.Fatalf("got %d rounds, want %d", len(stats.rounds), len(rows.rounds))
			}
			if !slices.Equal(stats.res.Tokens, rows.res.Tokens) || !reflect.DeepEqual(stats.conf, rows.conf) {
				t.Fatalf("got tokens %v conf %v, want %v %v", stats.res.Tokens, stats.conf, rows.res.Tokens, rows.conf)
			}
			g, w := stats.res.Spec, rows.res.Spec
			g.Ms, w.Ms = SpecMs{}, SpecMs{}
			if !reflect.DeepEqual(g, w) || !reflect.DeepEqual(stats.res.TopLogits, rows.res.TopLogits) {
				t.Fatalf("got spec %+v top %v, want %+v %v", g, stats.res.TopLogits, w, rows.res.TopLogits)
			}
			// the setup must exercise what it claims
			if tc.ties > 0 && !hasTie(rows.rounds) {
				t.Fatalf("no round has tied candidates")
			}
			if tc.ties > 0 && tc.k == 1 {
				for i, r := range rows.rounds {
					for _, row := range r.Rows {
						if row.IDs[0] != 3 { // the lowest of the tied best ids 3, 3+ties, …
							t.Fatalf("round %d: got best id %d, want 3", i, row.IDs[0])
						}
					}
				}
			}
			if tc.depth > 0 && rows.res.Spec.Accepted == 0 {
				t.Fatalf("no draft accepted: %+v", rows.res.Spec)
			}
			verify := len(rows.rounds)
			want := 0
			if tc.wantStats {
				want = verify
				if tc.topLogits > 0 {
					want-- // the first round reports the raw top logits from the row
				}
			}
			if got := stats.tgt.statsCalls; got != want {
				t.Fatalf("target: %d verify forwards through the statistics, want %d of %d", got, want, verify)
			}
			if tc.depth > 0 && stats.dr.statsCalls == 0 {
				t.Fatalf("the draft never used the statistics")
			}
			if rows.tgt.statsCalls != 0 {
				t.Fatalf("a fake without statistics was asked for them")
			}
		})
	}
}

// hasTie reports whether some round's candidates hold two equal logits (or, with one
// candidate per row, trivially true: the test checks the tie-break there).
func hasTie(rounds []sdk.SampleRound) bool {
	for _, r := range rounds {
		if len(r.Rows[0].IDs) == 1 {
			return true
		}
		for _, row := range r.Rows {
			for i := 1; i < len(row.Logits); i++ {
				if row.Logits[i] == row.Logits[i-1] {
					return true
				}
			}
		}
	}
	return false
}

// TestStatsPathGreedyIdentity: greedy speculative decoding through the statistics
// (target, draft or both) gives plain decoding's tokens, at every depth.
func TestStatsPathGreedyIdentity(t *testing.T) {
	const v, n = 97, 4096
	prompt := []int32{1, 5, 9, 14, 2, 77}
	plain := generate(t, &fakeLM{v: v, n: n}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: 60})
	for _, paths := range [][2]bool{{true, false}, {false, true}, {true, true}} {
		for depth := 0; depth <= 16; depth++ {
			name := fmt.Sprintf("target stats %t, draft stats %t, depth %d", paths[0], paths[1], depth)
			tgt := &fakeLM{v: v, n: n, stats: paths[0]}
			dr := &fakeLM{v: v, n: n, noise: 1.5, salt: 3, stats: paths[1]}
			req := Request{Prompt: prompt, NPredict: 60}
			if depth > 0 {
				req.Policy = FixedDepth(depth)
			} else {
				dr = nil
			}
			got := generate(t, tgt, dr, fakeVocab{}, req)
			if !slices.Equal(got.Tokens, plain.Tokens) {
				t.Fatalf("%s: got %v, want %v", name, got.Tokens, plain.Tokens)
			}
			if paths[0] && tgt.statsCalls == 0 {
				t.Fatalf("%s: the target never used the statistics", name)
			}
		}
	}
}

// hostStats is the CPU backend with RowStats computed on the host by the judge's own
// functions: a stand-in for a device backend, so the engine's real-model path
// (seq.forwardStats → model.RowStats) runs without a GPU.
type hostStats struct {
	*cpu.Backend
	calls int
}

func (b *hostStats) RowStats(logits backend.Buffer, nt, n, k int, pick []int32, ids []int32, vals []float32, maxv, lse, picked []float32) error {
	b.calls++
	rows := make([]float32, nt*n)
	if err := b.ReadF32(logits, 0, rows); err != nil {
		return err
	}
	for r := range nt {
		row := rows[r*n : (r+1)*n]
		if k > 0 {
			backend.TopKRow(row, ids[r*k:(r+1)*k], vals[r*k:(r+1)*k])
		}
		maxv[r], lse[r] = maxLSE(row)
		picked[r] = 0
		if pick[r] >= 0 {
			picked[r] = row[pick[r]]
		}
	}
	return nil
}

// noRowStats is a backend without row statistics: the CPU backend with its RowStats
// hidden (only backend.Backend's methods are promoted), so the engine reads full rows.
type noRowStats struct{ backend.Backend }

// TestModelStatsPath: on real models, a backend with RowStats gives the sampler the
// same rounds and the same tokens as the full-row path, plain and speculative.
func TestModelStatsPath(t *testing.T) {
	plainB := noRowStats{cpu.New(cpu.Options{Threads: 2})}
	defer plainB.Close()
	statsB := &hostStats{Backend: cpu.New(cpu.Options{Threads: 2})}
	defer statsB.Close()
	prompt := []int32{1, 450, 1996, 1354, 1701, 432, 12, 1002}
	for _, depth := range []int{0, 3} {
		var rounds [2][]sdk.SampleRound
		var toks [2][]int32
		for i, b := range []backend.Backend{plainB, statsB} {
			target := golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q8_0.gguf", "target")
			draft := golden.LoadModel(t, b, "models/synthetic/synth-qwen2-q4_0.gguf", "draft")
			s, err := NewSession(Config{Target: target, Draft: draft, Vocab: fakeVocab{}, Ctx: 128, Batch: 5})
			if err != nil {
				t.Fatal(err)
			}
			rec := &recRounds{k: 8}
			req := Request{Prompt: prompt, NPredict: 16, Sampler: rec}
			if depth > 0 {
				req.Policy = FixedDepth(depth)
			}
			res, err := s.Generate(bg, req)
			s.Close()
			if err != nil {
				t.Fatal(err)
			}
			rounds[i], toks[i] = rec.rounds, res.Tokens
		}
		if !reflect.DeepEqual(rounds[1], rounds[0]) || !slices.Equal(toks[1], toks[0]) {
			t.Fatalf("depth %d: got tokens %v, want %v (or the rounds differ)", depth, toks[1], toks[0])
		}
	}
	if statsB.calls == 0 {
		t.Fatalf("the backend's RowStats was never called")
	}
}

// TestFeedStats: feedStats runs feedLast's forwards (the same chunks) and returns the
// statistics of the row feedLast returns.
func TestFeedStats(t *testing.T) {
	ids := []int32{5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	for _, batch := range []int{1, 5, 6, 12, 20} {
		a, b := &fakeLM{v: 50, n: 64, ties: 9}, &fakeLM{v: 50, n: 64, ties: 9, stats: true}
		row, err := feedLast(bg, a, ids, batch)
		if err != nil {
			t.Fatal(err)
		}
		st, err := feedStats(bg, b, ids, batch, 3)
		if err != nil {
			t.Fatal(err)
		}
		wi, wv := make([]int32, 3), make([]float32, 3)
		backend.TopKRow(row, wi, wv)
		wm, wl := maxLSE(row)
		if a.calls != b.calls || !slices.Equal(st.IDs, wi) || !slices.Equal(st.Vals, wv) || st.Max[0] != wm || st.LSE[0] != wl {
			t.Errorf("batch %d: got %d forwards, %v %v %v %v; want %d, %v %v %v %v",
				batch, b.calls, st.IDs, st.Vals, st.Max[0], st.LSE[0], a.calls, wi, wv, wm, wl)
		}
	}
}
