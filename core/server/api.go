package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/minfer/minfer/internal/jsonkind"
)

// RequestError is a client mistake: the server answers 400 (or Status) with an
// OpenAI-style error object naming Param.
type RequestError struct {
	Status  int    // 0 means 400
	Param   string // the offending field, e.g. "messages[1].role"
	Message string
	Code    string // OpenAI error code, e.g. "context_length_exceeded"
}

func (e *RequestError) Error() string {
	if e.Param == "" {
		return e.Message
	}
	return e.Param + ": " + e.Message
}

func badRequest(param, format string, args ...any) *RequestError {
	return &RequestError{Param: param, Message: fmt.Sprintf(format, args...)}
}

// stopList accepts a string or a list of strings (OpenAI's "stop").
type stopList []string

func (s *stopList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*s = nil
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = stopList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("want a string or a list of strings")
	}
	*s = many
	return nil
}

// content accepts a string or a list of content parts [{"type":"text","text":…}].
type content struct {
	text string
	set  bool
}

func (c *content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	c.set = true
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &c.text)
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return errors.New("want a string or a list of content parts")
	}
	var sb strings.Builder
	for i, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return fmt.Errorf("part %d: only {\"type\":\"text\",\"text\":…} parts are supported", i)
		}
		sb.WriteString(*p.Text)
	}
	c.text = sb.String()
	return nil
}

type chatMessage struct {
	Role    string  `json:"role"`
	Content content `json:"content"`
	Name    string  `json:"name,omitempty"`
}

// Extension is the request's "minfer" field: plugin choices among those the config
// allows, a depth bound, and the greedy-identity assertion.
type Extension struct {
	Policy   string `json:"policy"`
	Sampler  string `json:"sampler"`
	Penalty  string `json:"penalty"`
	DraftMax *int   `json:"draft_max"`
	// Drafter replaces [spec] drafter for the request: drafter plugin names,
	// comma-separated ("ngram", "ngram,suffix"), or "none" (or "") for none; the
	// draft model, when the server has one, drafts as well.
	Drafter        *string `json:"drafter"`
	AssertIdentity bool    `json:"assert_identity"`
}

// UnmarshalJSON decodes strictly: an unknown key in the extension is a mistake worth
// a 400 (a misspelt "polciy" would otherwise silently run the default policy).
func (x *Extension) UnmarshalJSON(b []byte) error {
	type plain Extension
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var v plain
	if err := d.Decode(&v); err != nil {
		msg := err.Error()
		if k, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			return badRequest("minfer."+strings.Trim(k, `"`), "unknown field (known: policy, sampler, penalty, drafter, draft_max, assert_identity)")
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return badRequest("minfer."+te.Field, "wrong type: got JSON %s, want %s", te.Value, jsonkind.Of(te.Type))
		}
		return badRequest("minfer", "want an object such as {\"policy\": \"adaptive\"}")
	}
	*x = Extension(v)
	return nil
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// commonRequest holds the fields chat and text completions share.
type commonRequest struct {
	Model               string          `json:"model"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int            `json:"top_k"`
	MinP                *float64        `json:"min_p"`
	Seed                *int64          `json:"seed"`
	Stop                stopList        `json:"stop"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	RepeatPenalty       *float64        `json:"repeat_penalty"`
	RepeatLastN         *int            `json:"repeat_last_n"`
	Logprobs            json.RawMessage `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
	N                   *int            `json:"n"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	Minfer              *Extension      `json:"minfer"`
	// SpecNMax is llama-server's per-request depth bound, read as minfer.draft_max
	// (which wins when both are set), so llama.cpp's clients bound speculation too.
	SpecNMax  *int               `json:"speculative.n_max"`
	LogitBias map[string]float64 `json:"logit_bias"`
	// IgnoreEOS is llama-server's and vLLM's ignore_eos: generate through
	// end-of-generation tokens until max_tokens (benchmarks; engine.Request.IgnoreEOG).
	IgnoreEOS bool `json:"ignore_eos"`
	// Not implemented, refused by name rather than ignored (a 200 with free text
	// would read as JSON mode or tool calling working).
	ResponseFormat json.RawMessage `json:"response_format"`
	Tools          json.RawMessage `json:"tools"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
}

type chatRequest struct {
	commonRequest
	Messages []chatMessage `json:"messages"`
}

type completionRequest struct {
	commonRequest
	Prompt json.RawMessage `json:"prompt"`
}

// decodeJSON decodes a request body, turning decoder errors into RequestErrors that
// name the field.
func decodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("", "empty request body: want a JSON object")
	}
	d := json.NewDecoder(bytes.NewReader(body))
	if err := d.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		var re *RequestError
		switch {
		case errors.As(err, &re):
			return re
		case errors.As(err, &te):
			return badRequest(strings.TrimPrefix(te.Field, "commonRequest."), "wrong type: got JSON %s, want %s", te.Value, jsonkind.Of(te.Type))
		case errors.As(err, &se):
			return badRequest("", "malformed JSON at byte %d: %v", se.Offset, err)
		default:
			msg := err.Error()
			// Errors from our UnmarshalJSON methods come wrapped with the field path.
			return badRequest("", "invalid request: %s", strings.TrimPrefix(msg, "json: "))
		}
	}
	if d.More() {
		return badRequest("", "malformed JSON: trailing data after the object")
	}
	return nil
}

// Params are a request's sampling and plugin choices, after validation, with nil
// meaning "the configured default". The Resolver turns them into plugin instances.
type Params struct {
	Temperature      *float64
	TopP             *float64
	TopK             *int
	MinP             *float64
	Seed             *int64
	PresencePenalty  *float64
	FrequencyPenalty *float64
	RepeatPenalty    *float64
	RepeatLastN      *int
	Policy           string // "" = configured default
	Sampler          string
	Penalty          string
	DraftMax         *int
	Drafter          *string // nil = configured default ([spec] drafter)
}

// validate checks the shared fields and returns the generation budget and Params.
// unsupported refuses response_format other than text, and tools: minfer neither
// constrains output to JSON nor parses tool calls out of it.
func (r *commonRequest) unsupported() error {
	if set(r.ResponseFormat) {
		var rf struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(r.ResponseFormat, &rf); err != nil || rf.Type == "" {
			return badRequest("response_format", `want an object {"type": "text"}`)
		}
		if rf.Type != "text" {
			return badRequest("response_format", "type %q is not supported: minfer does not constrain output to JSON (only \"text\")", rf.Type)
		}
	}
	if set(r.Tools) && string(bytes.TrimSpace(r.Tools)) != "[]" {
		return badRequest("tools", "not supported: minfer does not parse tool calls out of the output")
	}
	if set(r.ToolChoice) {
		var s string
		if json.Unmarshal(r.ToolChoice, &s) != nil || s != "none" && s != "auto" {
			return badRequest("tool_choice", "not supported: minfer does not call tools (only \"none\" or \"auto\" without tools)")
		}
	}
	return nil
}

// set reports whether a raw JSON field was given a value other than null.
func set(v json.RawMessage) bool { return len(v) > 0 && string(bytes.TrimSpace(v)) != "null" }

func (r *commonRequest) validate(maxCap int) (maxTokens int, logprobs int, p Params, err error) {
	if len(r.LogitBias) > 0 {
		return 0, 0, p, badRequest("logit_bias", "not supported by the built-in samplers; a sampler plugin can bias logits (examples/logit-bias-sampler)")
	}
	if err := r.unsupported(); err != nil {
		return 0, 0, p, err
	}
	if r.N != nil && *r.N != 1 {
		return 0, 0, p, badRequest("n", "only n=1 is supported, got %d", *r.N)
	}
	maxTokens = -1
	for _, f := range []struct {
		name string
		v    *int
	}{{"max_tokens", r.MaxTokens}, {"max_completion_tokens", r.MaxCompletionTokens}} {
		if f.v == nil {
			continue
		}
		if *f.v < 1 {
			return 0, 0, p, badRequest(f.name, "must be at least 1, got %d", *f.v)
		}
		if maxCap > 0 && *f.v > maxCap {
			return 0, 0, p, badRequest(f.name, "must be at most %d, got %d", maxCap, *f.v)
		}
		maxTokens = *f.v
	}
	if maxTokens < 0 && maxCap > 0 {
		maxTokens = maxCap
	}
	checkRange := func(name string, v *float64, lo, hi float64) error {
		if v != nil && (*v < lo || *v > hi || *v != *v) {
			return badRequest(name, "must be in [%g, %g], got %g", lo, hi, *v)
		}
		return nil
	}
	for _, c := range []struct {
		name   string
		v      *float64
		lo, hi float64
	}{
		{"temperature", r.Temperature, 0, 2},
		{"top_p", r.TopP, 0, 1},
		{"min_p", r.MinP, 0, 1},
		{"presence_penalty", r.PresencePenalty, -2, 2},
		{"frequency_penalty", r.FrequencyPenalty, -2, 2},
		{"repeat_penalty", r.RepeatPenalty, 0, 10},
	} {
		if err := checkRange(c.name, c.v, c.lo, c.hi); err != nil {
			return 0, 0, p, err
		}
	}
	// the samplers need a non-empty nucleus and a positive penalty divisor (as vLLM
	// and minfer.toml require)
	for _, c := range []struct {
		name string
		v    *float64
	}{{"top_p", r.TopP}, {"repeat_penalty", r.RepeatPenalty}} {
		if c.v != nil && *c.v == 0 {
			return 0, 0, p, badRequest(c.name, "must be > 0, got 0")
		}
	}
	if r.Seed != nil && *r.Seed < -1 {
		return 0, 0, p, badRequest("seed", "must be -1 (random) or ≥ 0, got %d", *r.Seed)
	}
	if r.TopK != nil && *r.TopK < 0 {
		return 0, 0, p, badRequest("top_k", "must be ≥ 0, got %d", *r.TopK)
	}
	if r.RepeatLastN != nil && *r.RepeatLastN < -1 {
		return 0, 0, p, badRequest("repeat_last_n", "must be ≥ -1, got %d", *r.RepeatLastN)
	}
	logprobs, err = r.logprobs()
	if err != nil {
		return 0, 0, p, err
	}
	for i, s := range r.Stop {
		if s == "" {
			return 0, 0, p, badRequest(fmt.Sprintf("stop[%d]", i), "empty stop string")
		}
	}
	p = Params{
		Temperature: r.Temperature, TopP: r.TopP, TopK: r.TopK, MinP: r.MinP, Seed: r.Seed,
		PresencePenalty: r.PresencePenalty, FrequencyPenalty: r.FrequencyPenalty,
		RepeatPenalty: r.RepeatPenalty, RepeatLastN: r.RepeatLastN,
	}
	if n := r.SpecNMax; n != nil {
		if *n < 0 || *n > 64 {
			return 0, 0, p, badRequest("speculative.n_max", "must be in [0, 64], got %d", *n)
		}
		p.DraftMax = n
	}
	if x := r.Minfer; x != nil {
		p.Policy, p.Sampler, p.Penalty, p.Drafter = x.Policy, x.Sampler, x.Penalty, x.Drafter
		if x.DraftMax != nil && (*x.DraftMax < 0 || *x.DraftMax > 64) {
			return 0, 0, p, badRequest("minfer.draft_max", "must be in [0, 64], got %d", *x.DraftMax)
		}
		if x.DraftMax != nil {
			p.DraftMax = x.DraftMax
		}
	}
	return maxTokens, logprobs, p, nil
}

// logprobs returns the number of alternatives per token to report (0 = none, -1 =
// only the chosen token's). Chat sends logprobs: bool + top_logprobs; completions send
// logprobs: int.
func (r *commonRequest) logprobs() (int, error) {
	top := 0
	if r.TopLogprobs != nil {
		if *r.TopLogprobs < 0 || *r.TopLogprobs > 20 {
			return 0, badRequest("top_logprobs", "must be in [0, 20], got %d", *r.TopLogprobs)
		}
		top = *r.TopLogprobs
	}
	raw := bytes.TrimSpace(r.Logprobs)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")) || bytes.Equal(raw, []byte("false")):
		if r.TopLogprobs != nil && *r.TopLogprobs > 0 {
			return 0, badRequest("top_logprobs", "needs logprobs: true")
		}
		return 0, nil
	case bytes.Equal(raw, []byte("true")):
		if top == 0 {
			return -1, nil
		}
		return top, nil
	default:
		var n int
		if err := json.Unmarshal(raw, &n); err != nil || n < 0 || n > 20 {
			return 0, badRequest("logprobs", "want true/false (chat) or an integer in [0, 20] (completions)")
		}
		if n == 0 {
			return -1, nil
		}
		return n, nil
	}
}
