package builtin

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/minfer/minfer/sdk"
)

// pairCurve is the verify cost in ms by nt of issue 18's pair on the H200 (7B Q4_K_M
// target, 0.5B Q4_K_M draft from `minfer synth ... --seed 3`): specbench's verify ms a
// round at depths 0-8 of the 75b6498 run (docs/PERFORMANCE.md), nt 6 and 8
// interpolated, past 9 its curve (C_T(10) 7.98 … C_T(16) 8.16, C_T(17) 12.73) raised
// by the 0.12 ms a round's verify took over the curve's at nt 1.
var pairCurve = [...]float64{0, 2.60, 3.06, 3.57, 4.31, 5.00, 5.50, 5.99, 6.72, 7.45, 8.10, 8.10, 8.10, 8.15, 8.20, 8.25, 8.28, 12.85}

// pairBed is that pair in simulateBed's terms: a draft step of 0.862 ms, 70 µs more a
// token caught up with (depth 1's 0.93 ms a round), acceptance 0.92 at every position
// (the measured acceptance of depths 1-8, 0.92-0.69, is that of independent positions
// at 0.92 within 0.01-0.04). The draft's confidences were not recorded: informative
// draws them as the trained pair's calibration (trainedCal), uninformative draws every
// token at 0.7-1 whether it is accepted or not, as a bigram backbone that decides both
// models' tokens with a wide margin would.
func pairBed(informative bool) reqBed {
	return reqBed{step: 862e3, verify: func(nt int) float64 { return pairCurve[nt] * 1e6 }, catchUp: 70e3, host: 10e3, bound: 16,
		request: func(luck *rand.Rand) (func() float32, func(float32) float64) {
			if !informative {
				return func() float32 { return float32(0.7 + 0.3*luck.Float64()) }, func(float32) float64 { return 0.92 }
			}
			k := trainedSpread(0.92)
			return func() float32 { return float32(math.Pow(luck.Float64(), k)) }, trainedAccept
		}}
}

// TestAdaptivePairSingleStream: issue 18's single stream (specbench's 8 prompts × 128
// tokens, a new policy each) at the pair's H200 costs; the adaptive policy against the
// best static depth of the same luck (depth 2 here, 1.35× plain; on the H200 1.32×),
// mean over 8 seeds of 16 requests. The H200 run gave auto 0.94 of depth 2 (0.92 and
// 0.93 in the runs before); in simulation the policy before the early exit's cap was
// mended (capDepth) gave 0.89 with uninformative confidences and 0.94 with informative
// ones: rounds drafted as deep as the cap, up to 16, where the cut-off did not end them.
// Issue 18's bar is 0.97; the floors guard what is reached (measured 0.954 and 0.987).
func TestAdaptivePairSingleStream(t *testing.T) {
	for _, tc := range []struct {
		name        string
		informative bool
		floor       float64
	}{{"uninformative confidences", false, 0.95}, {"informative confidences", true, 0.98}} {
		t.Run(tc.name, func(t *testing.T) {
			const seeds = 8
			b := pairBed(tc.informative)
			sum := 0.0
			for seed := uint64(1); seed <= seeds; seed++ {
				_, best := bestStaticBed(t, b, 16, 128, seed)
				r := simulateBed(t, b, func() sdk.DepthPolicy { return mustPolicy(t, "adaptive", `{}`) }, 16, 128, seed)
				sum += r / best
			}
			got := sum / seeds
			t.Logf("adaptive %.3f of the best static depth over %d seeds", got, seeds)
			if got < tc.floor {
				t.Errorf("adaptive %.3f of the best static depth, want ≥ %.2f", got, tc.floor)
			}
		})
	}
}
