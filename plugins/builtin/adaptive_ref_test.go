package builtin

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/minfer/minfer/sdk"
)

// TestAdaptiveMatchesReference drives Adaptive and refAdaptive (below: the policy before
// its call was made cheaper) with the same long sequences of rounds and wants the same
// decision from both every round: depth, the cut-off's float32 bits and keep_cut. The
// rounds come from a simulated decoder that obeys the decisions (so they go where the
// policy goes: parking, probes, early exits, depth caps, new requests), over parameter
// sets that reach every branch (fixed and automatic cut-offs, the scale's fold, no
// forgetting, extreme priors, window 1) and cost regimes from a GPU's to degenerate
// nanosecond ones, with now and then a malformed outcome. It pins the policy's
// behaviour for speed work on it: a change meant to alter decisions changes
// refAdaptive the same way, in the same commit.
func TestAdaptiveMatchesReference(t *testing.T) {
	params := []string{
		`{}`,
		`{"draft_max":12}`,
		`{"draft_max":8,"hysteresis":0,"optimism":2,"min_conf":0.2}`,
		`{"min_conf":0.3,"keep_cut":true}`,
		`{"auto_cut":false}`,
		`{"keep_cut":true,"draft_max":7}`,
		`{"relax":0.5,"forget":0.5}`, // the scale folds back every ~330 rounds
		`{"relax":0.9,"forget":0.7,"carry":0}`,
		`{"forget":1,"relax":1,"carry":1}`,
		`{"prior_strength":0.01,"optimism":10}`,
		`{"prior_strength":1000,"prior_mean":0.99}`,
		`{"prior_mean":0.01,"optimism":0}`,
		`{"window":1,"probe":1}`,
		`{"window":4096,"probe":0}`,
		`{"draft_max":0}`,
		`{"draft_max":1,"start":0}`,
		`{"draft_max":40,"start":16}`,
		`{"hysteresis":0,"park_margin":0}`,
		`{"hysteresis":10,"park_margin":10}`,
	}
	for _, ps := range params {
		for _, c := range identityCosts {
			t.Run(ps+"/"+c.name, func(t *testing.T) {
				for seed := range uint64(3) {
					matchReference(t, ps, c, seed, 3000)
				}
			})
		}
	}
}

// costs is a cost regime of the simulated decoder.
type costs struct {
	name   string
	step   float64              // ns per draft step
	verify func(nt int) float64 // ns per verify of nt rows
}

// stateDiff compares, bit for bit, what the two policies know and score: a decision can
// hide a difference of an ulp in a score for many rounds, so the scores are compared
// too.
func stateDiff(got *Adaptive, want *refAdaptive) string {
	for _, v := range []struct {
		name      string
		got, want []float64
	}{
		{"succ", got.succ, want.succ}, {"fail", got.fail, want.fail},
		{"pass", got.pass, want.pass}, {"stop", got.stop, want.stop},
		{"scale", []float64{got.scale}, []float64{want.scale}},
		{"mean", got.mean, want.mean}, {"opt", got.opt, want.opt},
	} {
		if len(v.got) != len(v.want) {
			return fmt.Sprintf("%s: got %d values, want %d", v.name, len(v.got), len(v.want))
		}
		for i := range v.got {
			if math.Float64bits(v.got[i]) != math.Float64bits(v.want[i]) {
				return fmt.Sprintf("%s[%d]: got %v, want %v", v.name, i, v.got[i], v.want[i])
			}
		}
	}
	return ""
}

// identityCosts are the cost regimes of TestAdaptiveMatchesReference.
var identityCosts = []costs{
	{"gpu", 75e3, flat(192e3, 8e3)},
	{"cpu", 100e3, flat(1e6, 120e3)},
	{"kink", 60e3, kink(1e6, 10e3, 4, 1e6)},
	{"dear", 1e6, flat(1e6, 10e3)},
	{"ns", 1, flat(1, 0.3)}, // costs under the 1 ns floor of score
}

// matchReference runs Adaptive and refAdaptive side by side for n rounds of requests
// of random length, acceptance and confidence calibration, and fails at the first
// round where their decisions or states differ.
func matchReference(t *testing.T, params string, c costs, seed uint64, n int) {
	t.Helper()
	got, err := NewAdaptive([]byte(params))
	if err != nil {
		t.Fatal(err)
	}
	want, err := newRefAdaptive([]byte(params))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	g := rand.New(rand.NewPCG(seed, 99))
	var (
		last    = sdk.RoundOutcome{Round: -1, MaxDepth: 16}
		budget  = 0       // tokens left in this request
		accept  = 0.0     // chance that a draft token is right
		sharp   = 0.0     // how well the draft's confidence tells right from wrong
		conf    []float32 // this round's draft confidences
		right   []bool    // and whether each draft token is right
		history []string  // the last rounds, for the failure message
	)
	for r := 0; r < n; r++ {
		a, errA := got.NextDepth(ctx, last)
		b, errB := want.NextDepth(ctx, last)
		history = append(history, fmt.Sprintf("%+v -> %+v", last, b))
		if len(history) > 5 {
			history = history[1:]
		}
		if errA != nil || errB != nil || a.Depth != b.Depth || math.Float32bits(a.MinConf) != math.Float32bits(b.MinConf) || a.KeepCut != b.KeepCut {
			t.Fatalf("seed %d round %d: got %+v (%v), want %+v (%v); last rounds:\n%s", seed, r, a, errA, b, errB, strings.Join(history, "\n"))
		}
		if diff := stateDiff(got, want); diff != "" {
			t.Fatalf("seed %d round %d: %s; last rounds:\n%s", seed, r, diff, strings.Join(history, "\n"))
		}
		if budget <= 1 { // a new request
			budget = 1 + g.IntN(300)
			accept = 1 - g.Float64()*g.Float64() // mostly high: drafting pays
			sharp = g.Float64()
			last = sdk.RoundOutcome{Round: -1, MaxDepth: min(16, budget-1)}
			if g.IntN(8) == 0 {
				last.MaxDepth = g.IntN(3) - 1 // no bound given, or none left
			}
			continue
		}
		if g.IntN(200) == 0 {
			accept = 1 - g.Float64()*g.Float64() // the text changes mid-request
		}
		maxD := min(16+g.IntN(2)*32, budget-1)
		d := min(max(a.Depth, 0), maxD)
		conf, right = conf[:0], right[:0]
		for range d {
			ok := g.Float64() < accept
			w := float32(g.Float64())
			cf := w
			if ok {
				cf = 1 - float32(sharp)*(1-w)
			} else {
				cf = w * (1 - float32(sharp)/2)
			}
			conf, right = append(conf, cf), append(right, ok)
		}
		drafted, steps := earlyExit(a, d, conf)
		acc := 0
		for acc < drafted && right[acc] {
			acc++
		}
		jitter := func(v float64) int64 { return int64(v * (1 + 0.3*g.Float64()*g.Float64())) }
		last = sdk.RoundOutcome{Round: last.Round + 1, Depth: d, Drafted: drafted, Accepted: acc,
			DraftNs: jitter(float64(steps) * c.step), VerifyNs: jitter(c.verify(drafted + 1)), MaxDepth: maxD}
		budget -= acc + 1
		if g.IntN(40) == 0 { // a malformed or degenerate outcome
			switch g.IntN(9) {
			case 0:
				last.VerifyNs = 0 // nothing measured
			case 1:
				last.VerifyNs = -int64(g.IntN(5))
			case 2:
				last.DraftNs = 0
			case 3:
				last.Drafted = d + 1 + g.IntN(40) // more than asked
			case 4:
				last.Accepted = drafted + 1 + g.IntN(3)
			case 5:
				last.Depth, last.Drafted, last.Accepted = -1, -2, -3
			case 6:
				last.MaxDepth = []int{0, -3, 2000}[g.IntN(3)]
			case 7:
				last.VerifyNs, last.DraftNs = 1e15, 1e15 // an outlier
			case 8:
				last.Drafted, last.Accepted = drafted+1, drafted+1 // a round longer than its depth
			}
		}
	}
}

// refAdaptive is the adaptive policy as it was at c90aaa9 (adaptive.go, comments
// dropped), before its call was made cheaper for WebAssembly. TestAdaptiveMatchesReference
// holds Adaptive to it: every decision must be the same, bit for bit.
type refAdaptive struct {
	p adaptiveParams

	cur     int
	started bool
	parked  int
	probed  bool
	gap     int
	autoCut bool
	cut     float32
	keepCut bool

	succ, fail []float64
	pass, stop []float64
	scale      float64
	steps      refRing
	verify     []refRing
	est        []float64
	mean, opt  []float64
}

func newRefAdaptive(params []byte) (*refAdaptive, error) {
	a, err := NewAdaptive(params) // the same params, defaults and checks
	if err != nil {
		return nil, err
	}
	return &refAdaptive{p: a.p, steps: newRefRing(a.p.Window), scale: 1, gap: a.p.Probe}, nil
}

func (a *refAdaptive) NextDepth(_ context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	bound := a.p.DraftMax
	if last.Round >= 0 || last.MaxDepth > 0 {
		bound = min(bound, max(last.MaxDepth, 0))
	}
	if a.probed {
		if last.Round >= 0 && last.Accepted > 0 {
			a.gap = a.p.Probe // the draft agrees again: probe as often as at first
		}
		a.probed = false
	}
	if last.Round >= 0 {
		a.observe(&last)
	} else if a.started {
		a.newRequest()
	}
	if !a.started {
		a.cur = min(a.p.Start, bound)
	} else {
		a.cur = a.choose(bound)
		a.probeFromZero(bound)
	}
	a.cutOff()
	return a.decision(), nil
}

func (a *refAdaptive) probeFromZero(bound int) {
	if a.cur > 0 || a.p.Probe == 0 {
		a.parked, a.gap = 0, a.p.Probe
		return
	}
	if bound == 0 || !a.draftingCanPay(bound) {
		return
	}
	a.parked++
	if a.parked >= a.gap {
		a.cur, a.parked, a.gap, a.probed = 1, 0, 2*a.gap, true
	}
}

func (a *refAdaptive) draftingCanPay(bound int) bool {
	step, ok := a.steps.min()
	if !ok || a.est[1] <= 0 {
		return true // not measured yet
	}
	for d := 1; d <= bound; d++ {
		if float64(d+1)/(float64(d)*step+a.est[d+1]) > (1+a.p.Hysteresis)/a.est[1] {
			return true
		}
	}
	return false
}

func (a *refAdaptive) cutOff() {
	a.cut, a.keepCut, a.autoCut = float32(a.p.MinConf), a.p.KeepCut, false
	if a.p.MinConf > 0 || !a.p.AutoCut || a.cur == 0 {
		return
	}
	step, ok := a.steps.min()
	if !ok {
		return
	}
	row := max((a.est[a.cur+1]-a.est[1])/float64(a.cur), 0)
	rate := a.mean[a.cur] // tokens per ns
	k := a.p.PriorStrength
	a1 := (k*a.p.PriorMean + a.succ[1]*a.scale) / (k + (a.succ[1]+a.fail[1])*a.scale)
	t := min(max(rate*(step+row)/a1, 0.05), 0.95)
	a.cut, a.autoCut = float32(t), true
	a.keepCut = rate*row < t/2 || a.probed
}

func (a *refAdaptive) newRequest() {
	for j := range a.succ {
		a.succ[j] *= a.p.Carry
		a.fail[j] *= a.p.Carry
		a.pass[j] *= a.p.Carry
		a.stop[j] *= a.p.Carry
	}
}

func (a *refAdaptive) decision() sdk.DepthDecision {
	d := a.cur
	if a.autoCut && d > 0 {
		for e := d + 1; e < len(a.opt); e++ {
			if a.opt[e]*(1+a.p.Hysteresis) >= a.opt[a.cur] {
				d = e
			}
		}
	}
	return sdk.DepthDecision{Depth: d, MinConf: a.cut, KeepCut: a.keepCut}
}

func (a *refAdaptive) observe(o *sdk.RoundOutcome) {
	drafted := clampInt(o.Drafted, 0, sdk.MaxDepthLimit)
	accepted := clampInt(o.Accepted, 0, drafted)
	if o.VerifyNs <= 0 {
		return // nothing measured: not a real round
	}
	a.started = true
	a.scale *= a.p.Relax
	if a.scale < 1e-100 { // fold the scale back into the counts before it underflows
		for j := range a.succ {
			a.succ[j] *= a.scale
			a.fail[j] *= a.scale
			a.pass[j] *= a.scale
			a.stop[j] *= a.scale
		}
		a.scale = 1
	}
	one := 1 / a.scale
	a.grow(drafted + 2)
	for j := 1; j <= accepted; j++ {
		a.succ[j] = a.succ[j]*a.p.Forget + one
		a.fail[j] *= a.p.Forget
	}
	if accepted < drafted {
		j := accepted + 1
		a.succ[j] *= a.p.Forget
		a.fail[j] = a.fail[j]*a.p.Forget + one
	}
	steps, at := drafted, 0
	if a.cut > 0 && drafted < o.Depth {
		at = drafted
		if !a.keepCut {
			steps++
			at++
		}
	}
	a.grow(steps + 2)
	for j := 1; j <= steps; j++ {
		if j == at {
			a.stop[j] = a.stop[j]*a.p.Forget + one
			a.pass[j] *= a.p.Forget
		} else {
			a.pass[j] = a.pass[j]*a.p.Forget + one
			a.stop[j] *= a.p.Forget
		}
	}
	if steps > 0 && o.DraftNs > 0 {
		a.steps.push(float64(o.DraftNs) / float64(steps))
	}
	a.verify[drafted+1].push(float64(o.VerifyNs))
}

func (a *refAdaptive) grow(n int) {
	for len(a.succ) < n {
		a.succ = append(a.succ, 0)
		a.fail = append(a.fail, 0)
		a.pass = append(a.pass, 0)
		a.stop = append(a.stop, 0)
	}
	for len(a.verify) < n {
		a.verify = append(a.verify, newRefRing(a.p.Window))
	}
}

func (a *refAdaptive) score(bound int) {
	a.grow(bound + 2)
	est := a.verifyEstimates(bound + 1)
	step, ok := a.steps.min()
	if !ok {
		step = 0
	}
	a.mean = resize(a.mean, bound+1)
	a.opt = resize(a.opt, bound+1)
	prior := a.p.PriorMean // chained: position j's prior is centred on position j-1's mean
	gPrior := 1.0          // likewise for the cut-off's pass rate
	tokM, tokO, accM, accO := 1.0, 1.0, 1.0, 1.0
	run := 1.0    // chance that the draft step at position d runs
	kept := 1.0   // chance that token d is drafted (P_d; 1 for d = 0)
	steps := 0.0  // expected draft steps of a round of depth d
	verify := 0.0 // Σ_{n<d} P(exactly n drafted)·verify(n+1)
	for d := 0; d <= bound; d++ {
		if d > 0 {
			s, f, k := a.succ[d]*a.scale, a.fail[d]*a.scale, a.p.PriorStrength
			inv := 1 / (k + s + f)
			m := (k*prior + s) * inv
			sd := math.Sqrt(m * (1 - m) / (k + s + f + 1))
			bonus := a.p.Optimism * sd * k * inv
			prior = m
			accM *= m
			accO *= min(1, m+bonus)

			ps, st := a.pass[d]*a.scale, a.stop[d]*a.scale
			g := (k*gPrior + ps) / (k + ps + st)
			gPrior = g
			prev := kept
			steps += run
			if a.keepCut {
				kept = run
			} else {
				kept = run * g
			}
			run *= g
			verify += (prev - kept) * est[d]
			tokM += kept * accM
			tokO += kept * accO
		}
		inv := 1 / max(steps*step+verify+kept*est[d+1], 1)
		a.mean[d], a.opt[d] = tokM*inv, tokO*inv
	}
}

func (a *refAdaptive) choose(bound int) int {
	a.score(bound)
	if a.cur > bound {
		a.cur = bound
	}
	reach := 0
	for d := range a.opt {
		if a.tried(d) {
			reach = d + 1
		}
	}
	best := 0
	for d := range a.opt[:min(len(a.opt), reach+1)] {
		if a.opt[d] > a.opt[best] {
			best = d
		}
	}
	if a.opt[best] > a.opt[a.cur]*(1+a.p.Hysteresis) {
		return best
	}
	if best != 0 && a.mean[best] > a.opt[a.cur] {
		return best
	}
	if best == 0 && a.mean[0] > a.opt[a.cur]*(1+a.p.ParkMargin) {
		return best
	}
	if best != a.cur && !a.tried(best) {
		return best
	}
	if a.cur == 0 && a.opt[best] > a.opt[0] {
		return best
	}
	return a.cur
}

func (a *refAdaptive) tried(d int) bool {
	_, ok := a.verify[d+1].min()
	return ok
}

func (a *refAdaptive) verifyEstimates(maxNT int) []float64 {
	a.est = a.est[:0]
	below := 0.0
	for nt := 0; nt <= maxNT; nt++ {
		if v, ok := a.verify[nt].min(); ok {
			below = v
		}
		a.est = append(a.est, below)
	}
	for nt := maxNT - 1; nt >= 0; nt-- {
		if a.est[nt+1] < a.est[nt] {
			a.est[nt] = a.est[nt+1]
		}
	}
	return a.est
}

type refRing struct {
	v    []float64
	next int
	n    int
	lo   float64
}

func newRefRing(n int) refRing { return refRing{v: make([]float64, n)} }

func (r *refRing) push(x float64) {
	old := r.v[r.next]
	r.v[r.next] = x
	r.next++
	if r.next == len(r.v) {
		r.next = 0
	}
	switch {
	case r.n < len(r.v):
		r.n++
		if r.n == 1 || x < r.lo {
			r.lo = x
		}
	case x <= r.lo:
		r.lo = x
	case old == r.lo: // the minimum left the window
		r.lo = r.v[0]
		for _, y := range r.v[1:] {
			if y < r.lo {
				r.lo = y
			}
		}
	}
}

func (r *refRing) min() (float64, bool) { return r.lo, r.n > 0 }
