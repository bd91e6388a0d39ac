package builtin

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/minfer/minfer/sdk"
)

func row(ids []int32, logits []float32) sdk.SampleRow { return sdk.SampleRow{IDs: ids, Logits: logits} }

func TestGreedy(t *testing.T) {
	g, err := NewGreedy([]byte(`{"temperature":0,"top_k":40,"top_p":0.9,"min_p":0.1}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		draft []int32
		rows  []sdk.SampleRow
		want  sdk.SampleResult
	}{
		{"plain", nil, []sdk.SampleRow{row([]int32{3}, []float32{1})}, sdk.SampleResult{Accepted: 0, Next: 3}},
		{"all accepted", []int32{3, 4}, []sdk.SampleRow{row([]int32{3}, []float32{1}), row([]int32{4}, []float32{1}), row([]int32{9}, []float32{1})}, sdk.SampleResult{Accepted: 2, Next: 9}},
		{"first rejected", []int32{3, 4}, []sdk.SampleRow{row([]int32{5}, []float32{1}), row([]int32{4}, []float32{1}), row([]int32{9}, []float32{1})}, sdk.SampleResult{Accepted: 0, Next: 5}},
		{"unsorted full row, tie to lower id", []int32{2}, []sdk.SampleRow{row([]int32{0, 1, 2}, []float32{1, 3, 3}), row([]int32{0}, []float32{0})}, sdk.SampleResult{Accepted: 0, Next: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := g.Sample(context.Background(), &sdk.SampleRound{Draft: tc.draft, Rows: tc.rows})
			if err != nil || got != tc.want {
				t.Fatalf("got %+v %v, want %+v", got, err, tc.want)
			}
		})
	}
	if _, err := g.Sample(context.Background(), &sdk.SampleRound{Draft: []int32{1}, Rows: []sdk.SampleRow{row([]int32{1}, []float32{1})}}); err == nil {
		t.Fatal("rows ≠ draft+1: got nil error")
	}
}

func TestSamplingTruncation(t *testing.T) {
	// logits chosen so softmax at T=1 is 0.5, 0.25, 0.125, 0.0625, 0.0625
	l := []float32{0, float32(-math.Ln2), float32(-2 * math.Ln2), float32(-3 * math.Ln2), float32(-3 * math.Ln2)}
	ids := []int32{10, 11, 12, 13, 14}
	for _, tc := range []struct {
		params string
		kept   int
	}{
		{`{"top_k":0,"top_p":1,"min_p":0}`, 5},
		{`{"top_k":2,"top_p":1,"min_p":0}`, 2},
		{`{"top_k":0,"top_p":0.75,"min_p":0}`, 2},
		{`{"top_k":0,"top_p":0.8,"min_p":0}`, 3},
		{`{"top_k":0,"top_p":1,"min_p":0.2}`, 3},
	} {
		t.Run(tc.params, func(t *testing.T) {
			s, err := NewSampling([]byte(tc.params))
			if err != nil {
				t.Fatal(err)
			}
			r := row(ids, l)
			s.distribution(&r)
			if len(s.idx) != tc.kept {
				t.Fatalf("kept %d candidates, want %d", len(s.idx), tc.kept)
			}
			sum := 0.0
			for _, p := range s.probs {
				sum += p
			}
			if math.Abs(sum-1) > 1e-9 {
				t.Fatalf("probabilities sum to %v", sum)
			}
		})
	}
}

// TestSpeculativeSamplingIsExact checks that with a (deterministic) draft the first
// emitted token follows the target distribution, whatever the draft proposes.
func TestSpeculativeSamplingIsExact(t *testing.T) {
	s, err := NewSampling([]byte(`{"temperature":0.7,"top_k":0,"top_p":1,"min_p":0}`))
	if err != nil {
		t.Fatal(err)
	}
	ids := []int32{0, 1, 2, 3}
	logits := []float32{1.5, 1.0, 0.2, -1}
	want := make([]float64, 4)
	sum := 0.0
	for i, l := range logits {
		want[i] = math.Exp(float64(l) / 0.7)
		sum += want[i]
	}
	for i := range want {
		want[i] /= sum
	}
	const n = 40000
	for _, draft := range []int32{0, 2, 3, 7} { // likely, unlikely, rarest, not a candidate
		counts := make([]float64, 4)
		for step := uint64(0); step < n; step++ {
			r := &sdk.SampleRound{Draft: []int32{draft}, Rows: []sdk.SampleRow{row(ids, logits), row(ids, logits)}, Seed: 99, Step: step}
			res, err := s.Sample(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			first := res.Next
			if res.Accepted == 1 {
				first = draft
			}
			counts[first]++
		}
		for i := range counts {
			if got := counts[i] / n; math.Abs(got-want[i]) > 0.01 {
				t.Errorf("draft %d: token %d frequency %.4f, want %.4f", draft, i, got, want[i])
			}
		}
	}
}

func TestSamplingReproducible(t *testing.T) {
	s, _ := NewSampling(nil)
	ids := []int32{5, 6, 7}
	r := func() *sdk.SampleRound {
		return &sdk.SampleRound{Draft: []int32{6}, Rows: []sdk.SampleRow{row(ids, []float32{1, 1, 1}), row(ids, []float32{1, 1, 1})}, Seed: 3, Step: 11}
	}
	a, _ := s.Sample(context.Background(), r())
	b, _ := s.Sample(context.Background(), r())
	if a != b {
		t.Fatalf("same seed and step: got %+v and %+v", a, b)
	}
}

func TestPenaltyMatchesLlamaCpp(t *testing.T) {
	p, err := NewPenalty([]byte(`{"repeat_penalty":1.5,"repeat_last_n":3,"presence_penalty":0.25,"frequency_penalty":0.5}`))
	if err != nil {
		t.Fatal(err)
	}
	if p.Window() != 3 {
		t.Fatalf("window: got %d, want 3", p.Window())
	}
	// history longer than the window: token 9 falls out of it
	rows := []sdk.PenaltyRow{{History: []int32{9, 4, 5, 4}, IDs: []int32{9, 4, 5}, Logits: []float32{2, 3, -1}}}
	if err := p.Apply(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	want := []float32{2, 3/1.5 - (2*0.5 + 0.25), -1*1.5 - (1*0.5 + 0.25)}
	for i := range want {
		if rows[0].Logits[i] != want[i] {
			t.Fatalf("logits: got %v, want %v", rows[0].Logits, want)
		}
	}
	off, _ := NewPenalty([]byte(`{"repeat_penalty":1,"repeat_last_n":64}`))
	if off.Window() != 0 {
		t.Fatalf("all penalties off: window %d, want 0", off.Window())
	}
	all, _ := NewPenalty([]byte(`{"repeat_penalty":1.1,"repeat_last_n":-1}`))
	if all.Window() < 1<<20 {
		t.Fatalf("repeat_last_n -1: window %d, want the whole context", all.Window())
	}
}

func TestParamErrors(t *testing.T) {
	for _, tc := range []struct{ plugin, params, want string }{
		{"adaptive", `{"hysteresis":-1}`, "hysteresis"},
		{"adaptive", `{"nope":1}`, `unknown field "nope"`},
		{"ucb", `{"discount":2}`, "discount"},
		{"static", `{"depth":-3}`, "depth"},
		{"sampling", `{"temperature":"hot"}`, "temperature"},
		{"penalty", `{"repeat_penalty":0}`, "repeat_penalty"},
		{"greedy", `{"depth":1}`, `unknown field "depth"`},
	} {
		t.Run(tc.plugin+" "+tc.params, func(t *testing.T) {
			p, _ := Lookup(tc.plugin)
			var err error
			switch {
			case p.NewPolicy != nil:
				_, err = p.NewPolicy([]byte(tc.params))
			case p.NewSampler != nil:
				_, err = p.NewSampler([]byte(tc.params))
			default:
				_, err = p.NewPenalty([]byte(tc.params))
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.plugin) {
				t.Fatalf("got %v, want an error naming %s and %q", err, tc.plugin, tc.want)
			}
		})
	}
}

func TestStatic(t *testing.T) {
	s, _ := NewStatic([]byte(`{"depth":6,"min_conf":0.1}`))
	for _, tc := range []struct {
		last sdk.RoundOutcome
		want int
	}{
		{sdk.RoundOutcome{Round: -1}, 6},
		{sdk.RoundOutcome{Round: -1, MaxDepth: 4}, 4},
		{sdk.RoundOutcome{Round: 3, MaxDepth: 8}, 6},
		{sdk.RoundOutcome{Round: 3, MaxDepth: 0}, 0},
	} {
		d, _ := s.NextDepth(context.Background(), tc.last)
		if d.Depth != tc.want || d.MinConf != 0.1 {
			t.Errorf("%+v: got %+v, want depth %d", tc.last, d, tc.want)
		}
	}
}

// TestPenaltyRowsMatchReference compares Apply (which updates counts from row to row)
// with a direct count per row, on rows built like the engine's (the window growing or
// sliding by one drafted token per row) and on unrelated rows.
func TestPenaltyRowsMatchReference(t *testing.T) {
	const w = 16
	p, _ := NewPenalty([]byte(`{"repeat_penalty":1.3,"repeat_last_n":16,"presence_penalty":0.2,"frequency_penalty":0.1}`))
	g := rand.New(rand.NewPCG(4, 4))
	for trial := 0; trial < 300; trial++ {
		base := make([]int32, g.IntN(24))
		for i := range base {
			base[i] = int32(g.IntN(12))
		}
		var rows []sdk.PenaltyRow
		for r := 0; r < 1+g.IntN(8); r++ {
			hist := append([]int32(nil), base...)
			if trial%5 == 4 { // unrelated rows
				hist = hist[:g.IntN(len(hist)+1)]
			}
			if len(hist) > w {
				hist = hist[len(hist)-w:]
			}
			row := sdk.PenaltyRow{History: hist}
			seen := map[int32]bool{}
			for _, tok := range hist {
				if !seen[tok] {
					seen[tok] = true
					row.IDs = append(row.IDs, tok)
					row.Logits = append(row.Logits, float32(g.NormFloat64()*3))
				}
			}
			rows = append(rows, row)
			base = append(base, int32(g.IntN(12))) // the next drafted token
		}
		want := make([][]float32, len(rows))
		for i, row := range rows {
			counts := map[int32]int{}
			for _, tok := range row.History {
				counts[tok]++
			}
			for j, id := range row.IDs {
				l := row.Logits[j]
				if l <= 0 {
					l *= 1.3
				} else {
					l /= 1.3
				}
				want[i] = append(want[i], l-(float32(counts[id])*0.1+0.2))
			}
		}
		if err := p.Apply(context.Background(), rows); err != nil {
			t.Fatal(err)
		}
		for i := range rows {
			if !slices.Equal(rows[i].Logits, want[i]) {
				t.Fatalf("trial %d row %d: got %v, want %v", trial, i, rows[i].Logits, want[i])
			}
		}
	}
}

// TestFullRowsMatchSorted: a full, unsorted row (top_k 0) keeps exactly the candidates
// and probabilities that the same row sorted best first does, though only the
// candidates that top_p and min_p can keep are sorted.
func TestFullRowsMatchSorted(t *testing.T) {
	g := rand.New(rand.NewPCG(8, 8))
	for _, params := range []string{
		`{"temperature":0.8,"top_k":0,"top_p":0.95,"min_p":0.05}`,
		`{"temperature":1.2,"top_k":0,"top_p":0.5,"min_p":0}`,
		`{"temperature":0.7,"top_k":0,"top_p":1,"min_p":0.2}`,
		`{"temperature":1,"top_k":0,"top_p":1,"min_p":0}`,
	} {
		s, err := NewSampling([]byte(params))
		if err != nil {
			t.Fatal(err)
		}
		for trial := 0; trial < 20; trial++ {
			full := sdk.SampleRow{}
			for id := 0; id < 2000; id++ {
				full.IDs = append(full.IDs, int32(id))
				full.Logits = append(full.Logits, float32(g.NormFloat64()*2))
			}
			s.distribution(&full)
			gotIDs := make([]int32, len(s.idx))
			for k, j := range s.idx {
				gotIDs[k] = full.IDs[j]
			}
			gotP := append([]float64(nil), s.probs...)

			sorted := sdk.SampleRow{IDs: append([]int32(nil), full.IDs...), Logits: append([]float32(nil), full.Logits...)}
			idx := make([]int, len(sorted.IDs))
			for i := range idx {
				idx[i] = i
			}
			slices.SortFunc(idx, func(a, b int) int {
				if better(&full, a, b) {
					return -1
				}
				return 1
			})
			for k, j := range idx {
				sorted.IDs[k], sorted.Logits[k] = full.IDs[j], full.Logits[j]
			}
			s.distribution(&sorted)
			if len(s.idx) != len(gotIDs) {
				t.Fatalf("%s: full row kept %d, sorted row %d", params, len(gotIDs), len(s.idx))
			}
			for k, j := range s.idx {
				if sorted.IDs[j] != gotIDs[k] || math.Abs(s.probs[k]-gotP[k]) > 1e-12 {
					t.Fatalf("%s: candidate %d: full row %d p=%v, sorted row %d p=%v", params, k, gotIDs[k], gotP[k], sorted.IDs[j], s.probs[k])
				}
			}
		}
	}
}

// TestAdaptiveNewRequest: a kept instance starting another request (Round -1 after
// rounds) keeps its depth and costs instead of starting over at `start`, and keeps a
// `carry` share of the acceptance evidence.
func TestAdaptiveNewRequest(t *testing.T) {
	ctx := context.Background()
	a, err := NewAdaptive([]byte(`{"start":4,"carry":0.5,"auto_cut":false}`))
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := NewAdaptive([]byte(`{"start":4}`))
	if d, _ := fresh.NextDepth(ctx, sdk.RoundOutcome{Round: -1, MaxDepth: 8}); d.Depth != 4 {
		t.Fatalf("a new instance starts at depth %d, want start = 4", d.Depth)
	}
	// A regime where depth 1 wins: the first draft token accepted 60% of the time,
	// deeper ones rarely; verify costs flat up to 2 rows.
	last := sdk.RoundOutcome{Round: -1, MaxDepth: 8}
	verify := map[int]int64{1: 200000, 2: 200000, 3: 240000, 4: 250000, 5: 260000, 6: 270000, 7: 280000, 8: 290000, 9: 300000}
	for r := range 200 {
		d, err := a.NextDepth(ctx, last)
		if err != nil {
			t.Fatal(err)
		}
		acc := 0
		if d.Depth > 0 && r%5 < 3 {
			acc = 1
		}
		last = sdk.RoundOutcome{Round: r, Depth: d.Depth, Drafted: d.Depth, Accepted: acc, DraftNs: int64(d.Depth) * 70000,
			VerifyNs: verify[d.Depth+1], MaxDepth: 8}
	}
	d, _ := a.NextDepth(ctx, last)
	if d.Depth != 1 {
		t.Fatalf("after 200 rounds: depth %d, want 1", d.Depth)
	}
	before := a.succ[1]*a.scale + a.fail[1]*a.scale
	d, _ = a.NextDepth(ctx, sdk.RoundOutcome{Round: -1, MaxDepth: 8})
	if d.Depth != 1 {
		t.Errorf("next request starts at depth %d, want 1 (where the last one ended)", d.Depth)
	}
	if after := a.succ[1]*a.scale + a.fail[1]*a.scale; math.Abs(after-before/2) > 1e-9*before {
		t.Errorf("position 1 evidence %v after a new request, want half of %v", after, before)
	}
	if _, ok := a.steps.min(); !ok {
		t.Error("the step cost was forgotten at the new request")
	}
}
