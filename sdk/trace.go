package sdk

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// TraceRound is one line of a --trace file: one speculative round of one sequence,
// written as a JSON object per line (JSON Lines). `minfer policy replay` reads them back.
//
// Accept has one entry per drafted position: true for the accepted prefix, false from
// the first rejected position on (positions after a rejection are not judged).
type TraceRound struct {
	Seq int `json:"seq"` // sequence (request) number within the run
	// Prompt identifies the request's prompt (a hash of its tokens; "" when unknown):
	// under greedy decoding every sequence of one prompt emits the same tokens whatever
	// its depths, which `minfer policy replay --walk` relies on.
	Prompt   string    `json:"prompt,omitempty"`
	Round    int       `json:"round"`              // 0-based round of the sequence
	Policy   string    `json:"policy,omitempty"`   // depth-policy plugin name
	Depth    int       `json:"depth"`              // the policy's decision for this round
	MinConf  float32   `json:"min_conf"`           // the policy's early-exit cut-off
	KeepCut  bool      `json:"keep_cut,omitempty"` // the token under the cut-off was kept
	MaxDepth int       `json:"max_depth"`          // the bound the engine applied to this round (the max_depth its policy request carried)
	Drafted  int       `json:"drafted"`            // draft tokens produced (≤ Depth)
	Accepted int       `json:"accepted"`           // draft tokens accepted (≤ Drafted)
	Accept   []bool    `json:"accept"`             // per drafted position
	Conf     []float32 `json:"draft_conf"`         // draft top probability per position
	DraftNs  int64     `json:"draft_ns"`           // measured draft phase
	VerifyNs int64     `json:"verify_ns"`          // measured target forward over Drafted+1 rows
	// HostNs is the rest of the round's wall time: the policy, penalty and sampler calls,
	// emitting the tokens, the caches' bookkeeping (0: not recorded, as in traces
	// written before the field existed). The policy is not told it.
	HostNs int64 `json:"host_ns,omitempty"`
	// Drafters is the number of drafters the sequence offered (omitted: one, the draft
	// model), DrafterIndex the one that drafted the round (RoundOutcome.Drafter) and
	// Drafter its name ("model" for the draft model; omitted for a round of depth 0 or
	// a host that does not know the names).
	Drafters     int    `json:"drafters,omitempty"`
	DrafterIndex int    `json:"drafter_index,omitempty"`
	Drafter      string `json:"drafter,omitempty"`
	// Offered is what the drafters offered when the policy decided this round
	// (RoundOutcome.Offered of its policy request; omitted when the host showed none).
	Offered []int `json:"offered,omitempty"`
}

// Outcome is what a DepthPolicy is told about this round afterwards.
func (t *TraceRound) Outcome() RoundOutcome {
	return RoundOutcome{Round: t.Round, Depth: t.Depth, Drafted: t.Drafted, Accepted: t.Accepted,
		DraftConf: t.Conf, DraftNs: t.DraftNs, VerifyNs: t.VerifyNs, MaxDepth: t.MaxDepth,
		Drafter: t.DrafterIndex, Drafters: t.Drafters}
}

// Validate checks the round's internal consistency.
func (t *TraceRound) Validate() error {
	switch {
	case t.Round < 0 || t.Depth < 0 || t.Drafted < 0 || t.Accepted < 0:
		return fmt.Errorf("negative field")
	case t.Drafted > t.Depth && t.Depth > 0 || t.Accepted > t.Drafted:
		return fmt.Errorf("drafted %d, accepted %d, depth %d: want accepted ≤ drafted ≤ depth", t.Drafted, t.Accepted, t.Depth)
	case t.Accept != nil && len(t.Accept) != t.Drafted:
		return fmt.Errorf("accept has %d entries, drafted %d", len(t.Accept), t.Drafted)
	case t.DraftNs < 0 || t.VerifyNs <= 0 || t.HostNs < 0:
		return fmt.Errorf("draft_ns %d, verify_ns %d, host_ns %d: want ≥ 0, > 0 and ≥ 0", t.DraftNs, t.VerifyNs, t.HostNs)
	case t.Drafters < 0 || t.Drafters > MaxDrafters || t.DrafterIndex < 0 || t.DrafterIndex >= max(t.Drafters, 1):
		return fmt.Errorf("drafter_index %d of %d drafters: want 0 ≤ drafter_index < drafters ≤ %d", t.DrafterIndex, t.Drafters, MaxDrafters)
	case t.Offered != nil && len(t.Offered) != t.Drafters:
		return fmt.Errorf("offered has %d entries, drafters %d", len(t.Offered), t.Drafters)
	}
	for i, n := range t.Offered {
		if n < -1 {
			return fmt.Errorf("offered[%d] is %d: want ≥ -1", i, n)
		}
	}
	return nil
}

// NewTraceRound builds the trace line of a finished round from the policy's decision
// and the outcome the policy will be told.
func NewTraceRound(seq int, policy string, d DepthDecision, o RoundOutcome) TraceRound {
	acc := make([]bool, o.Drafted)
	for i := 0; i < o.Accepted && i < len(acc); i++ {
		acc[i] = true
	}
	return TraceRound{Seq: seq, Round: o.Round, Policy: policy, Depth: d.Depth, MinConf: d.MinConf, KeepCut: d.KeepCut,
		MaxDepth: o.MaxDepth, Drafted: o.Drafted, Accepted: o.Accepted, Accept: acc,
		Conf: append(make([]float32, 0, len(o.DraftConf)), o.DraftConf...), DraftNs: o.DraftNs, VerifyNs: o.VerifyNs,
		Drafters: o.Drafters, DrafterIndex: o.Drafter}
}

// ReadTrace reads a JSON-lines trace. Blank lines are skipped; a malformed or
// inconsistent line is an error naming its line number.
func ReadTrace(r io.Reader) ([]TraceRound, error) {
	var out []TraceRound
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var t TraceRound
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&t); err != nil {
			return nil, fmt.Errorf("trace line %d: %w", line, err)
		}
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("trace line %d: %w", line, err)
		}
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	return out, nil
}

// WriteTrace writes rounds as JSON lines.
func WriteTrace(w io.Writer, rounds []TraceRound) error {
	enc := json.NewEncoder(w)
	for i := range rounds {
		if err := enc.Encode(&rounds[i]); err != nil {
			return fmt.Errorf("trace: %w", err)
		}
	}
	return nil
}
