package builtin

import (
	"math/rand/v2"
	"testing"
)

// hybridBed is scripts/bench-drafters.sh's run (b) in simulation: requests of 128
// tokens, each with a new policy, half of them prose and half copy-heavy, offered the
// draft model and the suffix drafter. The trained target loops on prose (greedy, a
// small model): a prose request's output repeats itself from some position on, where
// the suffix drafter copies it, and before that the suffix drafter has a token at few
// positions (short repeats of the prompt) that the target seldom accepts. A copy-heavy
// request copies its prompt from the start.
type hybridBed struct {
	verify func(nt int) float64
	model  simDrafter
	// suffix is the suffix drafter's cost (call, step); accept and supply are set per
	// request
	suffix simDrafter
}

// hybridRequest draws request i's suffix drafter: copy-heavy for odd i, else prose
// looping from a position drawn in [16, 112) (or never, one prose request in four).
func (b hybridBed) hybridRequest(i int, luck *rand.Rand) simDrafter {
	s := b.suffix
	if i%2 == 1 {
		s.accept = constant(0.92)
		s.supply = func(int) int { return 16 }
		return s
	}
	loop := 16 + luck.IntN(96)
	if luck.IntN(4) == 0 {
		loop = 1 << 30
	}
	// before the loop: a short repeat at one position in four, of 1-3 tokens
	frag := make([]int, loop%1024+128)
	for p := range frag {
		if luck.IntN(4) == 0 {
			frag[p] = 1 + luck.IntN(3)
		}
	}
	s.accept = func(pos int) float64 {
		if pos >= loop {
			return 0.95
		}
		return 0.25
	}
	s.supply = func(pos int) int {
		if pos >= loop {
			return 16
		}
		return frag[pos%len(frag)]
	}
	return s
}

// run simulates requests of n tokens with the drafters ds(i) (request i's) and returns
// tokens per second over all of them.
func (b hybridBed) run(t *testing.T, policy string, ds func(i int, luck *rand.Rand) []simDrafter, requests, n int, seed uint64) float64 {
	t.Helper()
	return b.runOffers(t, policy, ds, requests, n, seed, false)
}

// runOffers is run, the host showing the policy the drafters' offers when offers.
func (b hybridBed) runOffers(t *testing.T, policy string, ds func(i int, luck *rand.Rand) []simDrafter, requests, n int, seed uint64, offers bool) float64 {
	t.Helper()
	luck := rand.New(rand.NewPCG(seed, 22))
	tokens, secs := 0.0, 0.0
	for i := range requests {
		d := ds(i, luck)
		params := "{}"
		if policy == "static" {
			params = `{"depth":0}`
		}
		r, _ := simulateRounds(t, mustPolicy(t, policy, params), d, b.verify, n, seed*1000+uint64(i), offers)
		tokens += float64(n)
		secs += float64(n) / r
	}
	return tokens / secs
}

// hybridShare is the share of the better drafter alone that TestAdaptiveHybridShortRequests
// holds the pair to. Issue 22's bar is 1 (the pair at least the better alone); the
// policy reaches 0.97-0.99 of it in both regimes here, against 0.92-0.94 (H200) and
// 0.95-0.99 (CPU) before its probes were mended (docs/PERFORMANCE.md, "Hybrid rounds on
// short requests"), so the test guards what is reached and the bar stays open.
const hybridShare = 0.96

// TestAdaptiveHybridShortRequests: on the drafter bed's hybrid mix (run b of
// scripts/bench-drafters.sh: 128-token requests, a new policy each, the draft model and
// the suffix drafter), the adaptive policy choosing between the two gets at least
// hybridShare of the better of the two alone, in the H200's costs and in this CPU's.
// (Issue 22: on the H200 the pair made 0.84 of the suffix drafter alone, on the CPU
// 0.80-0.96.)
func TestAdaptiveHybridShortRequests(t *testing.T) {
	testHybrid(t, false, map[string]float64{"h200": hybridShare, "cpu": hybridShare})
}

// TestAdaptiveHybridOffers: the same beds with the host showing the policy the drafters'
// offers (ABI v1.4, [spec] drafter_offers): at the H200 bed's costs the pair reaches
// issue 22's bar, at least the better drafter alone (1.06-1.08 of it; without offers
// 0.975-0.983), and at this CPU's it keeps hybridShare (0.977-1.005; without
// offers 0.963-0.999).
// The drafters alone run as without offers (a host shows offers only to a sequence of
// several drafters).
func TestAdaptiveHybridOffers(t *testing.T) {
	testHybrid(t, true, map[string]float64{"h200": 1, "cpu": hybridShare})
}

// testHybrid runs the hybrid beds, with or without offers, holding the pair to share
// of the better drafter alone per bed.
func testHybrid(t *testing.T, offers bool, share map[string]float64) {
	const requests, n = 48, 128
	for _, tc := range []struct {
		name string
		bed  hybridBed
	}{
		// the trained pair on the H200 (docs/PERFORMANCE.md, "Speculative decoding
		// (H200, the trained qwen2 pair)"): C_T(1) 0.188 ms, C_T(16) 0.353 (11 µs a
		// row), a draft step 64 µs, the draft's catch-up a forward of the tokens
		// behind (some 8 µs a token); the native suffix call 4 µs
		{"h200", hybridBed{verify: flat(177e3, 11e3),
			model:  simDrafter{accept: constant(0.6), supply: func(int) int { return 16 }, step: 64e3, informative: true, catchUp: 8e3},
			suffix: simDrafter{call: 4e3, step: 300, conf: 0.9}}},
		// this CPU (AMD EPYC, 2 cores): a plain round 1.4 ms, a verify row 0.45 ms,
		// the draft's step 150 µs (catch-up 60 µs a token), the suffix call 8 µs
		{"cpu", hybridBed{verify: flat(0.95e6, 450e3),
			model:  simDrafter{accept: constant(0.55), supply: func(int) int { return 16 }, step: 150e3, informative: true, catchUp: 60e3, jitter: 1},
			suffix: simDrafter{call: 8e3, step: 1e3, conf: 0.9}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.bed
			model := func(int, *rand.Rand) []simDrafter { return []simDrafter{b.model} }
			suffix := func(i int, luck *rand.Rand) []simDrafter { return []simDrafter{b.hybridRequest(i, luck)} }
			both := func(i int, luck *rand.Rand) []simDrafter { return []simDrafter{b.model, b.hybridRequest(i, luck)} }
			for seed := range uint64(3) {
				plain := b.run(t, "static", model, requests, n, seed)
				m := b.run(t, "adaptive", model, requests, n, seed)
				s := b.run(t, "adaptive", suffix, requests, n, seed)
				got := b.runOffers(t, "adaptive", both, requests, n, seed, offers)
				better := max(m, s)
				t.Logf("seed %d: hybrid %.2f× plain, model %.2f×, suffix %.2f× (hybrid ÷ better %.3f)", seed, got/plain, m/plain, s/plain, got/better)
				if got < share[tc.name]*better {
					t.Errorf("seed %d: hybrid %.0f tok/s (%.2f× plain), want ≥ %.2f × the better alone (%.0f, %.2f×)", seed, got, got/plain, share[tc.name], better, better/plain)
				}
			}
		})
	}
}
