package builtin

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/minfer/minfer/sdk"
)

// A simulated speculative decoder: per-position acceptance probabilities and a cost
// model stand in for the draft and target models, so depth policies can be judged
// against the best static depth with the same luck (pre-drawn uniforms per round and
// position) and fixed seeds.

type regime struct {
	name     string
	rounds   int
	maxDepth int
	accept   func(round int) float64 // probability that each drafted position is accepted
	step     float64                 // draft ns per token
	verify   func(nt int) float64    // target ns for nt rows
}

func flat(base, perRow float64) func(int) float64 {
	return func(nt int) float64 { return base + perRow*float64(nt) }
}

func kink(base, perRow, at, jump float64) func(int) float64 {
	return func(nt int) float64 {
		v := base + perRow*float64(nt)
		if float64(nt) > at {
			v += jump
		}
		return v
	}
}

func constant(p float64) func(int) float64 { return func(int) float64 { return p } }

var regimes = []regime{
	{"high", 3000, 16, constant(0.9), 100e3, flat(1e6, 10e3)},
	{"low", 3000, 16, constant(0.4), 100e3, flat(1e6, 10e3)},
	{"kink", 3000, 16, constant(0.85), 60e3, kink(1e6, 10e3, 4, 1e6)},
	{"shifting", 4000, 16, func(r int) float64 {
		if r/400%2 == 0 {
			return 0.92
		}
		return 0.25
	}, 80e3, flat(1e6, 10e3)},
	{"collapse", 3000, 16, constant(0), 150e3, flat(1e6, 10e3)},
	// the draft agrees almost always but costs as much as the target (the trained
	// target drafting for itself in another quantization on the H200): plain decoding
	// is the best depth by 1.5%
	{"dear", 3000, 16, constant(0.97), 1e6, flat(1e6, 10e3)},
}

// expected returns the analytic tokens per ns of static depth d under acceptance p.
func (g regime) expected(d int, p float64) float64 {
	tokens, reach := 1.0, 1.0
	for k := 1; k <= d; k++ {
		reach *= p
		tokens += reach
	}
	return tokens / (float64(d)*g.step + g.verify(d+1))
}

// bestStatic is the analytic best static depth under acceptance p.
func (g regime) bestStatic(p float64) (int, float64) {
	best, bt := 0, 0.0
	for d := 0; d <= g.maxDepth; d++ {
		if v := g.expected(d, p); v > bt {
			best, bt = d, v
		}
	}
	return best, bt
}

type simResult struct {
	tokens, ns float64
	depths     []int // the depth decided per round
	steps      []int // draft steps run per round (fewer than the depth after an early exit)
}

func (s simResult) rate() float64 { return s.tokens / s.ns * 1e9 } // tokens per second

// simulate runs policy p through regime g with the luck of seed.
func simulate(t testing.TB, g regime, p sdk.DepthPolicy, seed uint64) simResult {
	t.Helper()
	return simulatePhases(t, p, seed, g)[0]
}

// simulatePhases runs policy p through each regime in turn (g.rounds rounds each, the
// policy's state carried over: a regime change mid-request) with the luck of seed, and
// returns each phase's result. Every phase needs the same maxDepth.
func simulatePhases(t testing.TB, p sdk.DepthPolicy, seed uint64, phases ...regime) []simResult {
	t.Helper()
	luck := rand.New(rand.NewPCG(seed, 1))
	noise := rand.New(rand.NewPCG(seed, 2))
	out := make([]simResult, len(phases))
	last := sdk.RoundOutcome{Round: -1, MaxDepth: phases[0].maxDepth}
	u := make([]float64, phases[0].maxDepth)
	conf := make([]float32, phases[0].maxDepth)
	round := 0
	for ph, g := range phases {
		res := &out[ph]
		for r := 0; r < g.rounds; r++ {
			// Position i's draft token is right (the target would accept it after a
			// right prefix) when u[i] < accept; the draft's confidence in it is
			// informative but noisy: 0.45-1 for a right token, 0-0.6 for a wrong one.
			for i := range u {
				u[i] = luck.Float64()
				if w := float32(luck.Float64()); u[i] < g.accept(r) {
					conf[i] = 0.45 + 0.55*w
				} else {
					conf[i] = 0.6 * w
				}
			}
			dec, err := p.NextDepth(context.Background(), last)
			if err != nil {
				t.Fatal(err)
			}
			d := min(max(dec.Depth, 0), g.maxDepth)
			drafted, steps := earlyExit(dec, d, conf)
			acc := 0
			for acc < drafted && u[acc] < g.accept(r) {
				acc++
			}
			cost := float64(steps)*g.step + g.verify(drafted+1)
			res.tokens += float64(acc + 1)
			res.ns += cost
			res.depths = append(res.depths, d)
			res.steps = append(res.steps, steps)
			jitter := func(v float64) int64 { return int64(v * (1 + 0.2*noise.Float64())) } // measurements only err upwards
			last = sdk.RoundOutcome{Round: round, Depth: d, Drafted: drafted, Accepted: acc, DraftNs: jitter(float64(steps) * g.step),
				VerifyNs: jitter(g.verify(drafted + 1)), MaxDepth: g.maxDepth, DraftConf: append([]float32(nil), conf[:drafted]...)}
			round++
		}
	}
	return out
}

// earlyExit is the engine's early exit for a round of depth d with draft confidences
// conf: drafting stops at the first confidence under the cut-off, keeping or dropping
// that token (its draft step is paid either way). It returns the tokens drafted and the
// draft steps run.
func earlyExit(dec sdk.DepthDecision, d int, conf []float32) (drafted, steps int) {
	for i := range d {
		if dec.MinConf > 0 && conf[i] < dec.MinConf {
			if dec.KeepCut {
				return i + 1, i + 1
			}
			return i, i + 1
		}
	}
	return d, d
}

func mustPolicy(t testing.TB, name string, params string) sdk.DepthPolicy {
	t.Helper()
	p, ok := Lookup(name)
	if !ok {
		t.Fatalf("no builtin %s", name)
	}
	pol, err := p.NewPolicy([]byte(params))
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// bestStaticSim simulates every static depth of regime g with the luck of seed and
// returns the best depth, its tokens/s and plain decoding's.
func bestStaticSim(t *testing.T, g regime, seed uint64) (bestD int, bestRate, plain float64) {
	t.Helper()
	bestD = -1
	for d := 0; d <= g.maxDepth; d++ {
		s := simulate(t, g, mustPolicy(t, "static", fmt.Sprintf(`{"depth":%d}`, d)), seed)
		if s.rate() > bestRate {
			bestD, bestRate = d, s.rate()
		}
		if d == 0 {
			plain = s.rate()
		}
	}
	return bestD, bestRate, plain
}

// convergeRounds is the stated bound: after it, the adaptive policy plays a depth whose
// analytic throughput is within the hysteresis margin (10%) of the best static depth's
// in at least 95% of rounds, in every stationary regime.
const convergeRounds = 150

// TestAdaptiveSimulation judges the depth model alone (auto_cut off: every round drafts
// the depth chosen).
func TestAdaptiveSimulation(t *testing.T) {
	params := `{"draft_max":16,"auto_cut":false}`
	for _, g := range regimes {
		t.Run(g.name, func(t *testing.T) {
			const seed = 7
			ad := simulate(t, g, mustPolicy(t, "adaptive", params), seed)
			ucb := simulate(t, g, mustPolicy(t, "ucb", `{"draft_max":16}`), seed)
			bestD, bestRate, plain := bestStaticSim(t, g, seed)
			t.Logf("%-8s tokens/s: adaptive %.1f (%.3f of best), ucb %.1f (%.3f), best static d=%d %.1f, plain %.1f",
				g.name, ad.rate(), ad.rate()/bestRate, ucb.rate(), ucb.rate()/bestRate, bestD, bestRate, plain)

			switch g.name {
			case "shifting":
				if ad.rate() <= bestRate {
					t.Errorf("shifting: adaptive %.1f tokens/s, want more than the best static depth (d=%d, %.1f)", ad.rate(), bestD, bestRate)
				}
				return
			case "collapse":
				if ad.rate() < plain*0.99 {
					t.Errorf("collapse: adaptive %.1f tokens/s, want ≥ 99%% of plain decoding's %.1f", ad.rate(), plain)
				}
			}
			p := g.accept(0)
			_, best := g.bestStatic(p)
			good := 0
			for _, d := range ad.depths[convergeRounds:] {
				if g.expected(d, p)*1.10 >= best {
					good++
				}
			}
			frac := float64(good) / float64(len(ad.depths)-convergeRounds)
			if frac < 0.95 {
				t.Errorf("after %d rounds, %.1f%% of the depths played are within 10%% of the best static; want ≥ 95%%", convergeRounds, 100*frac)
			}
			if ad.rate() < 0.9*bestRate {
				t.Errorf("adaptive %.1f tokens/s, want ≥ 90%% of the best static %.1f", ad.rate(), bestRate)
			}
		})
	}
}

func TestAdaptiveRespectsBounds(t *testing.T) {
	p := mustPolicy(t, "adaptive", `{"draft_max":6,"start":10}`)
	last := sdk.RoundOutcome{Round: -1, MaxDepth: 3}
	for r := 0; r < 200; r++ {
		d, err := p.NextDepth(context.Background(), last)
		if err != nil {
			t.Fatal(err)
		}
		bound := 3
		if r > 100 {
			bound = 5
		}
		if d.Depth > bound || d.Depth < 0 {
			t.Fatalf("round %d: depth %d, want within [0, %d]", r, d.Depth, bound)
		}
		last = sdk.RoundOutcome{Round: r, Depth: d.Depth, Drafted: d.Depth, Accepted: d.Depth, DraftNs: 1000 * int64(d.Depth),
			VerifyNs: 100000, MaxDepth: bound}
		if r >= 100 {
			last.MaxDepth = 5
		}
	}
}

var updateTrace = flag.Bool("update-trace", false, "rewrite ../check/simtraces/*.jsonl from the simulator")

// TestSimTraces keeps ../check/simtraces/*.jsonl, the recorded traces that the parity
// test, `minfer plugin check` and `minfer policy replay` use, true to the policy: it
// records the adaptive policy on the shifting and kink regimes (with draft confidences)
// again and wants the files byte for byte. A change to the policy's decisions changes
// them: rewrite them with `go test ./plugins/builtin -run TestSimTraces -update-trace`
// and say why in the commit (TestAdaptiveMatchesReference records the same change).
func TestSimTraces(t *testing.T) {
	for _, tc := range []struct {
		file   string
		regime int
		rounds int
	}{{"shifting.jsonl", 3, 600}, {"kink.jsonl", 2, 300}} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("..", "check", "simtraces", tc.file)
			got := recordTrace(t, regimes[tc.regime], tc.rounds)
			if *updateTrace {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			rounds, err := sdk.ReadTrace(bytes.NewReader(want))
			if err != nil {
				t.Fatal(err)
			}
			if len(rounds) != tc.rounds {
				t.Fatalf("got %d rounds, want %d", len(rounds), tc.rounds)
			}
			if !bytes.Equal(got, want) {
				gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
				i := 0
				for i < min(len(gl), len(wl)) && bytes.Equal(gl[i], wl[i]) {
					i++
				}
				line := func(l [][]byte) string {
					if i < len(l) {
						return string(l[i])
					}
					return "(end of file)"
				}
				t.Fatalf("the policy records another trace from line %d (rerun with -update-trace if the change is meant):\ngot  %s\nwant %s",
					i+1, line(gl), line(wl))
			}
		})
	}
}

// recordTrace runs the adaptive policy (draft_max 12) for n rounds of regime g and
// returns the trace it leaves, as sdk.WriteTrace writes it.
func recordTrace(t *testing.T, g regime, n int) []byte {
	p := mustPolicy(t, "adaptive", `{"draft_max":12}`)
	var rounds []sdk.TraceRound
	luck := rand.New(rand.NewPCG(11, 3))
	last := sdk.RoundOutcome{Round: -1, MaxDepth: 12}
	for r := 0; r < n; r++ {
		dec, err := p.NextDepth(context.Background(), last)
		if err != nil {
			t.Fatal(err)
		}
		d := dec.Depth
		acc := 0
		for acc < d && luck.Float64() < g.accept(r) {
			acc++
		}
		conf := make([]float32, d)
		for i := range conf {
			conf[i] = float32(math.Round((0.3+0.7*luck.Float64())*1000) / 1000)
		}
		last = sdk.RoundOutcome{Round: r, Depth: d, Drafted: d, Accepted: acc, DraftConf: conf,
			DraftNs: int64(float64(d) * g.step * (1 + 0.2*luck.Float64())), VerifyNs: int64(g.verify(d+1) * (1 + 0.2*luck.Float64())), MaxDepth: 12}
		rounds = append(rounds, sdk.NewTraceRound(0, "adaptive", dec, last))
	}
	var buf bytes.Buffer
	if err := sdk.WriteTrace(&buf, rounds); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestAdaptiveCutSimulation: the default adaptive policy (with its automatic early-exit
// cut-off) against every static depth without one, on the same luck. Where the draft's
// confidence says which tokens will be accepted, ending each round where it falls is
// what a per-round choice can do and a static depth cannot: the policy must beat the
// best static depth where acceptance is high and drafting deeper is cheap (high,
// shifting), stay within 1% of it where a cost jump, not the confidence, sets the depth
// (kink: measured 1.000-1.005 across the versions of this commit series), within 3%
// where acceptance is low (0.4: the cut-off then saves little and the start costs;
// measured 0.988), and lose at most 1% to plain decoding where drafting never pays.
func TestAdaptiveCutSimulation(t *testing.T) {
	for _, g := range regimes {
		t.Run(g.name, func(t *testing.T) {
			const seed = 7
			ad := simulate(t, g, mustPolicy(t, "adaptive", `{"draft_max":16}`), seed)
			bestD, bestRate, plain := bestStaticSim(t, g, seed)
			t.Logf("%-8s tokens/s: adaptive %.1f (%.3f of the best static d=%d %.1f), plain %.1f",
				g.name, ad.rate(), ad.rate()/bestRate, bestD, bestRate, plain)
			if bestD == 0 {
				if ad.rate() < 0.99*plain {
					t.Errorf("adaptive %.1f tokens/s, want ≥ 99%% of plain decoding's %.1f", ad.rate(), plain)
				}
				return
			}
			if floor := map[string]float64{"low": 0.97, "kink": 0.99}[g.name]; floor > 0 {
				if ad.rate() < floor*bestRate {
					t.Errorf("adaptive %.1f tokens/s, want ≥ %.0f%% of the best static depth (d=%d, %.1f)", ad.rate(), 100*floor, bestD, bestRate)
				}
				return
			}
			if ad.rate() <= bestRate {
				t.Errorf("adaptive %.1f tokens/s, want more than the best static depth (d=%d, %.1f)", ad.rate(), bestD, bestRate)
			}
		})
	}
}

// simulateRequests runs short requests like a server's: each request gets a new policy
// from mk, its own acceptance p (drawn uniformly from [pLo, pHi]) and ends after n
// tokens; costs are those of the trained pair on the H200 (a draft step 75 µs, a
// verify of nt rows 200 µs + 8 µs per extra row, bound 7). It returns tokens/s over
// all requests.
func simulateRequests(t testing.TB, mk func() sdk.DepthPolicy, requests, n int, pLo, pHi float64, seed uint64) float64 {
	t.Helper()
	return simulateBed(t, trainedBed(pLo, pHi), mk, requests, n, seed)
}

// reqBed is a pair's costs and calibration for simulateBed.
type reqBed struct {
	step   float64              // ns per draft step
	verify func(nt int) float64 // ns per verify of nt rows
	// catchUp is the draft's ns per token it catches up with beyond the first at a
	// round's first step (two after a fully accepted round), host the ns of a round
	// outside its draft and verify phases
	catchUp, host float64
	bound         int
	// request draws a request's calibration: conf draws a draft token's confidence and
	// accept the chance that a token drafted at confidence c is accepted
	request func(luck *rand.Rand) (conf func() float32, accept func(c float32) float64)
}

// trainedBed is the trained pair on the H200, with a request's acceptance drawn from
// [pLo, pHi]: a draft token of confidence c is accepted with chance trainedAccept(c),
// and a request's confidences are spread as w^k over uniform w, with k such that their
// mean chance of acceptance is the request's (trainedSpread).
func trainedBed(pLo, pHi float64) reqBed {
	return reqBed{step: 75e3, verify: func(nt int) float64 { return 200e3 + 8e3*float64(nt-1) }, bound: 7,
		request: func(luck *rand.Rand) (func() float32, func(float32) float64) {
			k := trainedSpread(pLo + (pHi-pLo)*luck.Float64())
			return func() float32 { return float32(math.Pow(luck.Float64(), k)) }, trainedAccept
		}}
}

// trainedCal is the trained pair's calibration, measured on the H200 at d46ab01 over the
// static depths' rounds of four specbench runs (80 prompts each, 139,028 judged draft
// tokens; the table is in docs/PERFORMANCE.md): the share of tokens the target accepts
// by the draft's confidence, at each bucket's middle (and 0 and 1 at the ends). Tokens
// drafted at 0.6-0.9 are accepted more often than their confidence says, those under
// 0.05 almost never.
var trainedCal = [...][2]float64{{0, 0}, {0.025, 0.03}, {0.075, 0.2}, {0.125, 0.28}, {0.175, 0.34},
	{0.25, 0.43}, {0.35, 0.48}, {0.45, 0.59}, {0.55, 0.66}, {0.65, 0.80}, {0.75, 0.88},
	{0.85, 0.92}, {0.95, 0.99}, {1, 1}}

// trainedAccept is the chance that a token drafted at confidence c is accepted:
// trainedCal interpolated linearly.
func trainedAccept(c float32) float64 {
	x := min(max(float64(c), 0), 1)
	for i := 1; i < len(trainedCal); i++ {
		if lo, hi := trainedCal[i-1], trainedCal[i]; x <= hi[0] {
			return lo[1] + (x-lo[0])/(hi[0]-lo[0])*(hi[1]-lo[1])
		}
	}
	return 1
}

// trainedSpread returns the exponent k for which confidences w^k, w uniform on [0, 1),
// have mean chance of acceptance p, from a table of the mean over k = 2^(-6..6).
func trainedSpread(p float64) float64 {
	spreadOnce.Do(func() {
		for i := range spreadMean {
			k := math.Exp2(-6 + 12*float64(i)/float64(len(spreadMean)-1))
			const n = 512
			s := 0.0
			for j := range n {
				s += trainedAccept(float32(math.Pow((float64(j)+0.5)/n, k)))
			}
			spreadMean[i] = s / n // falls as k rises
		}
	})
	last := len(spreadMean) - 1
	for i := 1; i <= last; i++ {
		if p >= spreadMean[i] {
			t := (spreadMean[i-1] - p) / (spreadMean[i-1] - spreadMean[i])
			return math.Exp2(-6 + 12*(float64(i-1)+min(max(t, 0), 1))/float64(last))
		}
	}
	return math.Exp2(6)
}

var (
	spreadOnce sync.Once
	spreadMean [97]float64
)

// underconfidentBed is issue 7's second bed on the H200 (a 0.5B F16 target, its own
// Q4_0 copy as the draft, measured at fe26bd1): a draft step costs 72% of a target
// step, and the draft's confidence understates its accuracy — tokens drafted at
// confidence 0.3 or more are all accepted, at 0.1-0.3 94%, under 0.1 about 65%;
// confidences spread evenly. A draft step costs 0.78 ms, 0.09 ms more when it catches up
// with two tokens, and a round 45 µs of host time: with these depth 2 beats depth 1 by
// 2%, as measured (947 against 925 tokens/s).
func underconfidentBed() reqBed {
	curve := [...]float64{1: 1.11e6, 1.22e6, 1.39e6, 1.62e6, 1.66e6, 1.84e6, 2.02e6, 2.20e6} // C_T(nt) at fe26bd1
	return reqBed{step: 780e3, verify: func(nt int) float64 { return curve[nt] }, catchUp: 90e3, host: 45e3, bound: 7,
		request: func(luck *rand.Rand) (func() float32, func(float32) float64) {
			return func() float32 { return float32(luck.Float64()) }, func(c float32) float64 {
				switch {
				case c < 0.1:
					return 0.65
				case c < 0.3:
					return 0.94
				}
				return 1
			}
		}}
}

// simulateBed runs requests of n tokens on bed b, a new policy from mk for each, and
// returns tokens/s over all of them.
func simulateBed(t testing.TB, b reqBed, mk func() sdk.DepthPolicy, requests, n int, seed uint64) float64 {
	t.Helper()
	luck := rand.New(rand.NewPCG(seed, 1))
	var tokens, ns float64
	u := make([]float64, b.bound)
	conf := make([]float32, b.bound)
	for range requests {
		draw, accept := b.request(luck)
		pol := mk()
		produced, pending := 0, 1
		last := sdk.RoundOutcome{Round: -1, MaxDepth: min(b.bound, n-1)}
		for r := 0; produced < n; r++ {
			for i := range u {
				conf[i] = draw()
				u[i] = 0
				if luck.Float64() >= accept(conf[i]) {
					u[i] = 1 // rejected
				}
			}
			maxD := min(b.bound, n-produced-1)
			dec, err := pol.NextDepth(context.Background(), last)
			if err != nil {
				t.Fatal(err)
			}
			d := min(max(dec.Depth, 0), maxD)
			drafted, steps := earlyExit(dec, d, conf)
			acc := 0
			for acc < drafted && u[acc] == 0 {
				acc++
			}
			draftNs := 0.0
			if steps > 0 {
				draftNs = float64(steps)*b.step + float64(pending-1)*b.catchUp
			}
			switch { // as core/engine rolls the draft's cache back
			case steps == 0:
				pending++
			case acc == drafted && steps == drafted:
				pending = 2
			default:
				pending = 1
			}
			tokens += float64(acc + 1)
			ns += draftNs + b.verify(drafted+1) + b.host
			produced += acc + 1
			last = sdk.RoundOutcome{Round: r, Depth: d, Drafted: drafted, Accepted: acc, DraftNs: int64(draftNs),
				VerifyNs: int64(b.verify(drafted + 1)), MaxDepth: maxD, DraftConf: append([]float32(nil), conf[:drafted]...)}
		}
	}
	return tokens / ns * 1e9
}

// bestStaticBed simulates every static depth up to bed b's bound as simulateBed does
// and returns the best depth and its tokens/s.
func bestStaticBed(t testing.TB, b reqBed, requests, n int, seed uint64) (bestD int, best float64) {
	t.Helper()
	for d := 0; d <= b.bound; d++ {
		r := simulateBed(t, b, func() sdk.DepthPolicy { return mustPolicy(t, "static", fmt.Sprintf(`{"depth":%d}`, d)) }, requests, n, seed)
		if r > best {
			bestD, best = d, r
		}
	}
	return bestD, best
}

// TestAdaptiveShortRequests: a new policy per request of 64 or 128 tokens, as a server
// runs it, on prompts of mixed acceptance: its per-request start must not cost what the
// cut-off wins — at least the best static depth over mixed and high-acceptance
// prompts, within 3% of plain decoding over prompts where drafting does not pay. Each
// regime is the mean over eight seeds' ratios to their best static depth: one seed's
// ratio moves by about 1% with the luck of its 300 requests.
func TestAdaptiveShortRequests(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lo, hi float64
		n      int
		floor  float64
	}{{"mixed", 0.2, 0.95, 64, 1}, {"mixed128", 0.2, 0.95, 128, 1}, {"low", 0.2, 0.5, 64, 0.97}, {"high", 0.7, 0.97, 64, 1}} {
		const seeds, reqs = 8, 300
		sum, worst := 0.0, math.Inf(1)
		for seed := uint64(1); seed <= seeds; seed++ {
			ad := simulateRequests(t, func() sdk.DepthPolicy { return mustPolicy(t, "adaptive", `{}`) }, reqs, tc.n, tc.lo, tc.hi, seed)
			_, best := bestStaticBed(t, trainedBed(tc.lo, tc.hi), reqs, tc.n, seed)
			sum += ad / best
			worst = min(worst, ad/best)
		}
		mean := sum / seeds
		t.Logf("%-8s adaptive %.3f of the best static depth over %d seeds (worst seed %.3f)", tc.name, mean, seeds, worst)
		if mean < tc.floor {
			t.Errorf("%s: adaptive %.3f of the best static depth over %d seeds, want ≥ %.2f", tc.name, mean, seeds, tc.floor)
		}
	}
}

// TestAdaptiveCalibration: where the draft's confidence understates its accuracy (the
// second bed's draft), the calibrated cut-off must learn so within 128-token requests
// and beat the uncalibrated one, which takes the confidence for the chance of
// acceptance and so ends nearly every round after one token (measured: 1.006 and 0.987
// of the best static depth).
func TestAdaptiveCalibration(t *testing.T) {
	const seed, reqs, n = 3, 100, 128
	bed := underconfidentBed()
	cal := simulateBed(t, bed, func() sdk.DepthPolicy { return mustPolicy(t, "adaptive", `{}`) }, reqs, n, seed)
	raw := simulateBed(t, bed, func() sdk.DepthPolicy { return mustPolicy(t, "adaptive", `{"calibrate":0}`) }, reqs, n, seed)
	bestD, best := bestStaticBed(t, bed, reqs, n, seed)
	t.Logf("calibrated %.1f tokens/s (%.3f of the best static depth d=%d, %.1f), uncalibrated %.1f (%.3f)",
		cal, cal/best, bestD, best, raw, raw/best)
	if cal < raw*1.003 {
		t.Errorf("calibrated %.1f tokens/s, want at least 1.003 × the uncalibrated %.1f", cal, raw)
	}
}

// TestCalibratedCut checks the cut-off calibration on hand-set evidence, each bucket
// learning only from its own tokens (calibrate_shift 0; TestCalibratedCutShift has the
// shift).
func TestCalibratedCut(t *testing.T) {
	a, err := NewAdaptive([]byte(`{"calibrate":3,"calibrate_shift":0}`))
	if err != nil {
		t.Fatal(err)
	}
	// no evidence: the confidence is taken for the chance of acceptance, so the cut is
	// the lowest bucket whose middle times a_1 is worth a step
	edge := func(c float32) float64 { return float64(c) }
	if c := a.calibratedCut(0.6, 1); c != edge(0.6) {
		t.Errorf("no evidence, need 0.6: cut %v, want 0.6 (the 0.6-0.7 bucket's middle 0.65)", c)
	}
	if c := a.calibratedCut(0.99, 1); c != 0.95 {
		t.Errorf("no evidence, need 0.99: cut %v, want the ceiling 0.95", c)
	}
	// tokens drafted at 0.2-0.4 always accepted, and so were the tokens after them: the
	// buckets above, with no evidence, are pooled with them by the isotonic fit
	for _, b := range []int{calBucket(0.25), calBucket(0.35)} {
		a.judged[b], a.hit[b] = 30, 30
	}
	a.followed, a.both = 60, 60
	if c := a.calibratedCut(0.6, 1); c != edge(0.2) {
		t.Errorf("underconfident draft: cut %v, want 0.2", c)
	}
	// the same, but the token after an accepted one is accepted only half the time
	a.both = 30
	if c := a.calibratedCut(0.6, 1); c != 0.95 {
		t.Errorf("underconfident draft, next token at 0.5: cut %v, want the ceiling 0.95", c)
	}
	// overconfident: tokens at 0.6-1 accepted a third of the time
	a.both = 60
	for b := calBucket(0.6); b < calBuckets; b++ {
		a.judged[b], a.hit[b] = 30, 10
	}
	if c := a.calibratedCut(0.6, 1); c != 0.95 {
		t.Errorf("overconfident draft: cut %v, want the ceiling 0.95", c)
	}
}

// TestCalibratedCutShift: evidence in one low bucket that the draft is underconfident
// moves, with calibrate_shift, every other bucket's prior, the more the weaker the
// shift's own prior (the default 10 against 30); without it the isotonic fit pools it
// with the empty buckets above and the cut stays where the priors put it.
func TestCalibratedCutShift(t *testing.T) {
	for _, tc := range []struct {
		params string
		want   float32
	}{{`{"calibrate_shift":0}`, 0.6}, {`{}`, 0.05}, {`{"calibrate_shift":30}`, 0.1}} {
		a, err := NewAdaptive([]byte(tc.params))
		if err != nil {
			t.Fatal(err)
		}
		b := calBucket(0.12)
		a.judged[b], a.hit[b], a.followed, a.both = 30, 30, 30, 30
		if c := a.calibratedCut(0.6, 1); float32(c) != tc.want {
			t.Errorf("%s: cut %v, want %v", tc.params, c, tc.want)
		}
	}
}

func TestCalBucket(t *testing.T) {
	for i := 0; i <= 1000; i++ {
		c := float32(i) / 1000
		for _, x := range []float32{c, math.Nextafter32(c, 0), math.Nextafter32(c, 2)} {
			want := 0 // the last edge at or below x
			for want+1 < calBuckets && x >= calEdges[want+1] {
				want++
			}
			if got := calBucket(x); got != want {
				t.Fatalf("calBucket(%v) = %d, want %d", x, got, want)
			}
		}
	}
	for _, tc := range []struct {
		c    float32
		want int
	}{{float32(math.NaN()), 0}, {-1, 0}, {float32(math.Inf(-1)), 0}, {2, calBuckets - 1}, {float32(math.Inf(1)), calBuckets - 1}} {
		if got := calBucket(tc.c); got != tc.want {
			t.Errorf("calBucket(%v) = %d, want %d", tc.c, got, tc.want)
		}
	}
}

// TestTrainedSpread checks that trainedBed's requests accept as often as drawn.
func TestTrainedSpread(t *testing.T) {
	luck := rand.New(rand.NewPCG(1, 2))
	for _, p := range []float64{0.2, 0.35, 0.5, 0.65, 0.8, 0.95} {
		k := trainedSpread(p)
		s := 0.0
		const n = 200000
		for range n {
			s += trainedAccept(float32(math.Pow(luck.Float64(), k)))
		}
		if got := s / n; math.Abs(got-p) > 0.005 {
			t.Errorf("p %.2f: spread %.3f gives mean acceptance %.4f", p, k, got)
		}
	}
}
