package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/core/tokenizer"
	"github.com/minfer/minfer/sdk"
)

// maxBody bounds a request body.
const maxBody = 8 << 20

var idSeq atomic.Uint64

// job is one validated request, ready to run.
type job struct {
	start      time.Time // when serving began (the write deadlines count from it)
	chat       bool
	prompt     []int32
	maxTokens  int
	logprobs   int // 0 none, -1 chosen token only, N alternatives
	stop       []string
	params     Params
	stream     bool
	usage      bool // stream_options.include_usage
	assertID   bool
	ignoreEOS  bool
	maxField   string // the field that set maxTokens ("" when the request left it out)
	id         string
	created    int64
	endpoint   string
	promptText string
	// onDrafterFailure logs a drafter plugin's failure in the request (the round
	// falls back, and the drafter is off for the rest of the request).
	onDrafterFailure func(name string, err error)
}

var validRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	j, err := s.readRequest(r, &req, func() (*job, error) {
		if len(req.Messages) == 0 {
			return nil, badRequest("messages", "must be a non-empty list")
		}
		msgs := make([]tokenizer.Message, len(req.Messages))
		for i, m := range req.Messages {
			if !validRoles[m.Role] {
				return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "unknown role %q (want system, developer, user, assistant or tool)", m.Role)
			}
			if !m.Content.set && m.Role != "assistant" {
				return nil, badRequest(fmt.Sprintf("messages[%d].content", i), "missing content")
			}
			role := m.Role
			if role == "developer" {
				role = "system"
			}
			msgs[i] = tokenizer.Message{Role: role, Content: m.Content.text}
		}
		prompt, err := s.render(r.Context(), msgs)
		if err != nil {
			// The template is the model's and it rendered other conversations: what it
			// refuses (a role it has no branch for, an order it rejects) is the request's.
			return nil, badRequest("messages", "the chat template cannot render these messages: %v", err)
		}
		return s.newJob(r.Context(), true, prompt, &req.commonRequest)
	})
	s.serveJob(w, r, j, err)
}

func (s *Server) handleCompletion(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	j, err := s.readRequest(r, &req, func() (*job, error) {
		raw := strings.TrimSpace(string(req.Prompt))
		if raw == "" || raw == "null" {
			return nil, badRequest("prompt", "missing prompt")
		}
		var text string
		if err := json.Unmarshal(req.Prompt, &text); err != nil {
			var list []string
			if err2 := json.Unmarshal(req.Prompt, &list); err2 != nil || len(list) != 1 {
				return nil, badRequest("prompt", "want a string (or a list of exactly one string)")
			}
			text = list[0]
		}
		if text == "" {
			return nil, badRequest("prompt", "empty prompt")
		}
		return s.newJob(r.Context(), false, tokenizer.RawPrompt(text), &req.commonRequest)
	})
	s.serveJob(w, r, j, err)
}

// readRequest reads and decodes the body into req, then builds the job.
func (s *Server) readRequest(r *http.Request, req any, build func() (*job, error)) (*job, error) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &RequestError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body over %d bytes", maxBody)}
		}
		return nil, badRequest("", "reading body: %v", err)
	}
	if err := decodeJSON(body, req); err != nil {
		return nil, err
	}
	return build()
}

// render applies the chat template, stopped with the request.
func (s *Server) render(ctx context.Context, msgs []tokenizer.Message) (tokenizer.Prompt, error) {
	return RenderChat(ctx, s.opts.Tokenizer, s.opts.ChatTemplate, msgs)
}

// Template is a chat template chosen over the model's (--chat-template): its text and
// the name its errors give it, the file or built-in template the user named.
type Template struct {
	Text string
	Name string // "" says "override"
}

// RenderChat renders a conversation with a generation prompt the way the server and
// the REPL both do: override if its text is set, else the model's template, else the
// built-in chatml template (as llama.cpp falls back for models without one). The
// render runs under tokenizer.DefaultRenderLimits and stops when ctx ends; its errors
// name the template. Control-token text inside the messages stays plain text when the
// prompt is encoded (tokenizer.Prompt): a user cannot forge turn markers.
func RenderChat(ctx context.Context, t *tokenizer.Tokenizer, override Template, msgs []tokenizer.Message) (tokenizer.Prompt, error) {
	tmpl, name := override.Text, cmp.Or(override.Name, "override")
	if tmpl == "" {
		tmpl, name = t.ChatTemplate(), t.ChatTemplateName()
	}
	if tmpl == "" {
		tmpl, _ = tokenizer.BuiltinTemplate("chatml")
		name = "built-in chatml"
	}
	return t.RenderChatPrompt(ctx, tmpl, msgs, true, tokenizer.RenderOptions{Name: name})
}

// EncodePrompt tokenizes a prompt the way the server, `minfer run` and the REPL all do:
// special tokens are parsed (in a chat prompt only the template's own: see
// tokenizer.Prompt), and BOS is added when the vocabulary asks for it unless the text
// already starts with it (chat templates often write it). Tokenizing stops when ctx
// ends.
func EncodePrompt(ctx context.Context, t *tokenizer.Tokenizer, p tokenizer.Prompt) ([]int32, error) {
	addSpecial := true
	if id := t.BOS(); id >= 0 && t.AddBOS() && strings.HasPrefix(p.Text, t.TokenText(id)) {
		addSpecial = false
	}
	return t.EncodePrompt(ctx, p, addSpecial)
}

// bigPrompt is the size from which prompts are tokenized one at a time: a prompt of
// megabytes takes seconds of CPU and ~45 bytes of memory per byte of text to tokenize
// (7.5 MB: 8.5 s, 340 MB), so eight at once reached 2.8 GB. Smaller ones (up to
// ~15K tokens) tokenize in milliseconds and go straight through.
const bigPrompt = 64 << 10

// tokenize encodes a request's prompt. A cheap bound comes first: text whose token
// count is surely over the context is refused untokenized. A big prompt waits for
// the one big tokenization at a time, holding a place in the queue meanwhile (a full
// queue answers 503); the wait and the tokenizing end with the request.
func (s *Server) tokenize(ctx context.Context, p tokenizer.Prompt) ([]int32, error) {
	text := p.Text
	if n := s.all[0].sess.Ctx(); s.opts.Tokenizer.MinTokens(len(text)) >= n {
		return nil, &RequestError{Param: "prompt", Code: "context_length_exceeded",
			Message: fmt.Sprintf("the prompt has %d bytes, at least %d tokens; the context holds %d", len(text), s.opts.Tokenizer.MinTokens(len(text)), n)}
	}
	if len(text) >= bigPrompt {
		select {
		case s.bigTok <- struct{}{}:
		default:
			select {
			case s.waiting <- struct{}{}:
			default:
				return nil, &RequestError{Status: http.StatusServiceUnavailable, Message: "server busy: request queue is full", Code: "server_busy"}
			}
			s.metrics.queue.Inc()
			select {
			case s.bigTok <- struct{}{}:
			case <-ctx.Done():
			}
			<-s.waiting
			s.metrics.queue.Dec()
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		defer func() { <-s.bigTok }()
	}
	ids, err := EncodePrompt(ctx, s.opts.Tokenizer, p)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, badRequest("prompt", "cannot tokenize: %v", err)
	}
	return ids, nil
}

func (s *Server) newJob(ctx context.Context, chat bool, prompt tokenizer.Prompt, c *commonRequest) (*job, error) {
	// the cheap checks first: a request refused for its parameters costs no tokenizing
	maxTokens, lp, p, err := c.validate(s.opts.MaxTokens)
	if err != nil {
		return nil, err
	}
	if n := s.opts.Tokenizer.NVocab(); p.TopK != nil && *p.TopK > n {
		// a sampler asked for more candidates than the vocabulary has fails (500)
		return nil, badRequest("top_k", "must be at most the vocabulary's %d tokens (0 = off), got %d", n, *p.TopK)
	}
	ids, err := s.tokenize(ctx, prompt)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, badRequest("prompt", "the prompt has no tokens")
	}
	j := &job{
		chat: chat, prompt: ids, maxTokens: maxTokens, logprobs: lp, stop: c.Stop, params: p,
		stream: c.Stream, usage: c.StreamOptions != nil && c.StreamOptions.IncludeUsage,
		assertID: c.Minfer != nil && c.Minfer.AssertIdentity, ignoreEOS: c.IgnoreEOS, created: time.Now().Unix(), promptText: prompt.Text,
	}
	switch { // validate lets max_completion_tokens win when both are set
	case c.MaxCompletionTokens != nil:
		j.maxField = "max_completion_tokens"
	case c.MaxTokens != nil:
		j.maxField = "max_tokens"
	}
	if chat {
		j.id, j.endpoint = fmt.Sprintf("chatcmpl-%d", idSeq.Add(1)), "chat"
	} else {
		j.id, j.endpoint = fmt.Sprintf("cmpl-%d", idSeq.Add(1)), "completions"
	}
	return j, nil
}

// serveJob runs a job on a slot and writes the response (streamed or whole).
func (s *Server) serveJob(w http.ResponseWriter, r *http.Request, j *job, err error) {
	endpoint := "chat"
	if !strings.Contains(r.URL.Path, "chat") {
		endpoint = "completions"
	}
	status := http.StatusOK
	defer func() { s.metrics.requests.WithLabelValues(endpoint, fmt.Sprint(status)).Inc() }()
	if err != nil {
		status = writeError(w, err)
		return
	}
	ctx := r.Context()
	j.start = time.Now()
	sl, err := s.acquire(ctx, j.prompt)
	if err != nil {
		status = writeError(w, err)
		return
	}
	// free gives the slot (and the plugins, once resolved) back; a whole response
	// calls it before writing, so a client that reads slowly holds no slot.
	var pl *Plugins
	freed := false
	free := func() {
		if freed {
			return
		}
		freed = true
		if pl != nil && pl.Release != nil {
			pl.Release()
		}
		s.release(sl)
	}
	defer free()
	promptField := "prompt"
	if j.chat {
		promptField = "messages"
	}
	if n := sl.sess.Ctx(); len(j.prompt) >= n {
		status = writeError(w, &RequestError{Param: promptField, Code: "context_length_exceeded",
			Message: fmt.Sprintf("the prompt has %d tokens; the context holds %d", len(j.prompt), n)})
		return
	} else if j.maxField != "" && len(j.prompt)+j.maxTokens > n {
		// as OpenAI and vLLM answer: the request cannot be honoured, say so up front
		status = writeError(w, &RequestError{Param: j.maxField, Code: "context_length_exceeded",
			Message: fmt.Sprintf("%d prompt tokens + %s %d exceed the context of %d tokens", len(j.prompt), j.maxField, j.maxTokens, n)})
		return
	}
	pl, err = s.opts.Resolver.Resolve(ctx, j.params, sl.sess.HasDraft())
	if err != nil {
		pl = nil
		status = writeError(w, err)
		return
	}
	j.onDrafterFailure = func(name string, err error) {
		s.warnf("minfer: %s: drafter %q failed and is off for the request, its rounds fall back (the draft model, else plain decoding): %v",
			j.id, name, err)
	}
	if j.assertID && !pl.Greedy {
		status = writeError(w, badRequest("minfer.assert_identity", "needs the greedy sampler (temperature 0 or sampler \"greedy\")"))
		return
	}
	s.metrics.inflight.Inc()
	if j.stream {
		status = s.stream(w, ctx, sl, j, pl, sync.OnceFunc(func() { s.metrics.inflight.Dec(); free() }))
		return
	}
	var body []byte
	status, body = s.whole(w, ctx, sl, j, pl)
	s.metrics.inflight.Dec()
	free()
	if body != nil {
		s.sendDeadline(w, j)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		if _, err := w.Write(body); err != nil {
			s.logf("%s %s: writing the response: %v", j.endpoint, j.id, err)
		}
	}
}

// sendDeadline bounds the next write to j's client by SendTimeout, never past the
// request's WriteTimeout.
func (s *Server) sendDeadline(w http.ResponseWriter, j *job) {
	if s.opts.SendTimeout <= 0 {
		return
	}
	d := time.Now().Add(s.opts.SendTimeout)
	if s.opts.WriteTimeout > 0 {
		if end := j.start.Add(s.opts.WriteTimeout); end.Before(d) {
			d = end
		}
	}
	_ = http.NewResponseController(w).SetWriteDeadline(d)
}

// request builds the engine request; lp collects logprobs when asked.
func (j *job) request(pl *Plugins, onText func(string) error) (engine.Request, *lpSampler) {
	req := engine.Request{
		Prompt: j.prompt, NPredict: j.maxTokens, Stop: j.stop, IgnoreEOG: j.ignoreEOS,
		Sampler: pl.Sampler, Penalty: pl.Penalty, Policy: pl.Policy, PolicyName: pl.PolicyName, Drafters: pl.Drafters,
		Seed: pl.Seed, OnText: onText, DraftMax: j.params.DraftMax, OnDrafterFailure: j.onDrafterFailure,
	}
	var lp *lpSampler
	if j.logprobs != 0 {
		lp = &lpSampler{inner: pl.Sampler, n: max(j.logprobs, 0)}
		req.Sampler = lp
	}
	return req, lp
}

// whole generates j's reply and returns it encoded (status 200), or writes an error
// and returns its status and no body. The caller frees the slot, then writes the body.
func (s *Server) whole(w http.ResponseWriter, ctx context.Context, sl *slot, j *job, pl *Plugins) (int, []byte) {
	req, lp := j.request(pl, nil)
	res, err := s.generate(ctx, sl, j, req)
	if err != nil {
		return s.genError(w, j, err), nil
	}
	s.metrics.observe(res)
	ext := s.extension(pl, res)
	if j.assertID {
		if err := s.checkIdentity(ctx, sl, j, pl, res); err != nil {
			return writeError(w, &RequestError{Status: http.StatusInternalServerError, Param: "minfer.assert_identity", Message: err.Error()}), nil
		}
		ext["identity"] = "ok"
	}
	var lps any
	if lp != nil {
		lps = s.logprobsJSON(j, lp.entries(len(res.Tokens)))
	}
	usage := usageOf(res)
	var body map[string]any
	if j.chat {
		body = map[string]any{
			"id": j.id, "object": "chat.completion", "created": j.created, "model": s.opts.ModelID,
			"choices": []map[string]any{{
				"index": 0, "message": map[string]any{"role": "assistant", "content": res.Text},
				"logprobs": lps, "finish_reason": finishReason(res.Stop),
			}},
			"usage": usage, "minfer": ext,
		}
	} else {
		body = map[string]any{
			"id": j.id, "object": "text_completion", "created": j.created, "model": s.opts.ModelID,
			"choices": []map[string]any{{
				"index": 0, "text": res.Text, "logprobs": lps, "finish_reason": finishReason(res.Stop),
			}},
			"usage": usage, "minfer": ext,
		}
	}
	s.logf("%s %s prompt=%d gen=%d stop=%s %.1f t/s", j.endpoint, j.id, res.PromptTokens, len(res.Tokens), res.Stop, res.Timings.GenTPS)
	b, err := json.Marshal(body)
	if err != nil {
		return writeError(w, err), nil
	}
	return http.StatusOK, append(b, '\n')
}

// checkIdentity re-runs the request as plain greedy decoding and compares tokens.
func (s *Server) checkIdentity(ctx context.Context, sl *slot, j *job, pl *Plugins, got *engine.Result) error {
	req, _ := j.request(pl, nil)
	req.Policy, req.PolicyName = nil, "plain"
	if err := sl.sess.Reset(); err != nil {
		return err
	}
	want, err := sl.sess.Generate(ctx, req)
	if err != nil {
		return fmt.Errorf("identity check run: %w", err)
	}
	for i := range min(len(got.Tokens), len(want.Tokens)) {
		if got.Tokens[i] != want.Tokens[i] {
			return fmt.Errorf("greedy identity violated at token %d: speculative %d, plain %d", i, got.Tokens[i], want.Tokens[i])
		}
	}
	if len(got.Tokens) != len(want.Tokens) {
		return fmt.Errorf("greedy identity violated: speculative made %d tokens, plain %d", len(got.Tokens), len(want.Tokens))
	}
	return nil
}

// genError maps an engine error to a response.
func (s *Server) genError(w http.ResponseWriter, j *job, err error) int {
	if errors.Is(err, context.Canceled) {
		s.logf("%s %s: client went away", j.endpoint, j.id)
		return 499
	}
	var re *RequestError
	if errors.As(err, &re) {
		return writeError(w, re)
	}
	if errors.Is(err, engine.ErrContextFull) {
		return writeError(w, &RequestError{Param: "messages", Code: "context_length_exceeded", Message: err.Error()})
	}
	if errors.Is(err, engine.ErrPoolFull) {
		s.logf("%s %s: %v", j.endpoint, j.id, err)
		return writeError(w, &RequestError{Status: http.StatusServiceUnavailable, Code: "kv_pool_full",
			Message: "server busy: the KV memory of the running requests is spent; retry shortly (" + err.Error() + ")"})
	}
	s.logf("%s %s: %v", j.endpoint, j.id, err)
	return writeError(w, &RequestError{Status: http.StatusInternalServerError, Message: err.Error(), Code: "internal_error"})
}

func (s *Server) extension(pl *Plugins, res *engine.Result) map[string]any {
	return map[string]any{
		"policy": pl.PolicyName, "policy_version": pl.PolicyVersion, "sampler": pl.SamplerName,
		"spec": res.Spec, "timings": res.Timings,
	}
}

// generate runs req on the slot and records what its cache holds afterwards.
func (s *Server) generate(ctx context.Context, sl *slot, j *job, req engine.Request) (*engine.Result, error) {
	before := sl.sess.Reclaims()
	if s.beforeGenerate != nil {
		s.beforeGenerate()
	}
	req.OnText = s.metrics.interToken(req.OnText)
	res, err := sl.sess.Generate(ctx, req)
	if err != nil || res == nil {
		sl.held = sl.held[:0] // unknown: count nothing as cached next time
		return res, err
	}
	sl.remember(j.prompt, res, before)
	return res, nil
}

// usageOf is OpenAI's usage object; prompt_tokens_details.cached_tokens counts the
// prompt tokens the engine reused from the slot's cache (Result.CachedTokens: what it
// did, not what the slot's record predicted when the slot was chosen).
func usageOf(res *engine.Result) map[string]any {
	return map[string]any{
		"prompt_tokens": res.PromptTokens, "completion_tokens": len(res.Tokens),
		"total_tokens":          res.PromptTokens + len(res.Tokens),
		"prompt_tokens_details": map[string]int{"cached_tokens": res.CachedTokens},
	}
}

func finishReason(r engine.StopReason) string {
	switch r {
	case engine.StopLength, engine.StopCtx:
		return "length"
	}
	return "stop"
}

// lpSampler wraps a sampler to record the log-probability of every token it emits and
// of the best alternatives (OpenAI's logprobs). It widens the candidates to n per row.
// The round's rows belong to the engine and are reused by the next round, so what is
// kept is copied out during the call.
type lpSampler struct {
	inner sdk.Sampler
	n     int
	got   []tokenLP
}

type tokenLP struct {
	id   int32
	lp   float64
	alts []altLP // the row's n best tokens, best first
}

type altLP struct {
	id int32
	lp float64
}

func (l *lpSampler) Needs() sdk.Needs {
	nd := l.inner.Needs()
	if nd.TopK > 0 && nd.TopK < l.n {
		nd.TopK = l.n
	}
	return nd
}

func (l *lpSampler) Sample(ctx context.Context, r *sdk.SampleRound) (sdk.SampleResult, error) {
	res, err := l.inner.Sample(ctx, r)
	if err != nil || res.Accepted < 0 || res.Accepted >= len(r.Rows) {
		return res, err
	}
	for i := 0; i < res.Accepted; i++ {
		row := r.Rows[i]
		l.got = append(l.got, tokenLP{id: r.Draft[i], lp: float64(row.DraftLogit - row.LogSumExp), alts: l.best(row)})
	}
	row := r.Rows[res.Accepted]
	lp := math.Inf(-1)
	for k, id := range row.IDs {
		if id == res.Next {
			lp = float64(row.Logits[k] - row.LogSumExp)
			break
		}
	}
	l.got = append(l.got, tokenLP{id: res.Next, lp: lp, alts: l.best(row)})
	return res, nil
}

// best returns the n most likely candidates of row (ties: lower id first). Top-K rows
// arrive sorted, full rows (IDs 0..V-1) do not, so it selects in both cases.
func (l *lpSampler) best(row sdk.SampleRow) []altLP {
	if l.n <= 0 {
		return nil
	}
	out := make([]altLP, 0, l.n)
	better := func(a, b altLP) bool { return a.lp > b.lp || (a.lp == b.lp && a.id < b.id) }
	for k, id := range row.IDs {
		a := altLP{id: id, lp: float64(row.Logits[k] - row.LogSumExp)}
		if len(out) == l.n && !better(a, out[len(out)-1]) {
			continue
		}
		if len(out) < l.n {
			out = append(out, a)
		} else {
			out[len(out)-1] = a
		}
		for i := len(out) - 1; i > 0 && better(out[i], out[i-1]); i-- {
			out[i], out[i-1] = out[i-1], out[i]
		}
	}
	return out
}

// entries returns the first n recorded tokens (those that were really emitted).
func (l *lpSampler) entries(n int) []tokenLP {
	return l.got[:min(n, len(l.got))]
}

// logprobsJSON renders logprobs in the chat ("content": [...]) or completions
// (tokens/token_logprobs/top_logprobs) shape.
func (s *Server) logprobsJSON(j *job, es []tokenLP) any {
	tok := s.opts.Tokenizer
	piece := func(id int32) string { return string(tok.Piece(id)) }
	finite := func(x float64) float64 {
		if math.IsInf(x, -1) {
			return -9999
		}
		return x
	}
	if j.chat {
		content := make([]map[string]any, 0, len(es))
		for _, e := range es {
			top := []map[string]any{}
			for _, a := range e.alts {
				top = append(top, map[string]any{"token": piece(a.id), "logprob": finite(a.lp), "bytes": bytesList(piece(a.id))})
			}
			content = append(content, map[string]any{"token": piece(e.id), "logprob": finite(e.lp), "bytes": bytesList(piece(e.id)), "top_logprobs": top})
		}
		return map[string]any{"content": content}
	}
	tokens, lps, tops := []string{}, []float64{}, []map[string]float64{}
	for _, e := range es {
		tokens = append(tokens, piece(e.id))
		lps = append(lps, finite(e.lp))
		m := map[string]float64{}
		for _, a := range e.alts {
			m[piece(a.id)] = finite(a.lp)
		}
		tops = append(tops, m)
	}
	return map[string]any{"tokens": tokens, "token_logprobs": lps, "top_logprobs": tops}
}

func bytesList(s string) []int {
	out := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = int(s[i])
	}
	return out
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError writes an OpenAI-style error object and returns the status used.
func writeError(w http.ResponseWriter, err error) int {
	re := &RequestError{Status: http.StatusInternalServerError, Message: err.Error(), Code: "internal_error"}
	if !errors.As(err, &re) && errors.Is(err, context.Canceled) {
		return 499
	}
	status := re.Status
	if status == 0 {
		status = http.StatusBadRequest
	}
	typ := "invalid_request_error"
	switch {
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status >= 500:
		typ = "server_error"
	}
	var param, code any
	if re.Param != "" {
		param = re.Param
	}
	if re.Code != "" {
		code = re.Code
	}
	if status == http.StatusServiceUnavailable {
		// a full queue drains within a request or two: ask the client to come back
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": re.Error(), "type": typ, "param": param, "code": code}})
	return status
}
