// Package sdk is minfer's public plugin contract: the round types and the four role
// interfaces (DepthPolicy, Drafter, Penalty, Sampler) that the engine calls once per
// speculative round. It imports only the standard library. ABI.md in this folder describes the same
// contract as bytes for WebAssembly plugins; sdk/guest implements it for Go guests and
// plugins/wasm for the host.
//
// A round: the DepthPolicy picks the depth d (0 = plain decoding) and the drafter; the
// drafter (the draft model, or a Drafter plugin) proposes up to d tokens; the target scores nt = d+1 rows; the Penalty adjusts each row's logits for
// the tokens in its history window; the Sampler accepts a prefix of the draft and emits
// one more token.
//
// Every method takes a context first: plugins must honour its deadline. Implementations
// are called by one goroutine at a time per instance (one instance per sequence).
package sdk

import (
	"context"
	"fmt"
)

// Role names a plugin role.
type Role string

const (
	RolePolicy  Role = "policy"
	RolePenalty Role = "penalty"
	RoleSampler Role = "sampler"
	RoleDrafter Role = "drafter"
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
	// Drafter is the index of the drafter that drafted the finished round, among the
	// Drafters the sequence offers (0 when only one is, or before the first round).
	// Drafters counts them: the draft model first when there is one, then the plugin
	// drafters in the configured order ([spec] drafter); 0 when none can draft.
	Drafter, Drafters int
	// BatchSeqs and BatchRows are the sequences and rows the finished round's verify
	// forward served (VerifyNs is that whole forward's time): 1 and Drafted+1 when the
	// sequence ran alone, more when continuous batching ran other sequences' rows in
	// the same forward. 0 when the host does not say (a host before ABI v1.3, or
	// before the first round).
	BatchSeqs, BatchRows int
	// Offered says, per drafter (len Drafters, in the same order), how many tokens it
	// proposes for the round being decided: the host asked every drafter plugin
	// before this call (ABI v1.4, when the sequence offers several drafters and
	// [spec] drafter_offers is on), and the round given to one of them drafts that
	// proposal, cut to the decided depth and min_conf. 0: the drafter has nothing to
	// propose (the round would be a plain one), −1: not asked (the draft model, whose
	// proposal costs its steps, or a drafter plugin that failed). nil when the host
	// asked none (a host before v1.4, one drafter, or offers off).
	Offered []int
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
	// Drafter is the index of the drafter (see RoundOutcome.Drafters) that drafts the
	// round; it must be below Drafters (0 always is, when Depth > 0).
	Drafter int
}

// DepthPolicy chooses the depth of each round.
type DepthPolicy interface {
	// NextDepth is called before every round with the previous round's outcome (Round
	// == -1 and zero fields before the first round of a request).
	NextDepth(ctx context.Context, last RoundOutcome) (DepthDecision, error)
}

// DraftRequest is one round's call of a Drafter.
type DraftRequest struct {
	// Appended are the tokens appended to the sequence since the drafter's last call,
	// oldest first: the whole prompt on the first call of a sequence, then the tokens
	// emitted since (the accepted prefix of its last proposal and the token after it,
	// or what other drafters' and plain rounds emitted). The host keeps no copy of the
	// history for the drafter: a drafter keeps what it needs itself. The slice is
	// valid only during the call.
	Appended []int32
	// MaxDepth is the most draft tokens the round takes (≥ 1).
	MaxDepth int
	// Vocab is the target's vocabulary size: every proposed id must be below it.
	Vocab int
}

// DraftResult is a Drafter's proposal: up to MaxDepth tokens continuing the sequence,
// and for each a confidence in [0, 1] (the drafter's estimate that the target agrees;
// the policy's min_conf cut-off applies to it as to a draft model's probability). No
// tokens means the drafter has nothing to propose: the round is a plain one.
type DraftResult struct {
	Tokens []int32
	Conf   []float32 // len(Tokens)
}

// Drafter proposes draft tokens from the sequence itself (n-gram lookup, suffix
// structures, anything a plugin computes), in place of a draft model.
type Drafter interface {
	// Draft is called once per round that the policy gives to this drafter (or, where
	// the host shows the policy the drafters' offers, RoundOutcome.Offered, once every
	// round before the policy decides, the proposal used only if the round goes to
	// this drafter), and once
	// before the first round, while the prompt is prefilled, to tell it the prompt
	// (MaxDepth 1; minfer does not use that call's answer, so that no round's draft
	// time carries the prompt's). The
	// returned slices may be reused by the drafter after the next call. A call that
	// fails (an error, or an answer CheckDraft refuses) proposes nothing and ends the
	// drafter's use for the sequence, whatever its host: the engine does not call it
	// again (so no drafter has to undo what it took in of a failed call's tokens).
	Draft(ctx context.Context, req *DraftRequest) (DraftResult, error)
}

// CheckDraft validates a drafter's answer against its request: at most MaxDepth
// tokens, one confidence per token, every id in [0, Vocab), every confidence in
// [0, 1] (NaN is not). Hosts call it on every answer, native or not.
func CheckDraft(req *DraftRequest, res DraftResult) error {
	if len(res.Tokens) > req.MaxDepth {
		return fmt.Errorf("%d draft tokens, at most %d were asked for", len(res.Tokens), req.MaxDepth)
	}
	if len(res.Conf) != len(res.Tokens) {
		return fmt.Errorf("%d confidences for %d draft tokens", len(res.Conf), len(res.Tokens))
	}
	for i, t := range res.Tokens {
		if t < 0 || int(t) >= req.Vocab {
			return fmt.Errorf("draft token %d is %d, outside the vocabulary [0, %d)", i, t, req.Vocab)
		}
		if c := res.Conf[i]; !(c >= 0 && c <= 1) {
			return fmt.Errorf("draft token %d has confidence %v, want a value in [0, 1]", i, c)
		}
	}
	return nil
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
// first; NaN after every number: RanksBefore). With Needs.TopK == 0 IDs is every token
// id in order and Logits the full row.
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
