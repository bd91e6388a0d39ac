// Package sdk is minfer's public plugin contract: the round types and the three role
// interfaces (DepthPolicy, Penalty, Sampler) that the engine calls once per speculative
// round. It imports only the standard library. ABI.md in this folder describes the same
// contract as bytes for WebAssembly plugins; sdk/guest implements it for Go guests and
// plugins/wasm for the host.
//
// A round: the DepthPolicy picks the depth d (0 = plain decoding); the draft proposes d
// tokens; the target scores nt = d+1 rows; the Penalty adjusts each row's logits for
// the tokens in its history window; the Sampler accepts a prefix of the draft and emits
// one more token.
//
// Every method takes a context first: plugins must honour its deadline. Implementations
// are called by one goroutine at a time per instance (one instance per sequence).
package sdk

import "context"

// Role names a plugin role.
type Role string

const (
	RolePolicy  Role = "policy"
	RolePenalty Role = "penalty"
	RoleSampler Role = "sampler"
)

// RoundOutcome is what a DepthPolicy learns about the round just finished.
type RoundOutcome struct {
	Round    int // 0-based index of the finished round in this request; -1 before the first
	Depth    int // d chosen for it (0 = plain decode)
	Drafted  int // draft tokens actually produced (≤ Depth: an early exit stops sooner)
	Accepted int // draft tokens the sampler accepted (≤ Drafted)
	// DraftConf[i] is the draft model's top probability at draft position i (len Drafted).
	DraftConf []float32
	// DraftNs is the measured time of the whole draft phase, VerifyNs that of the target
	// forward over Drafted+1 rows, in nanoseconds.
	DraftNs  int64
	VerifyNs int64
	// MaxDepth is the largest depth the engine will honour now (the backend's identity
	// bound, --draft-max and the remaining token budget).
	MaxDepth int
}

// DepthDecision is a DepthPolicy's answer.
type DepthDecision struct {
	Depth int // clamped by the engine to [0, MaxDepth]
	// MinConf stops drafting early when the draft's top probability at a position falls
	// below it (llama.cpp's p_min); 0 disables early exit.
	MinConf float32
	// KeepCut keeps the token whose probability fell below MinConf as the round's last
	// draft (it is verified) instead of dropping it. The draft step that produced it is
	// paid either way, so keeping it pays where one more verify row costs less than the
	// chance of one more accepted token is worth: on a memory-bound GPU target, not on a
	// compute-bound CPU one.
	KeepCut bool
}

// DepthPolicy chooses the depth of each round.
type DepthPolicy interface {
	// NextDepth is called before every round with the previous round's outcome (Round
	// == -1 and zero fields before the first round of a request).
	NextDepth(ctx context.Context, last RoundOutcome) (DepthDecision, error)
}

// PenaltyRow is one verify row's view for a Penalty: the history window (tokens before
// this row, oldest first: prompt/accepted tokens, then the drafted tokens before the
// row) and, for each distinct token of the window in first-seen order, its logit.
type PenaltyRow struct {
	History []int32
	IDs     []int32   // distinct tokens of History, first-seen order
	Logits  []float32 // Logits[i] is the row's logit of IDs[i]; the Penalty rewrites them
}

// Penalty adjusts logits of recently seen tokens (repeat/presence/frequency penalties).
type Penalty interface {
	// Window is the number of most recent tokens the penalty looks at (0 = none: the
	// engine then skips the call).
	Window() int
	// Apply rewrites rows[i].Logits in place.
	Apply(ctx context.Context, rows []PenaltyRow) error
}

// Needs says what a Sampler must see of each row.
type Needs struct {
	// TopK is the number of best candidates per row the host computes (on the device);
	// 1 = argmax only; 0 = the full row.
	TopK int
}

// SampleRow is one verify row's candidates after penalties, best first (ties: lower id
// first). With Needs.TopK == 0 IDs is every token id in order and Logits the full row.
type SampleRow struct {
	IDs    []int32
	Logits []float32
	// DraftLogit is the row's logit of the draft token that follows it (row i < d is
	// followed by Draft[i]); it is set even when that token is not among the candidates.
	DraftLogit float32
	// MaxLogit is the row's largest logit and LogSumExp log Σ exp(logit) over the
	// whole row (at temperature 1), so a sampler can normalise without the full row.
	MaxLogit  float32
	LogSumExp float32
}

// SampleRound is a whole verify round for a Sampler: d = len(Draft) draft tokens and
// d+1 rows (row i scores the token after Draft[:i]).
type SampleRound struct {
	Rows  []SampleRow
	Draft []int32
	// Seed and Step make sampling reproducible: a sampler draws its random numbers from
	// a generator seeded by (Seed, Step), Step being the number of tokens emitted so far.
	Seed uint64
	Step uint64
}

// SampleResult: the sampler accepted Draft[:Accepted] and emits Next after them.
type SampleResult struct {
	Accepted int
	Next     int32
}

// Sampler accepts a prefix of the draft and picks the next token.
type Sampler interface {
	Needs() Needs
	Sample(ctx context.Context, r *SampleRound) (SampleResult, error)
}
