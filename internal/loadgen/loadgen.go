// Package loadgen sends concurrent OpenAI-API load to a server — minfer serve,
// llama-server, vLLM or anything that speaks /v1/chat/completions or /v1/completions —
// and measures what operators compare servers by: aggregate completion tokens per
// second, request latency, time to first token and inter-token latency (the last two
// when streaming). `minfer loadgen` is its command line.
//
// Each of Clients clients sends Requests requests in turn, so at most Clients are in
// flight. Every prompt is distinct (no server can answer one request from another's
// prompt cache), after the System prompt they all start with when one is set (what a
// server's prefix caching serves). The run is bounded: Clients×Requests requests, each with Timeout, and
// ctx ends it early.
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Options describe a load run.
type Options struct {
	// URL is the server's base URL (http://127.0.0.1:8080); a trailing /v1 is allowed.
	URL string
	// Clients run concurrently; each sends Requests requests one after another.
	Clients, Requests int
	// MaxTokens is each request's max_tokens; Temperature its temperature.
	MaxTokens   int
	Temperature float64
	// Stream asks for server-sent events (and then measures TTFT and inter-token latency).
	Stream bool
	// Completions sends /v1/completions with a prompt instead of chat messages.
	Completions bool
	// System, when set, starts every request: a system message before the user's, or
	// with Completions the start of the prompt (a blank line, then the request's own
	// text). A server that shares cached prefixes computes it once, not per request.
	System string
	// Model is the request's "model" field (servers that serve one model ignore it).
	Model string
	// APIKey, when set, is sent as "Authorization: Bearer KEY".
	APIKey string
	// Extra is merged into every request body (e.g. {"ignore_eos": true} for llama-server).
	Extra map[string]any
	// Timeout bounds each request (default 10 minutes).
	Timeout time.Duration
	// Client is the HTTP client (default: one with no overall timeout; Timeout applies).
	Client *http.Client
}

// Percentiles of a set of durations, in seconds.
type Percentiles struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Result is one run's figures (the JSON `minfer loadgen --json` prints).
type Result struct {
	URL        string `json:"url"`
	Clients    int    `json:"clients"`
	Requests   int    `json:"requests"`
	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	Stream     bool   `json:"stream"`
	// CompletionTokens is the sum of the successful replies' usage.completion_tokens
	// (streamed replies without usage count their content chunks).
	CompletionTokens int     `json:"completion_tokens"`
	WallS            float64 `json:"wall_s"`
	// TokPerS is CompletionTokens over the run's wall time: the aggregate throughput.
	TokPerS    float64 `json:"tok_per_s"`
	MeanTokens float64 `json:"mean_tokens"`
	// LatencyS is each successful request's time from sending to the reply's end.
	LatencyS Percentiles `json:"latency_s"`
	// TTFTS (time to first content) and ITLS (gaps between content chunks), streaming only.
	TTFTS *Percentiles `json:"ttft_s,omitempty"`
	ITLS  *Percentiles `json:"itl_s,omitempty"`
}

// outcome is one request's measurement.
type outcome struct {
	tokens  int
	latency time.Duration
	ttft    time.Duration
	gaps    []time.Duration
	err     error
}

var words = strings.Fields("river stone garden lantern violet orbit copper meadow signal harbor winter " +
	"ember canyon silver thread compass window pocket marble island")

// Prompt is the text of request i: distinct per request.
func Prompt(i int) string {
	w := make([]string, 24)
	for k := range w {
		w[k] = words[(i*7+k*3)%len(words)]
	}
	return fmt.Sprintf("Request %d. Continue this list of words without stopping: %s", i, strings.Join(w, " "))
}

// Run sends the load and returns its figures. It fails only on bad options; failed
// requests are counted in Errors (the first one quoted), since a server under load
// that refuses some requests is a result, not a broken run.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Clients < 1 || o.Requests < 1 || o.MaxTokens < 1 {
		return nil, fmt.Errorf("loadgen: clients %d, requests %d, max tokens %d: each must be ≥ 1", o.Clients, o.Requests, o.MaxTokens)
	}
	base := strings.TrimSuffix(strings.TrimSuffix(o.URL, "/"), "/v1")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, fmt.Errorf("loadgen: URL %q: want http://HOST:PORT", o.URL)
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Minute
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	var (
		mu  sync.Mutex
		out []outcome
		wg  sync.WaitGroup
	)
	t0 := time.Now()
	for c := range o.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range o.Requests {
				if ctx.Err() != nil {
					return
				}
				oc := one(ctx, o, base, c*1000+r)
				mu.Lock()
				out = append(out, oc)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0)
	return summarize(o, base, out, wall), nil
}

func summarize(o Options, base string, out []outcome, wall time.Duration) *Result {
	res := &Result{URL: base, Clients: o.Clients, Requests: len(out), Stream: o.Stream, WallS: wall.Seconds()}
	var lat, ttft, gaps []time.Duration
	ok := 0
	for _, oc := range out {
		if oc.err != nil {
			if res.Errors == 0 {
				res.FirstError = oc.err.Error()
			}
			res.Errors++
			continue
		}
		ok++
		res.CompletionTokens += oc.tokens
		lat = append(lat, oc.latency)
		if o.Stream && oc.ttft > 0 {
			ttft = append(ttft, oc.ttft)
			gaps = append(gaps, oc.gaps...)
		}
	}
	if wall > 0 {
		res.TokPerS = float64(res.CompletionTokens) / wall.Seconds()
	}
	if ok > 0 {
		res.MeanTokens = float64(res.CompletionTokens) / float64(ok)
	}
	res.LatencyS = percentiles(lat)
	if o.Stream {
		t, g := percentiles(ttft), percentiles(gaps)
		res.TTFTS, res.ITLS = &t, &g
	}
	return res
}

// percentiles by the nearest-rank rule (the value at ceil(p·n)).
func percentiles(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(p float64) float64 {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)].Seconds()
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Percentiles{P50: at(0.5), P90: at(0.9), P95: at(0.95), P99: at(0.99), Max: s[len(s)-1].Seconds(),
		Mean: sum.Seconds() / float64(len(s))}
}

// one sends request i and measures it.
func one(ctx context.Context, o Options, base string, i int) outcome {
	body := map[string]any{"model": o.Model, "max_tokens": o.MaxTokens, "temperature": o.Temperature}
	path := "/v1/chat/completions"
	if o.Completions {
		path = "/v1/completions"
		body["prompt"] = Prompt(i)
		if o.System != "" {
			body["prompt"] = o.System + "\n\n" + Prompt(i)
		}
	} else {
		msgs := []map[string]string{{"role": "user", "content": Prompt(i)}}
		if o.System != "" {
			msgs = append([]map[string]string{{"role": "system", "content": o.System}}, msgs...)
		}
		body["messages"] = msgs
	}
	if o.Stream {
		body["stream"] = true
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	for k, v := range o.Extra {
		body[k] = v
	}
	data, err := json.Marshal(body)
	if err != nil {
		return outcome{err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(data))
	if err != nil {
		return outcome{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	t0 := time.Now()
	resp, err := o.Client.Do(req)
	if err != nil {
		return outcome{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return outcome{err: fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg))}
	}
	if o.Stream {
		return readStream(resp.Body, t0)
	}
	var r struct {
		Usage *struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&r); err != nil {
		return outcome{err: fmt.Errorf("reply: %w", err)}
	}
	if r.Usage == nil {
		return outcome{err: errors.New("reply has no usage")}
	}
	return outcome{tokens: r.Usage.CompletionTokens, latency: time.Since(t0)}
}

// readStream reads server-sent events until [DONE]: the first content chunk's arrival
// is the TTFT, the gaps between content chunks the inter-token latencies; the final
// usage chunk (stream_options.include_usage) gives the token count, else the content
// chunks are counted.
func readStream(r io.Reader, t0 time.Time) outcome {
	var (
		oc     outcome
		last   time.Time
		chunks int
		usage  = -1
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data:") {
			continue
		}
		payload := strings.TrimSpace(strings.TrimPrefix(line, "data:"))
		if payload == "[DONE]" {
			break
		}
		var ev struct {
			Choices []struct {
				Text  string `json:"text"`
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(payload), &ev); err != nil {
			return outcome{err: fmt.Errorf("stream event: %w", err)}
		}
		if len(ev.Error) > 0 && string(ev.Error) != "null" {
			return outcome{err: fmt.Errorf("stream error: %s", ev.Error)}
		}
		if ev.Usage != nil {
			usage = ev.Usage.CompletionTokens
		}
		if len(ev.Choices) == 0 || ev.Choices[0].Delta.Content+ev.Choices[0].Text == "" {
			continue
		}
		now := time.Now()
		if chunks == 0 {
			oc.ttft = now.Sub(t0)
		} else {
			oc.gaps = append(oc.gaps, now.Sub(last))
		}
		last = now
		chunks++
	}
	if err := sc.Err(); err != nil {
		return outcome{err: fmt.Errorf("stream: %w", err)}
	}
	oc.latency = time.Since(t0)
	oc.tokens = chunks
	if usage >= 0 {
		oc.tokens = usage
	}
	return oc
}
