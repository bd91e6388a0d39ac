package builtin

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/minfer/minfer/sdk"
)

// A simulation of continuous-batching speculative serving (issue 21), the engine's
// batch as core/engine/batch.go and round.go run it: every generating sequence asks
// its own policy for a depth each step, the drafting sequences draft in lockstep (draft
// forward k serves every sequence still drafting at its step k, a sequence's first one
// carrying the catch-up rows its draft model owes since it last drafted), the target
// runs one forward over every sequence's rows once the deepest draft is done, and each
// policy is told its round as the engine tells it: DraftNs its own draft phase,
// VerifyNs from the end of it to the forward's result (a sequence at depth 0 waits
// through the others' draft phase), BatchSeqs and BatchRows the forward's.

// serveCosts are a machine's serving costs, in ns.
type serveCosts struct {
	name   string
	verify func(rows int) float64 // one target forward of that many rows
	draft  func(rows int) float64 // one draft forward
	host   float64                // the host's work around each target forward
}

// piecewise interpolates linearly between the points (rows, ms), which rise in rows;
// past the last it adds forwards of the last point's rows (the backend splits a
// forward there: 64 rows, minfer's identity bound).
func piecewise(pts ...[2]float64) func(int) float64 {
	var f func(int) float64
	f = func(r int) float64 {
		last := pts[len(pts)-1]
		if top := int(last[0]); r > top {
			v := last[1] * 1e6 * float64(r/top)
			if r%top > 0 {
				v += f(r % top)
			}
			return v
		}
		x := float64(max(r, 1))
		for i := 1; i < len(pts); i++ {
			if x <= pts[i][0] {
				a, b := pts[i-1], pts[i]
				return (a[1] + (b[1]-a[1])*(x-a[0])/(b[0]-a[0])) * 1e6
			}
		}
		return last[1] * 1e6
	}
	return f
}

// h200 is the 7B Q4_K_M target and its 0.5B draft on the H200 (specbench at 75b6498,
// docs/PERFORMANCE.md): the verify cost by rows steps up past 8, 16 and 32 rows (the
// kernels' tiles), a draft forward is 0.862 ms at one row (its rows a guess: 10 µs
// each, a 0.5B model being memory-bound there).
func h200(host float64) serveCosts {
	return serveCosts{name: "h200",
		verify: piecewise([2]float64{1, 2.48}, [2]float64{8, 5.77}, [2]float64{9, 7.63}, [2]float64{12, 7.95},
			[2]float64{16, 8.16}, [2]float64{17, 12.73}, [2]float64{32, 15.63}, [2]float64{33, 19.55}, [2]float64{64, 28.14}),
		draft: func(r int) float64 { return 0.862e6 + 10e3*float64(r-1) },
		host:  host}
}

// serveResult is a serving simulation's outcome.
type serveResult struct {
	tokens, ns   float64
	rounds       int // sequence-rounds
	drafting     int // of which drafted
	steps, deep  int // batch steps, and of those whose draft phase ran past 3 steps
	draftForward int // draft forwards
}

func (r serveResult) rate() float64 { return r.tokens / r.ns * 1e9 }

// simulateServing serves clients sequences, each generating requests of tokens tokens one
// after another with a new policy per request (as minfer starts one), with acceptance
// accept per draft position (a request's own, drawn in [accept-spread, accept+spread])
// and the luck of seed. mk nil is plain serving: no sequence drafts.
func simulateServing(t testing.TB, mk func() sdk.DepthPolicy, c serveCosts, clients, requests, tokens int, accept, spread float64, seed uint64) serveResult {
	t.Helper()
	const maxDepth = 16
	type seq struct {
		p        sdk.DepthPolicy
		last     sdk.RoundOutcome
		luck     *rand.Rand
		accept   float64
		made     int // tokens of this request
		left     int // requests left, this one included
		owe      int // rows the draft model owes (catch-up), at least 1 when drafting
		d, dr, s int
		acc      int
		conf     []float32
	}
	noise := rand.New(rand.NewPCG(seed, 999))
	seqs := make([]*seq, clients)
	start := func(q *seq) {
		q.made, q.owe = 0, 1
		q.accept = accept + spread*(2*q.luck.Float64()-1)
		q.last = sdk.RoundOutcome{Round: -1, MaxDepth: maxDepth}
		if mk != nil {
			q.p = mk()
		}
	}
	for i := range seqs {
		seqs[i] = &seq{luck: rand.New(rand.NewPCG(seed, uint64(i+1))), left: requests}
		start(seqs[i])
	}
	var res serveResult
	u := make([]float64, maxDepth)
	conf := make([]float32, maxDepth)
	var drafting []int // draft forward k's rows
	for round := 0; ; round++ {
		var live []*seq
		for _, q := range seqs {
			if q.left > 0 {
				live = append(live, q)
			}
		}
		if len(live) == 0 {
			break
		}
		rows, most := 0, 0
		drafting = drafting[:0]
		for _, q := range live {
			for i := range u {
				u[i] = q.luck.Float64()
				if w := float32(q.luck.Float64()); u[i] < q.accept {
					conf[i] = 0.45 + 0.55*w
				} else {
					conf[i] = 0.6 * w
				}
			}
			q.d, q.dr, q.s = 0, 0, 0
			if q.p != nil {
				q.last.MaxDepth = max(min(maxDepth, tokens-q.made-1), 0)
				dec, err := q.p.NextDepth(context.Background(), q.last)
				if err != nil {
					t.Fatal(err)
				}
				q.d = min(max(dec.Depth, 0), q.last.MaxDepth)
				q.dr, q.s = earlyExit(dec, q.d, conf)
			}
			q.acc = 0
			for q.acc < q.dr && u[q.acc] < q.accept {
				q.acc++
			}
			q.conf = append(q.conf[:0], conf[:q.dr]...)
			rows += q.dr + 1
			most = max(most, q.s)
			for k := range q.s {
				for len(drafting) <= k {
					drafting = append(drafting, 0)
				}
				drafting[k]++
				if k == 0 {
					drafting[k] += q.owe - 1
				}
			}
			res.rounds++
			if q.s > 0 {
				res.drafting++
			}
		}
		// the draft phase: forward k ends at phase[k]
		phase := make([]float64, len(drafting)+1)
		for k, r := range drafting {
			phase[k+1] = phase[k] + c.draft(r)*(1+0.1*noise.Float64())
			res.draftForward++
		}
		verify := (c.host + c.verify(rows)) * (1 + 0.1*noise.Float64())
		res.ns += phase[len(drafting)] + verify
		res.steps++
		if most > 3 {
			res.deep++
		}
		for _, q := range live {
			got := q.acc + 1
			q.made += got
			res.tokens += float64(got)
			switch {
			case q.s == 0:
				q.owe++
			case q.acc == q.dr:
				q.owe = 2
			default:
				q.owe = 1
			}
			q.last = sdk.RoundOutcome{Round: round, Depth: q.d, Drafted: q.dr, Accepted: q.acc,
				DraftNs: int64(phase[q.s]), VerifyNs: int64(phase[len(drafting)] - phase[q.s] + verify),
				MaxDepth: maxDepth, Drafters: 1, DraftConf: append([]float32(nil), q.conf...),
				BatchSeqs: len(live), BatchRows: rows}
			if q.made >= tokens {
				q.left--
				if q.left > 0 {
					start(q)
				}
			}
		}
	}
	return res
}

// TestSpeculativeServingSimulated serves 1 to 32 clients (3 requests of 128 tokens
// each, acceptance 0.85-0.95 a request, seeds 1-4) with the H200's costs, the host's
// own work a step 0 or 1.4 ms (the server's 4-client step, 5.3 ms, less the bare
// forward's 3.9), and logs speculative ÷ plain for the adaptive policy and, for
// reference, static depths 1 and 3 (every sequence drafting in lockstep). It holds
// the bare-forward case at 4 and 8 clients to at least 0.95 of plain, with at most
// one step in fifty whose draft phase runs past three draft forwards. Before the
// cut-off cap was priced by the batch (capDepth) that case gave 0.869 and 0.796 of
// plain, with 0.90 and 1.53 draft forwards a step (the H200 measured 0.90 and 0.83 at
// 75b6498): one sequence's round ran to the cap, up to 16 draft steps, while the
// batch waited. Not held: 16 and 32 clients, and 4-8 clients with the host's 1.4 ms
// (0.75-0.87 of plain), where the chosen depth itself still drafts deep one sequence
// at a time; docs/perf-plugins.md has the table and what was tried.
func TestSpeculativeServingSimulated(t *testing.T) {
	policies := []struct{ name, params string }{{"adaptive", `{}`}, {"static", `{"depth":1}`}, {"static", `{"depth":3}`},
		{"adaptive", `{"batch_table":true}`}}
	for _, host := range []float64{0, 1.4e6} {
		c := h200(host)
		for _, n := range []int{1, 2, 4, 8, 16, 32} {
			const seeds = 4
			var got [4]float64
			var deep, forwards float64
			for seed := uint64(1); seed <= seeds; seed++ {
				plain := simulateServing(t, nil, c, n, 3, 128, 0.9, 0.05, seed)
				for i, p := range policies {
					spec := simulateServing(t, func() sdk.DepthPolicy { return mustPolicy(t, p.name, p.params) }, c, n, 3, 128, 0.9, 0.05, seed)
					got[i] += spec.rate() / plain.rate() / seeds
					if i == 0 {
						deep += float64(spec.deep) / float64(spec.steps) / seeds
						forwards += float64(spec.draftForward) / float64(spec.steps) / seeds
					}
				}
			}
			t.Logf("host %.1f ms a step, %2d clients: speculative ÷ plain %.3f (static depth 1 %.3f, 3 %.3f; batch_table %.3f); %.3f of steps drafted past 3 forwards, %.2f draft forwards a step",
				host/1e6, n, got[0], got[1], got[2], got[3], deep, forwards)
			// batch_table (adaptive_verify.go batchTable): what it reaches, held
			if want := batchTableFloor(host, n); got[3] < want {
				t.Errorf("host %.1f ms, %d clients: batch_table speculative ÷ plain %.3f, want ≥ %.2f", host/1e6, n, got[3], want)
			}
			if host == 0 && (n == 4 || n == 8) {
				if got[0] < 0.95 {
					t.Errorf("%d clients: speculative ÷ plain %.3f, want ≥ 0.95", n, got[0])
				}
				if deep > 0.02 {
					t.Errorf("%d clients: %.3f of steps drafted past 3 forwards, want at most 1 in 50", n, deep)
				}
			}
		}
	}
}

// batchTableFloor is what TestSpeculativeServingSimulated holds the adaptive policy
// with batch_table to, speculative ÷ plain: measured 1.397 1.167 1.094 1.183 0.915
// 0.996 at 1-32 clients with no host work, 1.870 1.330 1.229 1.275 0.989 1.035 with the
// host's 1.4 ms (the default's: 1.397 0.960 0.977 0.971 0.751 0.853 and 1.870 1.136
// 0.874 0.836 0.800 0.865). Not held at ≥ 1: 16 clients, where no depth pays (static
// depth 1 gives 0.915 and 0.988) and the batch never measures a plain forward of 16
// rows (batchTable charges it as the smallest size it measured).
func batchTableFloor(host float64, n int) float64 {
	switch {
	case host > 0 && n == 4:
		return 1.2
	case n == 4 || n == 8:
		return 1.05
	case n == 16:
		return 0.9
	}
	return 0.98
}

// h200Served is h200 calibrated on the H200's own serving run (docs/PERFORMANCE.md,
// 2026-12-03 11:57 UTC session: main d68fa8d, the 7B Q4_K_M / 0.5B pair): a target
// forward of R rows costs what a plain step of R sequences took there, host work and
// prefill included (wall time over the run's 512 steps a client: 5.02 ms at 4, 7.15 at
// 8, 10.7 at 16; 19.8 at 32 from the same session's third call; 2.78 ms for one
// client's step, the 09:16 UTC session's 360 t/s), and a draft forward what
// the batched draft forwards took on average at 4, 8 and 16 sequences (1.70, 2.29 and
// 3.00 ms, taken at their catch-up rows, 1.87 a sequence; 0.73 ms a one-row step, the
// specbench figure).
func h200Served() serveCosts {
	return serveCosts{name: "h200-served",
		verify: piecewise([2]float64{1, 2.78}, [2]float64{4, 5.02}, [2]float64{8, 7.15}, [2]float64{16, 10.7}, [2]float64{32, 19.8}),
		draft:  piecewise([2]float64{1, 0.73}, [2]float64{7, 1.70}, [2]float64{15, 2.29}, [2]float64{30, 3.00}, [2]float64{64, 5.0})}
}

// TestServingSimulatedCalibrated: with the H200's serving costs (h200Served) the
// simulation reproduces what the card measured for static depth 1 against plain
// serving at 4, 8 and 16 clients (1.02-1.06, 0.98-1.00 and 0.84-0.85 over that
// session's runs; held within 0.06 of their middles), and logs, as the prediction for
// the next run, what it gives the adaptive policy and its batch_table.
func TestServingSimulatedCalibrated(t *testing.T) {
	c := h200Served()
	for _, tc := range []struct {
		n    int
		want float64 // static depth 1 ÷ plain measured (the middle of the runs)
	}{{4, 1.04}, {8, 0.99}, {16, 0.845}} {
		const seeds = 4
		var got [3]float64
		for seed := uint64(1); seed <= seeds; seed++ {
			plain := simulateServing(t, nil, c, tc.n, 4, 128, 0.87, 0.05, seed)
			for i, p := range []struct{ name, params string }{{"static", `{"depth":1}`}, {"adaptive", `{}`}, {"adaptive", `{"batch_table":true}`}} {
				spec := simulateServing(t, func() sdk.DepthPolicy { return mustPolicy(t, p.name, p.params) }, c, tc.n, 4, 128, 0.87, 0.05, seed)
				got[i] += spec.rate() / plain.rate() / seeds
			}
		}
		t.Logf("%2d clients: static depth 1 ÷ plain %.3f (measured %.3f); adaptive %.3f, batch_table %.3f", tc.n, got[0], tc.want, got[1], got[2])
		if d := got[0] - tc.want; d > 0.06 || d < -0.06 {
			t.Errorf("%d clients: simulated static depth 1 ÷ plain %.3f, the H200 measured %.3f", tc.n, got[0], tc.want)
		}
	}
}
