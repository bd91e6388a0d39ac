package builtin

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"hash"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/minfer/minfer/sdk"
)

// TestAdaptiveMatchesReference drives the adaptive policy with long sequences of rounds
// and wants, round by round, the same decisions and the same internal state, bit for
// bit, as the reference: testdata/adaptive_reference.json holds a hash of both per run.
// The rounds come from a simulated decoder that obeys the decisions (so they go where
// the policy goes: parking, probes, early exits, depth caps, new requests), over
// parameter sets that reach every branch (fixed and automatic cut-offs, the scale's
// fold, no forgetting, extreme priors, window 1) and cost regimes from a GPU's to
// degenerate nanosecond ones, with now and then a malformed outcome.
//
// It pins the policy's behaviour for speed work on it: the hashes were recorded with
// the policy as of c90aaa9 (before its call was made cheaper, d3be4c0, which kept every
// bit; that commit's adaptive_ref_test.go ran the old code side by side and can find the
// first differing round), then again when the cut-off became calibrated (the hashes of
// c90aaa9 hold for every parameter set with "calibrate":0 added, checked then), and
// again when the simulated decoder began to report its draft confidences (before, the
// calibration saw no evidence, so its defaults did not count; they changed in the same
// commit). A change meant to alter decisions records new hashes with
// `go test ./plugins/builtin -run TestAdaptiveMatchesReference -update` and says why.
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
		`{"calibrate":0}`,
		`{"calibrate":0.01,"keep_cut":true}`,
		`{"calibrate":1000}`,
		`{"calibrate":10,"calibrate_shift":30}`,
		`{"calibrate_shift":0.01,"draft_max":9}`,
		`{"calibrate":3,"calibrate_shift":0}`, // the default until the shift became one
	}
	const golden = "testdata/adaptive_reference.json"
	want := map[string]string{}
	if !*update {
		data, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("%s: %v", golden, err)
		}
	}
	got := map[string]string{}
	for _, ps := range params {
		for _, c := range identityCosts {
			for seed := range uint64(3) {
				key := fmt.Sprintf("%s/%s/%d", ps, c.name, seed)
				got[key] = fmt.Sprintf("%016x", traceHash(t, ps, c, seed, 3000))
				if !*update && got[key] != want[key] {
					t.Errorf("%s: decisions or state differ from the reference (hash %s, want %s)", key, got[key], want[key])
				}
			}
		}
	}
	if *update {
		data, _ := json.MarshalIndent(got, "", "  ")
		if err := os.WriteFile(golden, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if len(want) != len(got) {
		t.Errorf("%s has %d runs, the test makes %d", golden, len(want), len(got))
	}
}

var update = flag.Bool("update", false, "record testdata/adaptive_reference.json anew")

// costs is a cost regime of the simulated decoder.
type costs struct {
	name   string
	step   float64              // ns per draft step
	verify func(nt int) float64 // ns per verify of nt rows
}

// hashState folds, bit for bit, the decision and what the policy knows and scores into
// h: a decision can hide a difference of an ulp in a score for many rounds, so the scores
// count too.
func hashState(h hash.Hash64, d sdk.DepthDecision, err error, a *Adaptive) {
	var b [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	keep := uint64(0)
	if d.KeepCut {
		keep = 1
	}
	if err != nil {
		keep = 2
	}
	put(uint64(d.Depth))
	put(uint64(math.Float32bits(d.MinConf)))
	put(keep)
	for _, v := range [][]float64{a.succ, a.fail, a.pass, a.stop, {a.scale}, a.mean, a.opt,
		a.judged[:], a.hit[:], {a.followed, a.both}} {
		put(uint64(len(v)))
		for _, x := range v {
			put(math.Float64bits(x))
		}
	}
}

// identityCosts are the cost regimes of TestAdaptiveMatchesReference.
var identityCosts = []costs{
	{"gpu", 75e3, flat(192e3, 8e3)},
	{"cpu", 100e3, flat(1e6, 120e3)},
	{"kink", 60e3, kink(1e6, 10e3, 4, 1e6)},
	{"dear", 1e6, flat(1e6, 10e3)},
	{"ns", 1, flat(1, 0.3)}, // costs under the 1 ns floor of score
}

// traceHash runs the policy for n rounds of requests of random length, acceptance and
// confidence calibration and returns the hash of its decisions and states.
func traceHash(t *testing.T, params string, c costs, seed uint64, n int) uint64 {
	t.Helper()
	got, err := NewAdaptive([]byte(params))
	if err != nil {
		t.Fatal(err)
	}
	h := fnv.New64a()
	ctx := context.Background()
	g := rand.New(rand.NewPCG(seed, 99))
	var (
		last   = sdk.RoundOutcome{Round: -1, MaxDepth: 16}
		budget = 0       // tokens left in this request
		accept = 0.0     // chance that a draft token is right
		sharp  = 0.0     // how well the draft's confidence tells right from wrong
		conf   []float32 // this round's draft confidences
		right  []bool    // and whether each draft token is right
	)
	for range n {
		a, errA := got.NextDepth(ctx, last)
		hashState(h, a, errA, got)
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
			DraftNs: jitter(float64(steps) * c.step), VerifyNs: jitter(c.verify(drafted + 1)), MaxDepth: maxD,
			DraftConf: conf[:drafted]}
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
	return h.Sum64()
}
