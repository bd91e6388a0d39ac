package plugins

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"sync"
	"time"

	"github.com/minfer/minfer/sdk"
)

// Tracer writes --trace files: one sdk.TraceRound JSON line per speculative round, of
// every sequence whose policy it wraps. Safe for concurrent use.
type Tracer struct {
	mu   sync.Mutex
	enc  *json.Encoder
	next int // next sequence number
	err  error
}

// NewTracer writes to w (the caller closes w after the last sequence ends).
func NewTracer(w io.Writer) *Tracer { return &Tracer{enc: json.NewEncoder(w)} }

// Err returns the first write error (tracing stops at it; decoding goes on).
func (t *Tracer) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

func (t *Tracer) write(r *sdk.TraceRound) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = t.enc.Encode(r)
	}
}

// Wrap returns a DepthPolicy that asks p and records each round under a new sequence
// number and the policy name. A round is recorded when the engine reports its outcome,
// that is at the next NextDepth call or at Finish; the returned value also implements
// io.Closer, closing p.
func (t *Tracer) Wrap(p sdk.DepthPolicy, name string) *TracedPolicy {
	t.mu.Lock()
	seq := t.next
	t.next++
	t.mu.Unlock()
	return &TracedPolicy{t: t, p: p, seq: seq, name: name}
}

// TracedPolicy is a policy whose rounds a Tracer records.
type TracedPolicy struct {
	t       *Tracer
	p       sdk.DepthPolicy
	seq     int
	name    string
	prompt  string
	drafter []string // the sequence's drafters by index (SetDrafters)
	pending bool
	dec     sdk.DepthDecision
	// bound is the pending round's max_depth: the outcome the engine reports later
	// carries the next round's bound, and the trace records the round's own.
	bound int
	// offered is what the drafters offered when the pending round was decided
	offered []int
	// asked is when the wrapped policy was asked for the pending round's depth: the
	// round's wall time runs from there to the next NextDepth or Finish (the tracer's
	// own writing happens before it, so it is not counted).
	asked time.Time
}

// SetPrompt records the request's prompt tokens (as PromptKey) on each round.
func (tp *TracedPolicy) SetPrompt(ids []int32) { tp.prompt = PromptKey(ids) }

// SetDrafters records the names of the sequence's drafters (the engine calls it before
// the first round), so that each round names its drafter.
func (tp *TracedPolicy) SetDrafters(names []string) { tp.drafter = append([]string(nil), names...) }

// PromptKey is a short hash of prompt tokens, the trace's Prompt field.
func PromptKey(ids []int32) string {
	h := fnv.New64a()
	var b [4]byte
	for _, id := range ids {
		binary.LittleEndian.PutUint32(b[:], uint32(id))
		h.Write(b[:])
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

var _ sdk.DepthPolicy = (*TracedPolicy)(nil)

// NextDepth records the outcome of the previous round and asks the wrapped policy.
func (tp *TracedPolicy) NextDepth(ctx context.Context, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	tp.Finish(last)
	asked := time.Now()
	d, err := tp.p.NextDepth(ctx, last)
	if err != nil {
		return d, err
	}
	tp.dec, tp.pending, tp.asked, tp.bound = d, true, asked, last.MaxDepth
	tp.offered = append(tp.offered[:0], last.Offered...)
	return d, nil
}

// Finish records the outcome of the last round of the sequence (the engine tells a
// policy about a round only before the next one). Outcomes with Round < 0 are ignored.
func (tp *TracedPolicy) Finish(last sdk.RoundOutcome) {
	if !tp.pending || last.Round < 0 || last.VerifyNs <= 0 {
		return
	}
	wall := time.Since(tp.asked).Nanoseconds()
	tp.pending = false
	r := sdk.NewTraceRound(tp.seq, tp.name, tp.dec, last)
	r.MaxDepth = tp.bound
	if len(tp.offered) > 0 {
		r.Offered = append([]int(nil), tp.offered...)
	}
	r.Prompt = tp.prompt
	r.HostNs = max(wall-last.DraftNs-last.VerifyNs, 0)
	if last.Drafters <= 1 {
		r.Drafters = 0 // one drafter: the trace reads as before drafters
	}
	if last.Depth > 0 && last.Drafter >= 0 && last.Drafter < len(tp.drafter) {
		r.Drafter = tp.drafter[last.Drafter]
	}
	tp.t.write(&r)
}

// Close closes the wrapped policy (if it is an io.Closer).
func (tp *TracedPolicy) Close() error { return errors.Join(Release(tp.p)) }

// ReadTraceFile reads the JSON-lines trace (sdk.ReadTrace) in the file at path; errors
// name the file. (Here, not in sdk: sdk is linked into every plugin, which has no
// files to read.)
func ReadTraceFile(path string) ([]sdk.TraceRound, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rounds, err := sdk.ReadTrace(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rounds, nil
}
