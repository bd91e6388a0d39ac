// Package server is minfer's OpenAI-compatible HTTP API on top of core/engine:
// POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health and
// GET /metrics (Prometheus).
//
// Requests run on a fixed set of slots (one engine.Session each, --parallel); a request
// waits in a bounded queue for a free slot. A slot reuses the KV cache of its previous
// request only for the prefix of tokens that match exactly (engine.Session does that);
// a client that disconnects ends its generation and frees the slot at once. Shutdown
// stops accepting connections and drains the requests in flight.
//
// Plugins are chosen per request among those the configuration allows (the request's
// "minfer" field); the Resolver given by the caller turns names and sampling parameters
// into plugin instances, so this package depends only on the sdk interfaces.
package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/core/tokenizer"
	"github.com/minfer/minfer/sdk"
)

// Plugins are the instances one request runs with.
type Plugins struct {
	Policy  sdk.DepthPolicy // nil: plain decoding
	Sampler sdk.Sampler
	Penalty sdk.Penalty // nil: none
	// Drafters are the drafter plugins the policy may give rounds to (engine.Request).
	Drafters []engine.Drafter
	// PolicyName and PolicyVersion are reported in the response's "minfer" field.
	PolicyName    string
	PolicyVersion string
	SamplerName   string
	// Greedy reports whether the sampler is the greedy one (assert_identity needs it).
	Greedy bool
	// Seed seeds the sampler's generator.
	Seed uint64
	// Release returns the instances to their pools; may be nil.
	Release func()
}

// Resolver makes the plugin instances for a request. An unknown or disallowed plugin
// name must be returned as a *RequestError naming the field ("minfer.policy", …).
type Resolver interface {
	Resolve(ctx context.Context, p Params, hasDraft bool) (*Plugins, error)
}

// KVPool is what the server reads of a KV block pool (kv.Pool) for /metrics.
type KVPool interface {
	Bytes() int64
	UsedBytes() int64
	PhysicalBytes() int64
	SharedBytes() int64
	Used() int
	Blocks() int
}

// KVPaged is what the server reads of the slots' paged KV arenas (engine.Paging) for
// /metrics.
type KVPaged interface {
	UsedBytes() int64
}

// Options configure a Server.
type Options struct {
	// ModelID is the name reported by /v1/models and in responses.
	ModelID string
	// Tokenizer encodes prompts, renders chat templates and decodes logprob tokens.
	Tokenizer *tokenizer.Tokenizer
	// ChatTemplate overrides the model's template when its text is non-empty.
	ChatTemplate Template
	// NewSession makes one slot's session; it is called Parallel times at New.
	NewSession func() (*engine.Session, error)
	Parallel   int // slots (default 4)
	// QueueSize is how many requests may wait for a slot; more get 503. 0 = the
	// default 64; negative = none wait (503 whenever every slot is busy).
	QueueSize int
	Resolver  Resolver
	// MaxTokens caps max_tokens (0: up to the context).
	MaxTokens int
	// KVPool, when set, is the block pool the slots' caches take their memory from
	// (engine.Config.Pool, a *kv.Pool): /metrics reports its use. A request the pool
	// cannot serve gets 503 kv_pool_full with Retry-After.
	KVPool KVPool
	// KVPaged, when set, is the slots' paged caches' arenas (the CPU with KVPool):
	// /metrics reports the memory their blocks hold, a prefix shared by several slots
	// counted once.
	KVPaged KVPaged
	// APIKey, when non-empty, is required as "Authorization: Bearer KEY".
	APIKey string
	// Log receives one line per request and errors; nil discards.
	Log io.Writer
	// Warn receives what an operator should see whatever the verbosity (a drafter
	// plugin's failure, whose rounds fell back); nil: Log.
	Warn io.Writer
	// Timeouts for the http.Server (0: none).
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// ReadHeaderTimeout bounds reading a request's headers (0: none): a client that
	// trickles them (slowloris) is dropped.
	ReadHeaderTimeout time.Duration
	// SendTimeout bounds writing one whole response, or one event of a stream, to a
	// client (0: none). A client that reads slower is dropped; its slot is not held
	// meanwhile for a whole response (generation ends, then the reply is written), and
	// for a stream for at most SendTimeout per event.
	SendTimeout time.Duration
	// MaxConns caps the open connections (0: no cap). At the cap a new connection
	// displaces the one longest without a request in progress (one that never finished
	// a request first, else an idle keep-alive); when every connection has one in
	// progress, the new connection is closed.
	MaxConns int
}

// Server serves the API. Create it with New.
type Server struct {
	opts    Options
	slots   chan *slot
	all     []*slot
	waiting chan struct{} // queue tokens
	bigTok  chan struct{} // the one tokenization of a big prompt at a time
	metrics *metrics
	mux     *http.ServeMux
	logMu   sync.Mutex
	created int64
	// draining is set when shutdown begins (/health answers 503).
	draining atomic.Bool
	// beforeGenerate, when set (tests only), runs just before a slot's session
	// generates: where the KV pool may take the slot's blocks back after the slot was
	// chosen for its cached prefix.
	beforeGenerate func()
}

// slot is one sequence: a session used by one request at a time.
type slot struct {
	id   int
	sess *engine.Session
	// held are the tokens of the slot's last request (prompt and reply), which its
	// session's cache still holds; heldEOG marks a reply that ended with an
	// end-of-generation token, which the session holds too but held does not.
	held    []int32
	heldEOG bool
	// reclaims is the session's Reclaims() when held was recorded: once the KV pool
	// takes the idle session's blocks back (it then forgets its sequence) the count
	// moves on and held no longer says what the session holds.
	reclaims uint64
}

// remember records what the slot's session holds after a generation; before is the
// session's Reclaims() read before the generation began. A reclaim after that (the
// pool may take the blocks back as soon as the generation ends) leaves the record
// stale from the start; one in the moment before the generation took its blocks only
// makes it look stale. The record only steers the choice of a slot (closest); what a
// request reports as cached_tokens is what the engine reused (Result.CachedTokens).
func (sl *slot) remember(prompt []int32, res *engine.Result, before uint64) {
	sl.held = append(append(sl.held[:0], prompt...), res.Tokens...)
	sl.heldEOG = res.Stop == engine.StopEOG
	sl.reclaims = before
}

// cached is how many tokens of prompt the slot's session would reuse, as far as its
// record tells: none once the pool took the session's blocks back since held was
// recorded (the record is dropped).
func (sl *slot) cached(prompt []int32, isEOG func(int32) bool) int {
	if sl.sess.Reclaims() != sl.reclaims {
		sl.held, sl.heldEOG = sl.held[:0], false
	}
	return CachedTokens(sl.held, sl.heldEOG, prompt, isEOG)
}

// CachedTokens is how many tokens of prompt an engine.Session reuses when its last
// request left held in it (that request's prompt and generated tokens; heldEOG when
// it ended with an end-of-generation token, which the session holds but the result's
// tokens do not). The session keeps the common prefix, except that the last prompt
// token always runs (it gives the first logits) and the newest held token was never
// cached. The server chooses slots by it (a request reports the engine's count,
// Result.CachedTokens).
func CachedTokens(held []int32, heldEOG bool, prompt []int32, isEOG func(int32) bool) int {
	n := 0
	for n < len(held) && n < len(prompt) && held[n] == prompt[n] {
		n++
	}
	h := len(held) // tokens in the session's sequence
	if heldEOG {
		if n == h && n < len(prompt) && isEOG(prompt[n]) {
			n++ // assumed to be the same EOG id: models write one per template
		}
		h++
	}
	return max(min(n, len(prompt)-1, h-1), 0)
}

// New makes the slots' sessions and the handler.
func New(opts Options) (*Server, error) {
	if opts.Tokenizer == nil || opts.NewSession == nil || opts.Resolver == nil {
		return nil, errors.New("server: Tokenizer, NewSession and Resolver are required")
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	switch {
	case opts.QueueSize == 0:
		opts.QueueSize = 64
	case opts.QueueSize < 0:
		opts.QueueSize = 0
	}
	if opts.ModelID == "" {
		opts.ModelID = "minfer"
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Warn == nil {
		opts.Warn = opts.Log
	}
	s := &Server{
		opts:    opts,
		slots:   make(chan *slot, opts.Parallel),
		waiting: make(chan struct{}, opts.QueueSize),
		bigTok:  make(chan struct{}, 1),
		metrics: newMetrics(),
		created: time.Now().Unix(),
	}
	if opts.KVPaged != nil {
		s.metrics.pagedGauge(opts.KVPaged)
	}
	if opts.KVPool != nil {
		s.metrics.poolGauges(opts.KVPool)
	}
	for i := 0; i < opts.Parallel; i++ {
		sess, err := opts.NewSession()
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("server: slot %d: %w", i, err)
		}
		sl := &slot{id: i, sess: sess}
		s.all = append(s.all, sl)
		s.slots <- sl
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/chat/completions", s.auth(s.handleChat))
	s.mux.HandleFunc("POST /v1/completions", s.auth(s.handleCompletion))
	s.mux.HandleFunc("GET /v1/models", s.auth(s.handleModels))
	s.mux.HandleFunc("GET /health", s.handleHealth)
	s.mux.HandleFunc("GET /health/live", s.handleLive)
	s.mux.Handle("GET /metrics", s.metrics.handler())
	allow := map[string]string{"/v1/chat/completions": "POST", "/v1/completions": "POST", "/v1/models": "GET", "/health": "GET", "/health/live": "GET", "/metrics": "GET"}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if m, ok := allow[r.URL.Path]; ok {
			w.Header().Set("Allow", m)
			writeError(w, &RequestError{Status: http.StatusMethodNotAllowed, Message: fmt.Sprintf("%s %s: method not allowed (use %s)", r.Method, r.URL.Path, m)})
			return
		}
		writeError(w, &RequestError{Status: http.StatusNotFound, Message: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)})
	})
	return s, nil
}

// Handler is the API's http.Handler.
func (s *Server) Handler() http.Handler { return s.mux }

// FreeSlots is the number of idle slots (for tests and /health).
func (s *Server) FreeSlots() int { return len(s.slots) }

// Close frees the slots' sessions. Call it after the HTTP server has shut down: it
// first waits until every slot is back from its request (a request still running
// after a forced shutdown ends when its connection's context is cancelled), so no
// session is freed under a generation.
func (s *Server) Close() {
	for range s.all {
		<-s.slots
	}
	for _, sl := range s.all {
		sl.sess.Close()
	}
	s.all = nil
}

// ListenAndServe serves on addr until ctx is done, then shuts down gracefully: no new
// connections, in-flight requests drain for up to grace.
func (s *Server) ListenAndServe(ctx context.Context, addr string, grace time.Duration, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	hs := &http.Server{
		Handler:           s.mux,
		ReadTimeout:       s.opts.ReadTimeout,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		WriteTimeout:      s.opts.WriteTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
	}
	if s.opts.MaxConns > 0 {
		cl := newConnLimiter(s.opts.MaxConns)
		ln = limitListener{Listener: ln, l: cl}
		hs.Handler, hs.ConnState, hs.ConnContext = cl.busy(s.mux), cl.state, cl.withConn
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("server: %w", err)
	case <-ctx.Done():
	}
	s.draining.Store(true) // /health says so to whoever still asks on an open connection
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		// the grace ran out: close the remaining connections, which cancels their
		// requests' contexts so their generations stop and free their slots
		hs.Close()
		return fmt.Errorf("server: shutdown: requests still running after %v: %w", grace, err)
	}
	return nil
}

func (s *Server) logf(format string, args ...any) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.opts.Log, format+"\n", args...)
}

// warnf writes a line to Options.Warn.
func (s *Server) warnf(format string, args ...any) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintf(s.opts.Warn, format+"\n", args...)
}

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	if s.opts.APIKey == "" {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if !bearerOK(r.Header.Get("Authorization"), s.opts.APIKey) {
			writeError(w, &RequestError{Status: http.StatusUnauthorized, Message: "missing or wrong API key (Authorization: Bearer …)", Code: "invalid_api_key"})
			return
		}
		h(w, r)
	}
}

// bearerOK reports whether header is "Bearer KEY" with key: the scheme in any case
// (RFC 7235: auth schemes are case-insensitive), the key compared in constant time
// (crypto/subtle) so its bytes cannot be found by timing.
func bearerOK(header, key string) bool {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(cred)), []byte(key)) == 1
}

// acquire waits for a free slot, or fails when the queue is full or ctx ends. Among
// the slots free at that moment it takes the one whose cache shares the longest
// prefix with prompt (a conversation's next turn goes back to its slot).
func (s *Server) acquire(ctx context.Context, prompt []int32) (*slot, error) {
	select {
	case sl := <-s.slots:
		return s.closest(sl, prompt), nil
	default:
	}
	select {
	case s.waiting <- struct{}{}:
	default:
		return nil, &RequestError{Status: http.StatusServiceUnavailable, Message: "server busy: request queue is full", Code: "server_busy"}
	}
	s.metrics.queue.Inc()
	defer func() {
		<-s.waiting
		s.metrics.queue.Dec()
	}()
	select {
	case sl := <-s.slots:
		return s.closest(sl, prompt), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// closest takes the other idle slots as well, keeps the one that reuses most of
// prompt and gives the rest back. A slot is only chosen for its cache when that covers
// more than half the prompt (llama.cpp's default --slot-prompt-similarity); otherwise
// sl, the longest idle, is used, so an unrelated request that merely shares the first
// tokens (BOS, a template's opening) does not evict a conversation.
func (s *Server) closest(sl *slot, prompt []int32) *slot {
	var others []*slot
	for {
		select {
		case o := <-s.slots:
			others = append(others, o)
			continue
		default:
		}
		break
	}
	isEOG := s.opts.Tokenizer.IsEOG
	best, bestN := sl, sl.cached(prompt, isEOG)
	for i, o := range others {
		if n := o.cached(prompt, isEOG); n > bestN && 2*n > len(prompt) {
			best, bestN, others[i] = o, n, best
		}
	}
	for _, o := range others {
		s.slots <- o
	}
	return best
}

func (s *Server) release(sl *slot) { s.slots <- sl }

// handleHealth is readiness: 200 while the server would take a request now; 503 once
// it drains (shutdown began; the requests in flight finish) or while a new request
// would be refused as server_busy (no idle slot and a full queue), so that a load
// balancer sends it elsewhere. /health/live is liveness.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	body := map[string]any{"status": "ok", "slots_idle": len(s.slots), "slots_total": s.opts.Parallel,
		"queue_waiting": len(s.waiting), "queue_size": cap(s.waiting)}
	code := http.StatusOK
	switch {
	case s.draining.Load():
		body["status"], code = "draining", http.StatusServiceUnavailable
	case len(s.slots) == 0 && len(s.waiting) == cap(s.waiting):
		body["status"], code = "busy", http.StatusServiceUnavailable
	}
	writeJSON(w, code, body)
}

// handleLive is liveness: 200 whenever the process answers HTTP, draining or busy,
// so that a probe never restarts a server for being loaded.
func (s *Server) handleLive(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "live"})
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id": s.opts.ModelID, "object": "model", "created": s.created, "owned_by": "minfer",
		}},
	})
}
