// Package engine runs generation requests on loaded models: prefill (chunked by the
// batch size), the speculative round loop (plain decoding is a round of depth 0), stop
// rules, streaming text, timings and per-request statistics.
//
// Every policy decision goes through the sdk interfaces: the DepthPolicy picks each
// round's depth, the Penalty adjusts the logits of recently seen tokens, the Sampler
// accepts a prefix of the draft and picks the next token. The engine itself never
// samples.
//
// A Session is one sequence (one KV cache per model) used by one goroutine at a time.
// Consecutive requests on a Session reuse the cached prefix they share (chat turns).
package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/sdk"
)

// Config describes a Session.
type Config struct {
	Target *model.Model
	// Draft, if non-nil, proposes tokens for speculative rounds. It must share the
	// target's vocabulary (see CheckVocab).
	Draft *model.Model
	Vocab Vocab
	// Ctx is the context length of both caches (0: the target's training context).
	Ctx    int
	KVType backend.KVType
	// DraftKVType is the draft cache's element type (minfer.toml's [draft] kv).
	DraftKVType backend.KVType
	// Batch is the most tokens a prefill forward takes at once (default 512).
	Batch int
	// DraftMax bounds the depth of a round (default 16); the backend's identity bound
	// (Caps.IdentityRows) lowers it further.
	DraftMax int
	// Batching, when set, batches this session's forwards with those of the other
	// sessions given the same Batching (continuous batching; see batch.go).
	Batching *Batching
	// Pool, when set, makes the session's caches take their memory from a pool of
	// fixed-size blocks shared with other sessions (a server's slots; see pool.go):
	// nothing is allocated up front, and the caches grow as the sequence does. A
	// backend that captures graphs (CUDA) cannot page: its caches stay whole contexts
	// allocated at start, and Pool is ignored.
	Pool *kv.Pool
	// Paging, when set with Pool (NewPaging for the pool's sessions), makes the caches
	// paged views of shared arenas and shares prompt prefixes between the sessions
	// (see paging.go).
	Paging *Paging
	// MaxBatchRows, when > 0, bounds the verify rows of a step over the sequences
	// generating together on the target ([spec] max_batch_rows): while n generate
	// (n = 1 without Batching), a round's depth is at most MaxBatchRows/n − 1.
	MaxBatchRows int
	// DrafterOffers, with several drafters, asks every drafter plugin for its proposal
	// before the depth policy decides a round and tells the policy what each offers
	// (sdk.RoundOutcome.Offered; [spec] drafter_offers; see offers.go).
	DrafterOffers bool
}

// Request is one generation.
type Request struct {
	Prompt []int32 // at least one token
	// NPredict is the most tokens to generate; < 0 means until EOG or a full context.
	NPredict int
	Stop     []string // stop strings: the text ends just before the first one
	// IgnoreEOG keeps generating through end-of-generation tokens (llama-server's and
	// vLLM's ignore_eos, for benchmarks that want every request to produce NPredict
	// tokens): an EOG is then an ordinary token, kept in Result.Tokens, and only the
	// budget, a stop string or the context ends the generation.
	IgnoreEOG bool
	Sampler   sdk.Sampler
	Penalty   sdk.Penalty     // nil: no penalty
	Policy    sdk.DepthPolicy // nil: depth 0 (plain decoding)
	// DraftMax, if non-nil, lowers the session's depth bound for this request (a
	// server request's draft_max); the policy sees it as RoundOutcome.MaxDepth.
	DraftMax *int
	// PolicyName is reported in the stats.
	PolicyName string
	// Drafters are the plugin drafters a round may draft with besides the session's
	// draft model. The policy names a round's drafter by index (DepthDecision.Drafter):
	// the draft model is drafter 0 when the session has one, then Drafters in order.
	// With Drafters a request runs speculative rounds without a draft model.
	Drafters []Drafter
	// NoDraftModel keeps the session's draft model out of this request's drafters
	// (specbench's rows of one drafter plugin on a session that has a draft model).
	NoDraftModel bool
	// OnDrafterFailure, if set, is told the failure of a drafter plugin in the request
	// (an error, a trap, a timeout or a hostile answer, named), so that it is logged; it
	// is counted in Result.Spec.ByDrafter. A failure never fails the request: the
	// failed call proposes nothing, its round falls back to the draft model when the
	// request has one, else to plain decoding (the output is the same either way), and
	// the drafter is off for the rest of the request, whatever its host (see gen.draft).
	OnDrafterFailure func(name string, err error)
	Seed             uint64
	// TopLogits > 0 reports the K best raw logits of the last prompt position.
	TopLogits int
	// OnText receives the text as it becomes final; an error from it ends the request.
	OnText func(string) error
}

// Drafter is a drafter plugin of a request and the name its rounds are reported under
// (stats, traces).
type Drafter struct {
	Name string
	sdk.Drafter
}

// ModelDrafter is the name the draft model's rounds are reported under.
const ModelDrafter = "model"

// TopLogit is one candidate of Result.TopLogits.
type TopLogit struct {
	ID    int32   `json:"id"`
	Logit float32 `json:"logit"`
}

// Result is what a request produced.
type Result struct {
	PromptTokens int
	// CachedTokens are the prompt tokens whose cache entries the session kept from its
	// previous sequence instead of computing them (the shared prefix; none once a KV
	// pool took the session's blocks back): what the request actually reused.
	CachedTokens int
	Tokens       []int32 // generated tokens (an ending EOG is not included)
	Text         string
	Stop         StopReason
	TopLogits    []TopLogit
	Timings      Timings
	Spec         SpecStats
}

// lm is a model with its cache, seen through host-side logits or through the rows'
// statistics (fakes implement it in tests).
type lm interface {
	// forward runs ids at the next positions, returning the logits of every row (all)
	// or of the last one, row-major, valid until the next call.
	forward(ids []int32, all bool) ([]float32, error)
	// fill runs ids at the next positions for their cache entries only (a prompt
	// chunk whose logits nobody reads): in a batch, its rows cost no classifier work.
	fill(ids []int32) error
	// hasStats reports whether forwardStats is available.
	hasStats() bool
	// forwardStats runs ids like forward but returns, instead of the rows, their
	// statistics computed where the logits live (model.RowStats: the k best, max,
	// log-sum-exp and the logit of column pick[r]; pick nil: none), valid until the
	// next call.
	forwardStats(ids []int32, all bool, k int, pick []int32) (*model.RowStats, error)
	len() int
	truncate(n int) error
	ctx() int
	vocab() int
	// served is the number of sequences and rows the last forward served: 1 and its
	// own rows when it ran alone, more when a batcher ran it with others'.
	served() (seqs, rows int)
}

// seq is a real model and its KV cache.
type seq struct {
	m *model.Model
	// c is the cache; with a pool (pool.go) it holds room for c.Ctx() ≤ logical
	// positions, and nil means no storage yet (or the pool took it back)
	c       *kv.Cache
	logical int // the context length the sequence may reach (ctx)
	kt      backend.KVType
	b       *batcher // nil: forwards run alone
	host    []float32
	st      model.RowStats
	chain   model.Chain // the draft's last chain (draftChain)
	// seqs, rows: what the last forward served (lm.served)
	seqs, rows int
	// pledged: the next forward is one the batcher's steps wait for, and settles that
	// (a speculative round's verify: see batcher.expect); drafting: every forward is
	// such a one, until endDraft (a draft phase's); owing: the last round drafted, so
	// the next likely will (owe)
	pledged, drafting, owing bool
}

// owe counts the sequence among those the draft model's steps wait a little for (the
// batcher's coming sessions): its round is to draft with the model, or its last round
// did, so its next likely will; its first draft step then batches with the others'
// (lockstep) instead of running alone just before or after theirs. The next draft
// phase, a round that does not draft with the model, or the request's end settles it
// (settle).
func (s *seq) owe() {
	if s.b != nil && !s.owing {
		s.owing = true
		s.b.comes()
	}
}

func (s *seq) settle() {
	if s.owing {
		s.owing = false
		s.b.came()
	}
}

// pledge makes the next forward (a speculative round's verify) one that the batcher's
// steps wait for, from now (see batcher.expect); unpledge takes that back if the
// forward was not sent (the round failed before its verify).
func (s *seq) pledge() {
	if s.b != nil && !s.pledged {
		s.pledged = true
		s.b.expect()
	}
}

func (s *seq) unpledge() {
	if s.pledged {
		s.pledged = false
		s.b.unexpect()
	}
}

// startDraft and endDraft bracket a draft phase: the batcher's steps wait for every
// forward of the sequence in between (see batcher.expect), so that the draft steps of
// the sequences drafting together batch.
func (s *seq) startDraft() {
	s.settle()
	if s.b != nil && !s.drafting {
		s.drafting = true
		s.b.expect()
	}
}

func (s *seq) endDraft() {
	if s.drafting {
		s.drafting = false
		s.b.unexpect()
	}
}

func (s *seq) forward(ids []int32, all bool) ([]float32, error) {
	err := s.run(ids, outOf(all), func(l model.Logits) error {
		n := l.Rows * l.Cols
		if cap(s.host) < n {
			s.host = make([]float32, n)
		}
		s.host = s.host[:n]
		return s.m.ReadLogits(l, s.host)
	})
	if err != nil {
		return nil, err
	}
	return s.host, nil
}

func (s *seq) fill(ids []int32) error { return s.run(ids, model.OutNone, nil) }

// outOf is the rows a forward of all (every row) or not (the last) asks for.
func outOf(all bool) model.Out {
	if all {
		return model.OutAll
	}
	return model.OutLast
}

func (s *seq) hasStats() bool { return s.m.HasRowStats() }

func (s *seq) forwardStats(ids []int32, all bool, k int, pick []int32) (*model.RowStats, error) {
	read := func(l model.Logits) error { return s.m.RowStats(l, k, pick, &s.st) }
	if err := s.runJob(ids, outOf(all), read, &statsReq{k: k, pick: pick, st: &s.st}); err != nil {
		return nil, err
	}
	return &s.st, nil
}

// run enqueues a forward of ids (holding the backend's lock) and reads the rows out asks
// for with read (nil for model.OutNone): one wait for both. When the read fails, the
// cache goes back to its length before the forward.
func (s *seq) run(ids []int32, out model.Out, read func(model.Logits) error) error {
	return s.runJob(ids, out, read, nil)
}

// runJob is run, where a batched forward may compute the read's row statistics for
// several sequences at once when stats says what read computes (nil: it does more).
func (s *seq) runJob(ids []int32, out model.Out, read func(model.Logits) error, stats *statsReq) error {
	s.seqs, s.rows = 1, len(ids)
	if s.c == nil {
		return errors.New("BUG: engine: forward on a pooled cache before its blocks were taken")
	}
	if s.b != nil {
		j := &job{c: s.c, ids: ids, out: out, read: read, stats: stats, due: s.drafting, settles: s.pledged}
		s.pledged = false
		err := s.b.do(j)
		s.seqs, s.rows = max(j.seqs, 1), max(j.rows, len(ids))
		return err
	}
	mu := backendLock(s.m.Backend())
	mu.Lock()
	defer mu.Unlock()
	return forwardRead(s.m, s.c, ids, out, read)
}

// forwardRead enqueues a forward of ids on c and reads the rows out asks for with read
// (one wait for both; model.OutNone: no read, the forward is waited for); when the read
// fails, c goes back to its length before the forward. The caller holds the backend's
// lock.
func forwardRead(m *model.Model, c *kv.Cache, ids []int32, out model.Out, read func(model.Logits) error) error {
	if out == model.OutNone {
		_, err := m.Forward(ids, c, false)
		return err
	}
	pos0 := c.Len()
	l, err := m.ForwardNoWait(ids, c, out == model.OutAll)
	if err != nil {
		return err
	}
	if err := read(l); err != nil {
		return errors.Join(err, c.Truncate(pos0))
	}
	return nil
}

func (s *seq) len() int {
	if s.c == nil {
		return 0
	}
	return s.c.Len()
}

func (s *seq) truncate(n int) error {
	if s.c == nil {
		if n == 0 {
			return nil
		}
		return fmt.Errorf("kv: truncate to %d outside [0, 0]", n)
	}
	return s.c.Truncate(n)
}

func (s *seq) ctx() int           { return s.logical }
func (s *seq) vocab() int         { return s.m.Params.Vocab }
func (s *seq) served() (int, int) { return s.seqs, s.rows }

// Session is one sequence on a target (and optional draft) model.
type Session struct {
	target, draft lm
	vocab         Vocab
	batch         int
	draftMax      int
	maxBatchRows  int
	offers        bool    // Config.DrafterOffers
	hist          []int32 // tokens in the sequence; the target cache holds all but the last
	// pool is Config.Pool when the caches page (pool.go); blocks is how many of its
	// blocks whole caches hold (paged caches reserve theirs in the arenas)
	pool   *kv.Pool
	blocks int
	// paging is Config.Paging with a pool: the caches are paged (paging.go)
	paging *Paging
	// reclaims counts the pool taking the caches back (ReleaseLocked runs on another
	// request's goroutine, so it is atomic)
	reclaims atomic.Uint64
	want     int // positions the request starts with room for (prefill reserves them)
	// warmed[n] marks the forward sizes warm ran (nil when the backend captures no
	// graphs): draft catch-ups are split into them.
	warmed map[int]bool
}

// ErrContextFull is wrapped by every error of a request that does not fit its context
// (a prompt too long, or a cache that filled up): callers tell it apart with
// errors.Is. It is kv.ErrFull, named here so that callers of the engine need not
// import core/kv.
var ErrContextFull = kv.ErrFull

// warmShapes are the forward sizes warm runs beyond 1…draftMax+1: longer draft
// catch-ups (after plain rounds) are split into them.
var warmShapes = []int{16, 32, 64}

// warmedBelow is the largest warmed size ≤ n (1 is always warmed).
func (s *Session) warmedBelow(n int) int {
	best := 1
	for k := range s.warmed {
		if k <= n && k > best {
			best = k
		}
	}
	return best
}

// NewSession allocates the caches of cfg's models.
func NewSession(cfg Config) (*Session, error) {
	if cfg.Target == nil || cfg.Vocab == nil {
		return nil, errors.New("engine: a session needs a target model and a vocabulary")
	}
	s := &Session{vocab: cfg.Vocab, batch: cfg.Batch, draftMax: cfg.DraftMax, maxBatchRows: cfg.MaxBatchRows, offers: cfg.DrafterOffers}
	ctxN := cfg.Ctx
	if ctxN <= 0 {
		ctxN = cfg.Target.Params.CtxTrain
	}
	if cfg.Pool != nil && !cfg.Target.CapturesGraphs() && (cfg.Draft == nil || !cfg.Draft.CapturesGraphs()) {
		s.pool = cfg.Pool
		if p := cfg.Paging; p != nil && p.target != nil && (cfg.Draft == nil) == (p.draft == nil) {
			s.paging = p
		}
	}
	var tc *kv.Cache
	if s.pool == nil {
		var err error
		if tc, err = cfg.Target.NewKV(ctxN, cfg.KVType); err != nil {
			return nil, err
		}
	} else if err := kv.CheckSpec(cfg.Target.KVSpec(ctxN, cfg.KVType)); err != nil {
		return nil, err
	}
	s.target = &seq{m: cfg.Target, c: tc, logical: ctxN, kt: cfg.KVType}
	if cfg.Batching != nil {
		s.target.(*seq).b = cfg.Batching.batcher(cfg.Target)
	}
	if cfg.Draft != nil {
		if cfg.Draft.Params.Vocab > cfg.Target.Params.Vocab {
			s.Close()
			return nil, fmt.Errorf("engine: draft vocabulary (%d) larger than the target's (%d)", cfg.Draft.Params.Vocab, cfg.Target.Params.Vocab)
		}
		var dc *kv.Cache
		if s.pool == nil {
			var err error
			if dc, err = cfg.Draft.NewKV(ctxN, cfg.DraftKVType); err != nil {
				s.Close()
				return nil, err
			}
		} else if err := kv.CheckSpec(cfg.Draft.KVSpec(ctxN, cfg.DraftKVType)); err != nil {
			s.Close()
			return nil, err
		}
		s.draft = &seq{m: cfg.Draft, c: dc, logical: ctxN, kt: cfg.DraftKVType}
		if cfg.Batching != nil {
			s.draft.(*seq).b = cfg.Batching.draftBatcher(cfg.Draft)
		}
	}
	if id := cfg.Target.Backend().Caps().IdentityRows; id > 0 && (s.draftMax <= 0 || s.draftMax > id-1) {
		s.draftMax = id - 1
	}
	s.setDefaults()
	if s.draft != nil && (cfg.Target.CapturesGraphs() || cfg.Draft.CapturesGraphs()) {
		if err := s.warm(); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// warm runs, once, every forward shape a speculative round can use — the target's
// verify of 1…draftMax+1 rows and the draft's catch-up of as many tokens, and of 16, 32
// and 64 (longer catch-ups are split into these) — so that a
// backend that captures a graph per shape does it now, not in the middle of a
// generation (a capture costs about as much as five verify forwards of a small model,
// and the depth policy would take it for the depth's cost).
func (s *Session) warm() error {
	s.warmed = map[int]bool{}
	ids := make([]int32, min(max(s.draftMax+1, warmShapes[len(warmShapes)-1]), s.target.ctx()))
	for nt := 1; nt <= len(ids); nt++ {
		verify := nt <= s.draftMax+1
		if !verify && !slices.Contains(warmShapes, nt) {
			continue
		}
		if verify {
			if _, err := s.target.forward(ids[:nt], true); err != nil {
				return fmt.Errorf("engine: warm-up: %w", err)
			}
		}
		if _, err := s.draft.forward(ids[:nt], false); err != nil {
			return fmt.Errorf("engine: warm-up: %w", err)
		}
		s.warmed[nt] = true
		if err := errors.Join(s.target.truncate(0), s.draft.truncate(0)); err != nil {
			return err
		}
	}
	return nil
}

func (s *Session) setDefaults() {
	if s.batch <= 0 {
		s.batch = 512
	}
	if s.draftMax <= 0 {
		s.draftMax = 16
	}
}

// Ctx is the context length of the session's caches.
func (s *Session) Ctx() int { return s.target.ctx() }

// HasDraft reports whether the session has a draft model (a request's drafter plugins
// can draft without one).
func (s *Session) HasDraft() bool { return s.draft != nil }

// drafterNames are the names of the drafters req offers on s, in index order.
func (s *Session) drafterNames(req *Request) []string {
	var names []string
	if s.draft != nil && !req.NoDraftModel {
		names = append(names, ModelDrafter)
	}
	for _, d := range req.Drafters {
		names = append(names, d.Name)
	}
	return names
}

// Close frees the caches (and gives a pool its blocks back).
func (s *Session) Close() {
	if s.paging != nil {
		s.paging.forget(s)
	}
	if s.pool != nil {
		s.pool.Busy(s)
		s.pool.Give(s.freeCaches())
		return
	}
	s.freeCaches()
}

// Reset forgets the cached sequence.
func (s *Session) Reset() error {
	if s.paging != nil {
		s.paging.withdraw(s)
	}
	s.hist = s.hist[:0]
	if err := s.target.truncate(0); err != nil {
		return err
	}
	if s.draft != nil {
		return s.draft.truncate(0)
	}
	return nil
}

// Generate runs one request. The prompt's prefix shared with the session's previous
// sequence is not recomputed. The returned Result is complete also when err is a
// context cancellation or an OnText error (it then holds what was produced so far).
func (s *Session) Generate(ctx context.Context, req Request) (*Result, error) {
	if len(req.Prompt) == 0 {
		return nil, errors.New("engine: empty prompt (at least one token is needed)")
	}
	if req.Sampler == nil {
		return nil, errors.New("engine: no sampler")
	}
	if n := len(req.Prompt); n > s.Ctx() {
		return nil, fmt.Errorf("engine: prompt of %d tokens does not fit the context of %d (%w)", n, s.Ctx(), kv.ErrFull)
	}
	for _, id := range req.Prompt {
		if id < 0 || int(id) >= s.target.vocab() {
			return nil, fmt.Errorf("engine: prompt token %d outside the vocabulary [0, %d)", id, s.target.vocab())
		}
	}
	// A policy that wants the request's prompt implements SetPrompt — the --trace
	// recorder does, so that every host's traces name their prompts (policy replay
	// --walk pools the rounds of one prompt).
	if sp, ok := req.Policy.(interface{ SetPrompt([]int32) }); ok {
		sp.SetPrompt(req.Prompt)
	}
	// Likewise a policy that wants the drafters' names (index order) implements
	// SetDrafters: the tracer records each round's drafter by name.
	if sd, ok := req.Policy.(interface{ SetDrafters([]string) }); ok {
		sd.SetDrafters(s.drafterNames(&req))
	}
	for i, d := range req.Drafters {
		if d.Drafter == nil {
			return nil, fmt.Errorf("engine: drafter %d (%q) is nil", i, d.Name)
		}
	}
	if s.pool != nil {
		s.pool.Busy(s) // its blocks are its own again (or the pool took them: hist is empty)
		defer func() {
			s.unreserve() // what it did not write is the others' again
			s.pool.Idle(s)
		}()
		n := len(req.Prompt) + s.draftMax + 1
		if req.NPredict > 0 {
			n += req.NPredict
		}
		s.want = min(n, s.Ctx()) // taken by prefill, once the shared prefix is known
	}
	// The target's steps wait a little for every generating session; the draft's only
	// for the sessions drafting (gen.draftTokens), so a parked session costs the others'
	// draft steps nothing.
	if sq, ok := s.target.(*seq); ok && sq.b != nil {
		sq.b.enter()
		defer sq.b.leave()
	}
	if sq, ok := s.draft.(*seq); ok {
		defer sq.settle()
	}
	g := &gen{s: s, req: req, start: time.Now(), res: &Result{PromptTokens: len(req.Prompt)}}
	g.res.Spec.Policy = req.PolicyName
	g.emit = emitter{vocab: s.vocab, stream: s.vocab.NewStream(), stops: req.Stop, onText: req.OnText, ignoreEOG: req.IgnoreEOG}
	err := g.run(ctx)
	g.finish()
	return g.res, err
}

// prefill makes the target cache (and, when the request may draft, the draft cache)
// hold prompt[:n-1], keeping the prefix shared with the previous sequence, and returns
// the number of target positions it kept. Prefilling the draft here keeps the rounds'
// draft times (which the depth policy weighs) free of the prompt's cost.
func (s *Session) prefill(ctx context.Context, prompt []int32, draft bool) (kept int, err error) {
	keep := 0
	for keep < len(s.hist) && keep < len(prompt)-1 && s.hist[keep] == prompt[keep] {
		keep++
	}
	keep = min(keep, s.target.len())
	if s.paging != nil {
		s.paging.withdraw(s) // the cache is about to change below what it published
	}
	if err := s.target.truncate(keep); err != nil {
		return keep, err
	}
	if s.draft != nil {
		if err := s.draft.truncate(min(keep, s.draft.len())); err != nil {
			return keep, err
		}
	}
	s.hist = append(s.hist[:0], prompt...)
	if s.paging != nil {
		// Another session's cache may hold more of the prompt. Share before the
		// reservation, which then counts only the blocks this session writes: it may
		// take back the very session shared from (an idle one, oldest first), whose
		// shared blocks then live on by this cache's references, counted once.
		var err error
		if keep, err = s.sharePrefix(prompt, keep, draft); err != nil {
			return keep, err
		}
	}
	s.unreserve() // (what the previous sequence's caches reserved: reserved anew)
	if err := s.reserve(s.want); err != nil {
		if s.paging != nil { // no references beyond what the pool lent
			s.target.truncate(0)
			if s.draft != nil {
				s.draft.truncate(0)
			}
		}
		return keep, err
	}
	if err := feed(ctx, s.target, prompt[keep:len(prompt)-1], s.batch); err != nil {
		return keep, err
	}
	if s.paging != nil {
		s.paging.publish(s, prompt[:len(prompt)-1], s.target.(*seq).c)
	}
	if !draft || s.draft == nil {
		s.publishDraft()
		return keep, nil
	}
	rest := prompt[s.draft.len() : len(prompt)-1]
	for _, id := range rest {
		if int(id) >= s.draft.vocab() {
			s.publishDraft()
			return keep, nil // the draft cannot follow this prompt (see draftTokens)
		}
	}
	if err := feed(ctx, s.draft, rest, s.batch); err != nil {
		return keep, err
	}
	s.publishDraft()
	return keep, nil
}

// sharePrefix starts the paged caches from the longest prefix of prompt another
// session's caches hold, where longer than what they hold (keep positions of the
// target; the draft's only when the request drafts), making the caches first where
// the pool took them back. It returns the target positions now held.
func (s *Session) sharePrefix(prompt []int32, keep int, draft bool) (int, error) {
	if err := s.pagedCaches(); err != nil {
		return keep, err
	}
	keep, err := s.paging.share(s, s.target.(*seq).c, prompt, keep, len(prompt)-1, false)
	if err != nil || !draft || s.draft == nil {
		return keep, err
	}
	_, err = s.paging.share(s, s.draft.(*seq).c, prompt, s.draft.len(), len(prompt)-1, true)
	return keep, err
}

// publishDraft records, with paging, what the draft cache holds of the prompt prefill
// published.
func (s *Session) publishDraft() {
	if s.paging != nil && s.draft != nil {
		s.paging.publishDraft(s, s.draft.len(), s.draft.(*seq).c)
	}
}

// feedLast runs ids through m in forwards of at most batch tokens and returns the last
// row's logits (nil for no ids): the forwards before the last fill the cache only. A
// cancelled ctx stops it between forwards (a long prefill is interruptible; the cache
// then holds the tokens fed so far, which the next prefill accounts for).
func feedLast(ctx context.Context, m lm, ids []int32, batch int) ([]float32, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rest, err := feedAllButLast(ctx, m, ids, batch)
	if err != nil {
		return nil, err
	}
	return m.forward(rest, false)
}

// feedAllButLast fills m's cache with ids in forwards of at most batch tokens, all but
// the final forward, whose tokens it returns (1 to batch of them; none for no ids).
func feedAllButLast(ctx context.Context, m lm, ids []int32, batch int) ([]int32, error) {
	last := max(len(ids)-1, 0) / batch * batch // the start of the final forward
	if err := feed(ctx, m, ids[:last], batch); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return ids[last:], nil
}

// feedWarmed fills m's cache with the leading tokens of ids in forwards of the sizes
// the session warmed, until what is left is a warmed size (or none), and returns that
// rest. A catch-up after plain rounds can be of any length; on a backend that captures
// a graph per shape it goes in forwards of the shapes the session warmed (see warm),
// not in one of a new shape captured mid-generation. Without warmed shapes (a backend
// without graphs) it feeds nothing.
func (s *Session) feedWarmed(ctx context.Context, m lm, ids []int32) ([]int32, error) {
	for s.warmed != nil && len(ids) > 0 && !s.warmed[len(ids)] {
		n := s.warmedBelow(len(ids))
		if err := feed(ctx, m, ids[:n], n); err != nil {
			return nil, err
		}
		ids = ids[n:]
	}
	return ids, nil
}

// feedStats is feedLast returning the statistics of the last row (k best, no pick)
// instead of the row: the same forwards, the last one through forwardStats.
func feedStats(ctx context.Context, m lm, ids []int32, batch, k int) (*model.RowStats, error) {
	if len(ids) == 0 {
		return nil, errors.New("BUG: engine: feedStats of no tokens")
	}
	rest, err := feedAllButLast(ctx, m, ids, batch)
	if err != nil {
		return nil, err
	}
	return m.forwardStats(rest, false, k, nil)
}

// feed runs ids through m in forwards of at most batch tokens that fill the cache only
// (no logits). A cancelled ctx stops it between forwards, as feedLast.
func feed(ctx context.Context, m lm, ids []int32, batch int) error {
	for len(ids) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(len(ids), batch)
		if err := m.fill(ids[:n]); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// batchDepth is the depth every round of the session takes now (Batching.BatchDepth):
// -1 (its policy's) alone, without batching or without a draft model.
func (s *Session) batchDepth() int {
	if sq, ok := s.target.(*seq); ok && sq.b != nil && s.draft != nil && sq.b.generating() >= 2 {
		return sq.b.batchDepth()
	}
	return -1
}

// auto is batch depth "auto"'s chooser on the session's target (nil without batching or
// before Calibrate); its methods take a nil one as recording nothing.
func (s *Session) auto() *autoDepth {
	if sq, ok := s.target.(*seq); ok && sq.b != nil {
		return sq.b.chooser()
	}
	return nil
}

// generating is the number of sessions generating on the target now, this one among
// them: 1 without batching.
func (s *Session) generating() int {
	if sq, ok := s.target.(*seq); ok && sq.b != nil {
		return sq.b.generating()
	}
	return 1
}
