package engine

import (
	"context"
	"strconv"

	"github.com/minfer/minfer/sdk"
)

// Timings of one generation, in milliseconds and tokens per second. The prompt phase
// lasts until the first token is chosen (TTFT); generation is the rest, and GenTPS
// counts the tokens after the first round (which all arrive at TTFT) over its time.
type Timings struct {
	PromptMs  float64 `json:"prompt_ms"`
	PromptTPS float64 `json:"prompt_tokens_per_s"`
	GenMs     float64 `json:"gen_ms"`
	GenTPS    float64 `json:"gen_tokens_per_s"`
	TTFTMs    float64 `json:"ttft_ms"`
}

// DepthStats are the rounds that drafted a given number of tokens.
type DepthStats struct {
	Rounds   int `json:"rounds"`
	Accepted int `json:"accepted"`
}

// SpecMs is where a request's time went.
type SpecMs struct {
	Draft   float64 `json:"draft"`
	Verify  float64 `json:"verify"`
	Plugins float64 `json:"plugins"` // the policy, penalty and sampler calls
	// Drafters is the time in drafter plugin calls (each call and the check of its
	// answer): a part of Draft.
	Drafters float64 `json:"drafters,omitempty"`
	// DraftersPrompt is the time the drafter plugins took to take in the prompt, told
	// them while it was prefilled (a part of the prompt phase, not of any round).
	DraftersPrompt float64 `json:"drafters_prompt,omitempty"`
}

// SpecStats describe the rounds of one request (plain decoding is rounds of depth 0).
type SpecStats struct {
	Policy         string                `json:"policy"`
	Rounds         int                   `json:"rounds"`
	Drafted        int                   `json:"drafted"`
	Accepted       int                   `json:"accepted"`
	Acceptance     float64               `json:"acceptance"` // Accepted / Drafted (0 when nothing was drafted)
	TokensPerRound float64               `json:"tokens_per_round"`
	ByDepth        map[string]DepthStats `json:"by_depth"` // key: tokens drafted in the round
	// ByDrafter are the rounds that drafted (depth > 0) by drafter name ("model" for
	// the draft model, else the drafter plugin's name); absent when none did.
	ByDrafter map[string]DrafterStats `json:"by_drafter,omitempty"`
	Ms        SpecMs                  `json:"ms"`
	emitted   int
}

// DrafterStats are the rounds one drafter was given.
type DrafterStats struct {
	Rounds   int `json:"rounds"`
	Drafted  int `json:"drafted"`
	Accepted int `json:"accepted"`
	// Failed counts the drafter plugin's failed calls (their rounds fell back and
	// count under the drafter that drafted them, if any; a drafter is off for the
	// rest of the request at its first failure, so it is 0 or 1); Off is set when a
	// failure turned it off.
	Failed int  `json:"failed,omitempty"`
	Off    bool `json:"off,omitempty"`
}

// addRound counts a round; drafter is the name of its drafter ("" for a depth-0 round).
func (s *SpecStats) addRound(drafter string, drafted, accepted, emitted int) {
	if drafter != "" {
		if s.ByDrafter == nil {
			s.ByDrafter = map[string]DrafterStats{}
		}
		b := s.ByDrafter[drafter]
		b.Rounds++
		b.Drafted += drafted
		b.Accepted += accepted
		s.ByDrafter[drafter] = b
	}
	s.Rounds++
	s.Drafted += drafted
	s.Accepted += accepted
	s.emitted += emitted
	if s.ByDepth == nil {
		s.ByDepth = map[string]DepthStats{}
	}
	k := strconv.Itoa(drafted)
	d := s.ByDepth[k]
	d.Rounds++
	d.Accepted += accepted
	s.ByDepth[k] = d
	if s.Drafted > 0 {
		s.Acceptance = float64(s.Accepted) / float64(s.Drafted)
	}
	s.TokensPerRound = float64(s.emitted) / float64(s.Rounds)
}

// FixedDepth is a DepthPolicy that always asks for the same depth (--depth N).
type FixedDepth int

var _ sdk.DepthPolicy = FixedDepth(0)

// NextDepth returns the fixed depth; the engine clamps it to MaxDepth.
func (d FixedDepth) NextDepth(context.Context, sdk.RoundOutcome) (sdk.DepthDecision, error) {
	return sdk.DepthDecision{Depth: int(d)}, nil
}
