package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/minfer/minfer/core/engine"
)

// sse writes Server-Sent Events the way OpenAI's API does: each event is
// "data: <json>\n\n", and the stream ends with "data: [DONE]\n\n".
type sse struct {
	w       http.ResponseWriter
	flusher http.Flusher
	err     error
	// deadline, when set, bounds each event's write (a client that stops reading
	// ends its stream, and its generation, instead of holding the slot).
	deadline func()
}

func (e *sse) write(b []byte) error {
	if e.deadline != nil {
		e.deadline()
	}
	if _, err := e.w.Write(b); err != nil {
		return err
	}
	if e.flusher != nil {
		e.flusher.Flush()
	}
	return nil
}

func (e *sse) send(v any) error {
	if e.err != nil {
		return e.err
	}
	b, err := json.Marshal(v)
	if err != nil {
		e.err = err
		return err
	}
	buf := make([]byte, 0, len(b)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, b...)
	buf = append(buf, "\n\n"...)
	if err := e.write(buf); err != nil {
		e.err = err
		return err
	}
	return nil
}

func (e *sse) done() {
	if e.err == nil {
		e.err = e.write([]byte("data: [DONE]\n\n"))
	}
}

// chunk builds one streamed chunk with a single choice.
func (s *Server) chunk(j *job, choice map[string]any, usage bool) map[string]any {
	obj := "chat.completion.chunk"
	if !j.chat {
		obj = "text_completion"
	}
	c := map[string]any{"id": j.id, "object": obj, "created": j.created, "model": s.opts.ModelID, "choices": []map[string]any{choice}}
	if usage {
		c["usage"] = nil
	}
	return c
}

// stream generates j's reply as Server-Sent Events. free gives the slot back; it is
// called once generation ends, before the final events (the logprobs of the whole
// reply can be megabytes) are written.
func (s *Server) stream(w http.ResponseWriter, ctx context.Context, sl *slot, j *job, pl *Plugins, free func()) int {
	defer free()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	s.sendDeadline(w, j)
	w.WriteHeader(http.StatusOK)
	ev := &sse{w: w, deadline: func() { s.sendDeadline(w, j) }}
	ev.flusher, _ = w.(http.Flusher)
	textChoice := func(text string) map[string]any {
		if j.chat {
			return map[string]any{"index": 0, "delta": map[string]any{"content": text}, "logprobs": nil, "finish_reason": nil}
		}
		return map[string]any{"index": 0, "text": text, "logprobs": nil, "finish_reason": nil}
	}
	if j.chat {
		role := map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}, "logprobs": nil, "finish_reason": nil}
		if err := ev.send(s.chunk(j, role, j.usage)); err != nil {
			return 499
		}
	}
	req, lp := j.request(pl, func(text string) error {
		if text == "" {
			return nil
		}
		return ev.send(s.chunk(j, textChoice(text), j.usage))
	})
	res, err := s.generate(ctx, sl, j, req)
	free()
	if err != nil {
		if ev.err != nil || errors.Is(err, context.Canceled) {
			s.logf("%s %s: client went away", j.endpoint, j.id)
			return 499
		}
		// Headers are out: report the error as an event, as OpenAI does.
		re := &RequestError{Status: http.StatusInternalServerError, Message: err.Error(), Code: "internal_error"}
		if !errors.As(err, &re) && errors.Is(err, engine.ErrContextFull) {
			re = &RequestError{Message: err.Error(), Code: "context_length_exceeded"}
		}
		if errors.Is(err, engine.ErrPoolFull) {
			re = &RequestError{Message: "server busy: the KV memory of the running requests is spent; retry shortly (" + err.Error() + ")", Code: "kv_pool_full"}
		}
		_ = ev.send(map[string]any{"error": map[string]any{"message": re.Error(), "type": "server_error", "param": nil, "code": re.Code}})
		ev.done()
		return http.StatusOK
	}
	s.metrics.observe(res)
	// The final chunk carries the finish reason (and, when asked, all logprobs: the
	// stream's text chunks do not align with tokens).
	var final map[string]any
	var lps any
	if lp != nil {
		lps = s.logprobsJSON(j, lp.entries(len(res.Tokens)))
	}
	if j.chat {
		final = map[string]any{"index": 0, "delta": map[string]any{}, "logprobs": lps, "finish_reason": finishReason(res.Stop)}
	} else {
		final = map[string]any{"index": 0, "text": "", "logprobs": lps, "finish_reason": finishReason(res.Stop)}
	}
	fc := s.chunk(j, final, j.usage)
	fc["minfer"] = s.extension(pl, res)
	if ev.send(fc) != nil {
		return 499
	}
	if j.usage {
		u := s.chunk(j, nil, false)
		u["choices"] = []any{}
		u["usage"] = usageOf(res)
		if ev.send(u) != nil {
			return 499
		}
	}
	ev.done()
	s.logf("%s %s stream prompt=%d gen=%d stop=%s %.1f t/s", j.endpoint, j.id, res.PromptTokens, len(res.Tokens), res.Stop, res.Timings.GenTPS)
	return http.StatusOK
}
