package engine

import (
	"context"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/internal/enginetest"
	"github.com/minfer/minfer/internal/testpath"
	"github.com/minfer/minfer/sdk"
)

var bg = context.Background()

func TestJudgeHandBuiltRows(t *testing.T) {
	const v = 5
	// rows[i] scores the token after draft[:i]; argmaxes: 3, 1, 4, 0
	rows := []float32{
		0, 1, 2, 9, 3,
		0, 7, 2, 1, 3,
		1, 1, 2, 1, 5,
		8, 1, 2, 1, 3,
	}
	for _, tc := range []struct {
		name       string
		draft      []int32
		wantAcc    int
		wantNext   int32
		penalty    *repPenalty
		wantWindow [][]int32
	}{
		{"all accepted", []int32{3, 1, 4}, 3, 0, nil, nil},
		{"first rejected", []int32{2, 1, 4}, 0, 3, nil, nil},
		{"middle rejected", []int32{3, 1, 2}, 2, 4, nil, nil},
		{"no draft", nil, 0, 3, nil, nil},
		// history [7 3], window 3: row i sees the last 3 of hist+draft[:i]. The
		// penalty divides the seen positive logits by 100, so row 0's 3 (9 → 0.09)
		// loses to 4 (3) and the draft is rejected at once.
		{"penalty windows", []int32{3, 1, 4}, 0, 4, &repPenalty{window: 3, p: 100},
			[][]int32{{0, 7, 3}, {7, 3, 3}, {3, 3, 1}, {3, 1, 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := judge{sampler: enginetest.Greedy{}, needs: enginetest.Greedy{}.Needs(), vocab: v}
			if tc.penalty != nil {
				j.penalty = tc.penalty
			}
			nr := len(tc.draft) + 1
			r := slices.Clone(rows[:nr*v])
			got, err := j.run(bg, r, []int32{0, 7, 3}, tc.draft, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got.Accepted != tc.wantAcc || got.Next != tc.wantNext {
				t.Fatalf("got accepted %d next %d, want %d %d", got.Accepted, got.Next, tc.wantAcc, tc.wantNext)
			}
			if tc.penalty != nil && !reflect.DeepEqual(tc.penalty.seen, tc.wantWindow) {
				t.Fatalf("penalty histories: got %v, want %v", tc.penalty.seen, tc.wantWindow)
			}
		})
	}
}

// badSampler returns a fixed (invalid) result.
type badSampler sdk.SampleResult

func (badSampler) Needs() sdk.Needs { return sdk.Needs{TopK: 2} }
func (b badSampler) Sample(context.Context, *sdk.SampleRound) (sdk.SampleResult, error) {
	return sdk.SampleResult(b), nil
}

func TestJudgeRejectsBadSampler(t *testing.T) {
	for _, r := range []sdk.SampleResult{{Accepted: 2, Next: 0}, {Accepted: -1}, {Next: 5}, {Next: -1}} {
		j := judge{sampler: badSampler(r), needs: sdk.Needs{TopK: 2}, vocab: 5}
		_, err := j.run(bg, make([]float32, 10), nil, []int32{1}, 0, 0)
		if err == nil || !strings.Contains(err.Error(), "invalid result") {
			t.Errorf("result %+v: got %v, want an invalid-result error", r, err)
		}
	}
}

func TestSampleRowFields(t *testing.T) {
	rec := &recSampler{k: 3}
	j := judge{sampler: rec, needs: rec.Needs(), vocab: 6}
	rows := []float32{1, 5, 5, 2, -1, 0, 0, 0, 0, 0, 0, 3}
	if _, err := j.run(bg, rows, []int32{9}, []int32{4}, 7, 11); err != nil {
		t.Fatal(err)
	}
	r0 := rec.got.Rows[0]
	if !slices.Equal(r0.IDs, []int32{1, 2, 3}) || !slices.Equal(r0.Logits, []float32{5, 5, 2}) {
		t.Fatalf("row 0 candidates: got %v %v, want [1 2 3] [5 5 2]", r0.IDs, r0.Logits)
	}
	if r0.DraftLogit != -1 || r0.MaxLogit != 5 {
		t.Fatalf("row 0: got draft logit %v max %v, want -1 5", r0.DraftLogit, r0.MaxLogit)
	}
	if d := float64(r0.LogSumExp) - 5.7311; d > 1e-3 || d < -1e-3 {
		t.Fatalf("row 0 logsumexp: got %v, want 5.7311", r0.LogSumExp)
	}
	if rec.got.Seed != 7 || rec.got.Step != 11 {
		t.Fatalf("seed/step: got %d/%d", rec.got.Seed, rec.got.Step)
	}
}

type recSampler struct {
	k   int
	got sdk.SampleRound
}

func (r *recSampler) Needs() sdk.Needs { return sdk.Needs{TopK: r.k} }
func (r *recSampler) Sample(_ context.Context, s *sdk.SampleRound) (sdk.SampleResult, error) {
	r.got = *s
	r.got.Rows = slices.Clone(s.Rows)
	return sdk.SampleResult{}, nil
}

func TestTopKTies(t *testing.T) {
	row := []float32{1, 3, 3, 0, 3, 2}
	ids, vals := make([]int32, 4), make([]float32, 4)
	backend.TopKRow(row, ids, vals)
	if !slices.Equal(ids, []int32{1, 2, 4, 5}) || !slices.Equal(vals, []float32{3, 3, 3, 2}) {
		t.Fatalf("got %v %v, want [1 2 4 5] [3 3 3 2]", ids, vals)
	}
}

func TestHeldSuffix(t *testing.T) {
	for _, tc := range []struct {
		text  string
		stops []string
		want  int
	}{
		{"hello wor", []string{"world"}, 3},
		{"hello", []string{"world"}, 0},
		{"ab", []string{"b", "abc"}, 2},
		{"x\n", []string{"\n\n"}, 1},
	} {
		if got := heldSuffix(tc.text, tc.stops); got != tc.want {
			t.Errorf("heldSuffix(%q, %q): got %d, want %d", tc.text, tc.stops, got, tc.want)
		}
	}
}

// generate runs one request on a fresh fake session.
func generate(t *testing.T, target, draft *fakeLM, v Vocab, req Request) *Result {
	t.Helper()
	return generateOn(t, newFakeSession(target, draft, v, 16), req)
}

// generateOn is generate on session s.
func generateOn(t *testing.T, s *Session, req Request) *Result {
	t.Helper()
	if req.Sampler == nil {
		req.Sampler = enginetest.Greedy{}
	}
	res, err := s.Generate(bg, req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestGreedyIdentityFakes(t *testing.T) {
	const v, n = 97, 4096
	prompt := []int32{1, 5, 9, 14, 2, 77}
	plain := generate(t, &fakeLM{v: v, n: n}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: 60})
	plainPen := generate(t, &fakeLM{v: v, n: n}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: 60,
		Penalty: &repPenalty{window: 16, p: 1.5}})
	if len(plain.Tokens) != 60 || slices.Equal(plain.Tokens, plainPen.Tokens) {
		t.Fatalf("setup: plain gave %d tokens; penalty changed nothing: %v", len(plain.Tokens), slices.Equal(plain.Tokens, plainPen.Tokens))
	}
	for _, dr := range []struct {
		name string
		lm   func() *fakeLM
	}{
		{"draft=target", func() *fakeLM { return &fakeLM{v: v, n: n} }},
		{"noisy draft", func() *fakeLM { return &fakeLM{v: v, n: n, noise: 1.5, salt: 3} }},
		{"unrelated draft", func() *fakeLM { return &fakeLM{v: v, n: n, noise: 50, salt: 9} }},
	} {
		for depth := 1; depth <= 16; depth++ {
			for _, pen := range []bool{false, true} {
				req := Request{Prompt: prompt, NPredict: 60, Policy: FixedDepth(depth)}
				want := plain
				if pen {
					req.Penalty = &repPenalty{window: 16, p: 1.5}
					want = plainPen
				}
				got := generate(t, &fakeLM{v: v, n: n}, dr.lm(), fakeVocab{}, req)
				if !slices.Equal(got.Tokens, want.Tokens) {
					t.Fatalf("%s depth %d penalty %v: tokens differ from plain decoding\n got %v\nwant %v", dr.name, depth, pen, got.Tokens, want.Tokens)
				}
				if dr.name == "draft=target" && !pen {
					checkFullAcceptance(t, got, depth, 60)
				}
			}
		}
	}
}

// checkFullAcceptance: with draft = target every draft token is accepted and every
// round but the budget-limited tail yields depth+1 tokens.
func checkFullAcceptance(t *testing.T, r *Result, depth, n int) {
	t.Helper()
	st := r.Spec
	if st.Accepted != st.Drafted {
		t.Fatalf("depth %d: accepted %d of %d drafted", depth, st.Accepted, st.Drafted)
	}
	full := n / (depth + 1)
	if ds := st.ByDepth[strconv.Itoa(depth)]; ds.Rounds != full {
		t.Fatalf("depth %d: %d full rounds, want %d (by depth %v)", depth, ds.Rounds, full, st.ByDepth)
	}
}

func TestFullRowSamplerIdentity(t *testing.T) {
	const v = 50
	prompt := []int32{3, 4}
	plain := generate(t, &fakeLM{v: v, n: 512}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: 30, Sampler: enginetest.FullGreedy{}})
	got := generate(t, &fakeLM{v: v, n: 512}, &fakeLM{v: v, n: 512, noise: 1, salt: 5}, fakeVocab{},
		Request{Prompt: prompt, NPredict: 30, Sampler: enginetest.FullGreedy{}, Policy: FixedDepth(5)})
	if !slices.Equal(plain.Tokens, got.Tokens) {
		t.Fatalf("got %v, want %v", got.Tokens, plain.Tokens)
	}
}

// scripted returns target and draft fakes that generate script after the prompt; the
// draft errs at the positions in wrong.
func scripted(v int, script []int32, wrong map[int]int32) (*fakeLM, *fakeLM) {
	return &fakeLM{v: v, n: 256, script: script}, &fakeLM{v: v, n: 256, script: script, wrong: wrong}
}

func TestStopRulesInsideAcceptedRun(t *testing.T) {
	vocab := fakeVocab{
		Tok: map[int32]string{1: "<s>", 10: "Hel", 11: "lo", 12: " wor", 13: "ld", 14: "!", 15: " again"},
		EOG: map[int32]bool{2: true},
	}
	script := []int32{1, 10, 11, 12, 13, 14, 15, 2, 10, 11}
	for _, tc := range []struct {
		name       string
		stops      []string
		nPredict   int
		wantText   string
		wantTokens []int32
		wantStop   StopReason
	}{
		{"eog", nil, 20, "Hello world! again", []int32{10, 11, 12, 13, 14, 15}, StopEOG},
		{"stop string across tokens", []string{"o wo"}, 20, "Hell", []int32{10, 11, 12}, StopString},
		{"stop string at token end", []string{"!"}, 20, "Hello world", []int32{10, 11, 12, 13, 14}, StopString},
		{"length", nil, 3, "Hello wor", []int32{10, 11, 12}, StopLength},
		{"held back then released", []string{"world?"}, 20, "Hello world! again", []int32{10, 11, 12, 13, 14, 15}, StopEOG},
	} {
		for _, depth := range []int{0, 1, 2, 3, 8} {
			for _, wrong := range []map[int]int32{nil, {3: 40}, {6: 2}} {
				target, draft := scripted(64, script, wrong)
				var streamed strings.Builder
				req := Request{Prompt: script[:1], NPredict: tc.nPredict, Stop: tc.stops, Policy: FixedDepth(depth),
					OnText: func(s string) error { streamed.WriteString(s); return nil }}
				res := generate(t, target, draft, vocab, req)
				if res.Text != tc.wantText || !slices.Equal(res.Tokens, tc.wantTokens) || res.Stop != tc.wantStop {
					t.Fatalf("%s depth %d wrong %v: got %q %v %s, want %q %v %s", tc.name, depth, wrong,
						res.Text, res.Tokens, res.Stop, tc.wantText, tc.wantTokens, tc.wantStop)
				}
				if streamed.String() != res.Text {
					t.Fatalf("%s: streamed %q, result %q", tc.name, streamed.String(), res.Text)
				}
			}
		}
	}
}

func TestContextFullAndBudget(t *testing.T) {
	const v = 40
	for _, depth := range []int{0, 4} {
		// ctx 12, prompt 5: the target can take 7 more positions; the 8th token is
		// chosen from the last row and never fed.
		res := generate(t, &fakeLM{v: v, n: 12}, &fakeLM{v: v, n: 12}, fakeVocab{},
			Request{Prompt: []int32{1, 2, 3, 4, 5}, NPredict: -1, Policy: FixedDepth(depth)})
		if res.Stop != StopCtx || len(res.Tokens) != 8 {
			t.Fatalf("depth %d: got %d tokens, stop %s; want 8, ctx", depth, len(res.Tokens), res.Stop)
		}
	}
	s := newFakeSession(&fakeLM{v: v, n: 4}, nil, fakeVocab{}, 16)
	if _, err := s.Generate(bg, Request{Prompt: []int32{1, 2, 3, 4, 5}, NPredict: 3, Sampler: enginetest.Greedy{}}); err == nil ||
		!strings.Contains(err.Error(), "does not fit the context of 4") {
		t.Fatalf("long prompt: got %v", err)
	}
	if _, err := s.Generate(bg, Request{NPredict: 3, Sampler: enginetest.Greedy{}}); err == nil {
		t.Fatal("empty prompt: got nil error")
	}
}

func TestPrefixReuse(t *testing.T) {
	const v = 60
	target := &fakeLM{v: v, n: 512}
	s := newFakeSession(target, nil, fakeVocab{}, 16)
	p1 := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	r1, err := s.Generate(bg, Request{Prompt: p1, NPredict: 5, Sampler: enginetest.Greedy{}})
	if err != nil {
		t.Fatal(err)
	}
	p2 := append(append(slices.Clone(p1), r1.Tokens...), 20, 21)
	before := target.rows
	r2, err := s.Generate(bg, Request{Prompt: p2, NPredict: 5, Sampler: enginetest.Greedy{}})
	if err != nil {
		t.Fatal(err)
	}
	// computed: the last generated token of turn 1 (never fed) and token 20 as
	// prefill, then 5 one-row rounds (21 is fed by the first)
	if got := target.rows - before; got != 7 {
		t.Fatalf("second turn ran %d rows, want 7", got)
	}
	if r1.CachedTokens != 0 || r2.CachedTokens != len(p1)+len(r1.Tokens)-1 {
		t.Errorf("cached tokens %d then %d, want 0 then %d (the first turn but its newest token)", r1.CachedTokens, r2.CachedTokens, len(p1)+len(r1.Tokens)-1)
	}
	fresh := generate(t, &fakeLM{v: v, n: 512}, nil, fakeVocab{}, Request{Prompt: p2, NPredict: 5})
	if !slices.Equal(r2.Tokens, fresh.Tokens) {
		t.Fatalf("reused prefix changed the output: got %v, want %v", r2.Tokens, fresh.Tokens)
	}
}

func TestSmallerDraftVocabulary(t *testing.T) {
	// the target soon emits ids the 40-token draft lacks; rounds then fall back to
	// depth 0 and the output stays plain decoding's
	prompt := []int32{1, 2, 3}
	plain := generate(t, &fakeLM{v: 97, n: 256}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: 40})
	got := generate(t, &fakeLM{v: 97, n: 256}, &fakeLM{v: 40, n: 256}, fakeVocab{}, Request{Prompt: prompt, NPredict: 40, Policy: FixedDepth(4)})
	if !slices.Equal(got.Tokens, plain.Tokens) {
		t.Fatalf("got %v, want %v", got.Tokens, plain.Tokens)
	}
	if got.Spec.ByDepth["0"].Rounds == 0 {
		t.Fatalf("by depth %v: want depth-0 rounds after the first id beyond the draft vocabulary", got.Spec.ByDepth)
	}
}

func TestCheckVocab(t *testing.T) {
	open := func(rel string) *gguf.File {
		f, err := gguf.Open(testpath.Path(t, rel))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	qwen2 := open("models/synthetic/synth-qwen2-q8_0.gguf")
	for _, tc := range []struct {
		draft string
		want  string
	}{
		{"models/synthetic/synth-qwen3-q4_0.gguf", ""},
		{"models/synthetic/synth-llama-q4_0.gguf", "differ"},
		{"models/stories260K.gguf", "more than 128 apart"},
	} {
		err := CheckVocab(qwen2, open(tc.draft))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: got %v, want %q", tc.draft, err, tc.want)
		}
	}
}

func TestTopLogitsWithoutGeneration(t *testing.T) {
	prompt := []int32{4, 8, 15, 16, 23, 42}
	for _, n := range []int{0, 3} {
		target := &fakeLM{v: 64, n: 64}
		res := generate(t, target, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: n, TopLogits: 3})
		want := make([]float32, 64)
		ref := &fakeLM{v: 64, n: 64}
		rows, _ := ref.forward(prompt, true)
		copy(want, rows[5*64:])
		ids, vals := make([]int32, 3), make([]float32, 3)
		backend.TopKRow(want, ids, vals)
		if len(res.TopLogits) != 3 || res.TopLogits[0].ID != ids[0] || res.TopLogits[2].Logit != vals[2] {
			t.Fatalf("n %d: got %+v, want ids %v logits %v", n, res.TopLogits, ids, vals)
		}
		if len(res.Tokens) != n || (n == 0 && res.Stop != StopLength) {
			t.Fatalf("n %d: got %d tokens, stop %s", n, len(res.Tokens), res.Stop)
		}
	}
}

// TestEmitterMatchesReference: on random token pieces and stop strings, the streamed
// text equals the final text, and both equal a direct reference: the whole text up to
// the first token after which a stop string appears, cut at the earliest such stop.
func TestEmitterMatchesReference(t *testing.T) {
	rng := uint64(12345)
	next := func(n int) int { rng = mix(rng, 1); return int(rng % uint64(n)) }
	alphabet := "ab c"
	word := func(max int) string {
		b := make([]byte, 1+next(max))
		for i := range b {
			b[i] = alphabet[next(len(alphabet))]
		}
		return string(b)
	}
	for trial := range 3000 {
		v := fakeVocab{Tok: map[int32]string{}}
		var toks []int32
		for i := range 12 {
			v.Tok[int32(i)] = word(3)
			toks = append(toks, int32(i))
		}
		stops := []string{word(4)}
		if next(2) == 0 {
			stops = append(stops, word(3))
		}
		// reference
		var full strings.Builder
		want, reason := "", StopLength
		for _, id := range toks {
			full.WriteString(v.Tok[id])
			if cut := firstStop(full.String(), stops); cut >= 0 {
				want, reason = full.String()[:cut], StopString
				break
			}
		}
		if reason == StopLength {
			want = full.String()
		}
		var streamed strings.Builder
		e := emitter{vocab: v, stream: v.NewStream(), stops: stops, onText: func(s string) error { streamed.WriteString(s); return nil }}
		for _, id := range toks {
			if done, _ := e.push(id); done {
				break
			}
		}
		if e.reason == "" {
			e.reason = StopLength
		}
		e.finish()
		if got := e.text.String(); got != want || streamed.String() != got || e.reason != reason {
			t.Fatalf("trial %d: pieces %q stops %q: got %q (streamed %q, %s), want %q (%s)",
				trial, v.Tok, stops, got, streamed.String(), e.reason, want, reason)
		}
	}
}

// recPolicy asks for a fixed depth and records the MaxDepth it was offered.
type recPolicy struct {
	depth   int
	offered []int
}

func (p *recPolicy) NextDepth(_ context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	if last.Round >= 0 {
		p.offered = append(p.offered, last.MaxDepth)
	}
	return sdk.DepthDecision{Depth: p.depth}, nil
}

// TestRequestDraftMax: a request's DraftMax caps every round's depth and is the bound
// the policy is shown, while the output stays that of plain decoding.
func TestRequestDraftMax(t *testing.T) {
	const v, n = 97, 4096
	prompt := []int32{1, 5, 9, 14, 2, 77}
	plain := generate(t, &fakeLM{v: v, n: n}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: 40})
	for _, limit := range []int{0, 2, 5} {
		p := &recPolicy{depth: 8}
		got := generate(t, &fakeLM{v: v, n: n}, &fakeLM{v: v, n: n}, fakeVocab{}, Request{Prompt: prompt, NPredict: 40, Policy: p, DraftMax: &limit})
		if !slices.Equal(got.Tokens, plain.Tokens) {
			t.Fatalf("draft_max %d: tokens differ from plain decoding", limit)
		}
		for k := range got.Spec.ByDepth {
			if d, _ := strconv.Atoi(k); d > limit {
				t.Fatalf("draft_max %d: a round drafted %d tokens", limit, d)
			}
		}
		for i, m := range p.offered {
			if m > limit {
				t.Fatalf("draft_max %d: round %d offered MaxDepth %d", limit, i, m)
			}
		}
	}
}

// TestGenTPSAfterFirstRound: the generation rate counts the tokens after the first
// round over the time after it. A first round of depth 4 with a draft that always agrees
// emits 5 tokens at the time to first token; counting 4 of them as generated (the
// tokens after the first over the time after the first) would favour deep depths.
func TestGenTPSAfterFirstRound(t *testing.T) {
	const v, n = 97, 4096
	prompt := []int32{1, 5, 9, 14, 2, 77}
	got := generate(t, &fakeLM{v: v, n: n}, &fakeLM{v: v, n: n}, fakeVocab{}, Request{Prompt: prompt, NPredict: 40, Policy: &recPolicy{depth: 4}})
	if len(got.Tokens) != 40 || got.Spec.Rounds == 0 || got.Spec.Accepted != got.Spec.Drafted {
		t.Fatalf("%d tokens, %d rounds, %d of %d drafts accepted: want 40 tokens, every draft accepted", len(got.Tokens), got.Spec.Rounds, got.Spec.Accepted, got.Spec.Drafted)
	}
	tm := got.Timings
	if tm.GenMs <= 0 {
		t.Fatalf("GenMs %v", tm.GenMs)
	}
	if counted := tm.GenTPS * tm.GenMs / 1000; math.Abs(counted-35) > 1e-6 {
		t.Errorf("GenTPS counts %.6f tokens over GenMs, want 35 (40 less the first round's 5)", counted)
	}
}

// cutPolicy asks for a fixed depth with an early-exit cut-off and records the outcomes.
type cutPolicy struct {
	depth int
	conf  float32
	keep  bool
	seen  []sdk.RoundOutcome
}

func (p *cutPolicy) NextDepth(_ context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	if last.Round >= 0 {
		last.DraftConf = slices.Clone(last.DraftConf)
		p.seen = append(p.seen, last)
	}
	return sdk.DepthDecision{Depth: p.depth, MinConf: p.conf, KeepCut: p.keep}, nil
}

// TestEarlyExitIdentity: an early-exit cut-off, dropping or keeping the token under it,
// changes how many tokens each round drafts, never the output; a dropped token's
// confidence is never reported, a kept one is the round's last.
func TestEarlyExitIdentity(t *testing.T) {
	const v, n = 97, 4096
	prompt := []int32{1, 5, 9, 14, 2, 77}
	plain := generate(t, &fakeLM{v: v, n: n}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: 60})
	for _, conf := range []float32{0.3, 0.6, 0.9} {
		drafted := map[bool]int{}
		for _, keep := range []bool{false, true} {
			p := &cutPolicy{depth: 8, conf: conf, keep: keep}
			got := generate(t, &fakeLM{v: v, n: n}, &fakeLM{v: v, n: n, noise: 1.5, salt: 3}, fakeVocab{},
				Request{Prompt: prompt, NPredict: 60, Policy: p})
			if !slices.Equal(got.Tokens, plain.Tokens) {
				t.Fatalf("min_conf %v keep %v: tokens differ from plain decoding\n got %v\nwant %v", conf, keep, got.Tokens, plain.Tokens)
			}
			cut := 0
			for _, o := range p.seen {
				if len(o.DraftConf) != o.Drafted {
					t.Fatalf("round %d: %d confidences for %d drafted", o.Round, len(o.DraftConf), o.Drafted)
				}
				for i, c := range o.DraftConf {
					if c < conf && (!keep || i != o.Drafted-1) {
						t.Fatalf("min_conf %v keep %v round %d: confidence %v at position %d of %d drafted", conf, keep, o.Round, c, i+1, o.Drafted)
					}
				}
				if o.Drafted < o.Depth && o.Depth == 8 {
					cut++
					if keep && (o.Drafted == 0 || o.DraftConf[o.Drafted-1] >= conf) {
						t.Fatalf("round %d: cut at %d drafted, but its last token's confidence %v is not under %v", o.Round, o.Drafted, o.DraftConf, conf)
					}
				}
				drafted[keep] += o.Drafted
			}
			if cut == 0 {
				t.Fatalf("min_conf %v keep %v: no round was cut (setup)", conf, keep)
			}
		}
		if drafted[true] <= drafted[false] {
			t.Errorf("min_conf %v: keeping the cut token drafted %d tokens, dropping it %d; want more", conf, drafted[true], drafted[false])
		}
	}
}

// TestWarm: the warm-up runs the target's verify of 1…draftMax+1 rows and the draft's
// catch-up of as many tokens and of 16, 32 and 64, and leaves both caches empty, so
// generation afterwards is unchanged; a long catch-up after plain rounds then goes in
// forwards of warmed sizes only.
func TestWarm(t *testing.T) {
	const v, n = 97, 4096
	prompt := []int32{1, 5, 9, 14, 2, 77}
	tgt, dr := &fakeLM{v: v, n: n}, &fakeLM{v: v, n: n, noise: 1.5, salt: 3}
	s := newFakeSession(tgt, dr, fakeVocab{}, 6)
	if err := s.warm(); err != nil {
		t.Fatal(err)
	}
	if tgt.calls != 7 || tgt.rows != 28 || dr.calls != 10 || dr.rows != 28+16+32+64 || tgt.len() != 0 || dr.len() != 0 {
		t.Fatalf("warm-up: target %d forwards of %d rows, draft %d of %d, caches %d/%d; want 7 of 28 and 10 of 140, empty",
			tgt.calls, tgt.rows, dr.calls, dr.rows, tgt.len(), dr.len())
	}
	want := generate(t, &fakeLM{v: v, n: n}, &fakeLM{v: v, n: n, noise: 1.5, salt: 3}, fakeVocab{}, Request{Prompt: prompt, NPredict: 40, Policy: FixedDepth(3)})
	got, err := s.Generate(bg, Request{Prompt: prompt, NPredict: 40, Policy: FixedDepth(3), Sampler: enginetest.Greedy{}})
	if err != nil || !slices.Equal(got.Tokens, want.Tokens) {
		t.Fatalf("after the warm-up: %v, %v; want %v", got.Tokens, err, want.Tokens)
	}
	// 45 plain rounds, then drafting: the draft catches up on 45+ tokens in warmed sizes
	dr.sizes = dr.sizes[:0]
	var plainThenDraft depthScript
	for i := range 60 {
		plainThenDraft = append(plainThenDraft, map[bool]int{true: 0, false: 2}[i < 45])
	}
	want = generate(t, &fakeLM{v: v, n: n}, nil, fakeVocab{}, Request{Prompt: prompt, NPredict: 60})
	got, err = s.Generate(bg, Request{Prompt: prompt, NPredict: 60, Policy: &plainThenDraft, Sampler: enginetest.Greedy{}})
	if err != nil || !slices.Equal(got.Tokens, want.Tokens) {
		t.Fatalf("plain then drafting: %v, %v; want %v", got.Tokens, err, want.Tokens)
	}
	long := false
	for _, n := range dr.sizes {
		if !s.warmed[n] {
			t.Fatalf("draft forward of %d tokens, not a warmed size (sizes %v)", n, dr.sizes)
		}
		long = long || n >= 16
	}
	if !long {
		t.Fatalf("setup: no long catch-up (sizes %v)", dr.sizes)
	}
}

// depthScript answers the depths it holds, one per round, then 0.
type depthScript []int

func (d *depthScript) NextDepth(_ context.Context, _ sdk.RoundOutcome) (sdk.DepthDecision, error) {
	if len(*d) == 0 {
		return sdk.DepthDecision{}, nil
	}
	x := (*d)[0]
	*d = (*d)[1:]
	return sdk.DepthDecision{Depth: x}, nil
}
