package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServer answers chat and text completions as an OpenAI server does: n tokens
// (n = max_tokens), streamed as one chunk per token when asked, failing every
// failEvery-th request with a 503. It records the largest number of requests in flight
// and the prompts it saw.
type fakeServer struct {
	failEvery          int64
	count, inFlight    atomic.Int64
	maxInFlight        atomic.Int64
	mu                 sync.Mutex
	prompts            map[string]bool
	systems            map[string]int // system prompts seen (message, or the prompt's first paragraph)
	withUsage, auth    bool
	sawAuth, sawModels atomic.Bool
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.count.Add(1)
	cur := f.inFlight.Add(1)
	defer f.inFlight.Add(-1)
	for old := f.maxInFlight.Load(); cur > old && !f.maxInFlight.CompareAndSwap(old, cur); old = f.maxInFlight.Load() {
	}
	if r.Header.Get("Authorization") == "Bearer k" {
		f.sawAuth.Store(true)
	}
	var body struct {
		MaxTokens int                 `json:"max_tokens"`
		Stream    bool                `json:"stream"`
		Prompt    string              `json:"prompt"`
		Messages  []map[string]string `json:"messages"`
		Extra     bool                `json:"ignore_eos"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	text, sys := body.Prompt, ""
	if r.URL.Path == "/v1/chat/completions" {
		last := body.Messages[len(body.Messages)-1]
		text = last["content"]
		if len(body.Messages) == 2 && body.Messages[0]["role"] == "system" && last["role"] == "user" {
			sys = body.Messages[0]["content"]
		}
	} else if s, rest, ok := strings.Cut(text, "\n\n"); ok {
		sys, text = s, rest
	}
	f.mu.Lock()
	f.prompts[text] = true
	if sys != "" {
		f.systems[sys]++
	}
	f.mu.Unlock()
	time.Sleep(5 * time.Millisecond) // requests overlap
	if f.failEvery > 0 && n%f.failEvery == 0 {
		http.Error(w, `{"error":{"message":"busy"}}`, http.StatusServiceUnavailable)
		return
	}
	if !body.Stream {
		fmt.Fprintf(w, `{"choices":[{"message":{"content":"x"}}],"usage":{"completion_tokens":%d}}`, body.MaxTokens)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for range body.MaxTokens {
		if r.URL.Path == "/v1/chat/completions" {
			fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"t\"}}]}\n\n")
		} else {
			fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"t\"}]}\n\n")
		}
		fl.Flush()
		time.Sleep(time.Millisecond)
	}
	if f.withUsage {
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"completion_tokens\":%d}}\n\n", body.MaxTokens+1)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name        string
		stream      bool
		completions bool
		usage       bool
		failEvery   int64
		wantTokens  int
		wantErrors  int
		system      string
	}{
		{"chat", false, false, false, 0, 6 * 3 * 4, 0, ""},
		{"chat stream", true, false, false, 0, 6 * 3 * 4, 0, ""},
		{"chat stream with usage", true, false, true, 0, 6 * 3 * 5, 0, ""},
		{"completions stream", true, true, false, 0, 6 * 3 * 4, 0, ""},
		{"errors counted", false, false, false, 3, 6 * 2 * 4, 6, ""},
		{"chat with a system prompt", false, false, false, 0, 6 * 3 * 4, 0, "You are terse."},
		{"completions with a system prompt", false, true, false, 0, 6 * 3 * 4, 0, "You are terse."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeServer{failEvery: tc.failEvery, prompts: map[string]bool{}, systems: map[string]int{}, withUsage: tc.usage}
			srv := httptest.NewServer(f)
			defer srv.Close()
			res, err := Run(context.Background(), Options{URL: srv.URL + "/v1", Clients: 3, Requests: 6, MaxTokens: 4,
				Stream: tc.stream, Completions: tc.completions, APIKey: "k", Extra: map[string]any{"ignore_eos": true}, System: tc.system})
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests != 18 || res.Errors != tc.wantErrors || res.CompletionTokens != tc.wantTokens {
				t.Errorf("requests %d errors %d tokens %d; want 18, %d, %d", res.Requests, res.Errors, res.CompletionTokens, tc.wantErrors, tc.wantTokens)
			}
			if tc.wantErrors > 0 && !strings.Contains(res.FirstError, "HTTP 503") {
				t.Errorf("first error %q, want the 503", res.FirstError)
			}
			if got := f.maxInFlight.Load(); got > 3 {
				t.Errorf("%d requests in flight, want at most the 3 clients", got)
			}
			if len(f.prompts) != 18 {
				t.Errorf("%d distinct prompts, want 18", len(f.prompts))
			}
			if want := map[bool]int{true: 18}[tc.system != ""]; f.systems[tc.system] != want || len(f.systems) > 1 {
				t.Errorf("system prompts seen %v, want %q in %d requests", f.systems, tc.system, want)
			}
			if !f.sawAuth.Load() {
				t.Error("the API key was not sent")
			}
			if res.TokPerS <= 0 || res.LatencyS.P50 <= 0 || res.LatencyS.Max < res.LatencyS.P95 {
				t.Errorf("figures %+v", res)
			}
			if tc.stream != (res.TTFTS != nil) || (tc.stream && (res.TTFTS.P50 <= 0 || res.ITLS.P50 <= 0)) {
				t.Errorf("stream %v: ttft %+v itl %+v", tc.stream, res.TTFTS, res.ITLS)
			}
		})
	}
}

func TestRunErrors(t *testing.T) {
	for _, o := range []Options{
		{URL: "http://127.0.0.1:1", Clients: 0, Requests: 1, MaxTokens: 1},
		{URL: "127.0.0.1:8080", Clients: 1, Requests: 1, MaxTokens: 1},
	} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("%+v: want an error", o)
		}
	}
	// A server that is not there: every request is an error, the run still returns.
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	res, err := Run(context.Background(), Options{URL: url, Clients: 2, Requests: 2, MaxTokens: 1, Timeout: 5 * time.Second})
	if err != nil || res.Errors != 4 || res.FirstError == "" {
		t.Errorf("unreachable server: %+v, %v; want 4 errors", res, err)
	}
}

func TestPercentiles(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	p := percentiles(ds)
	if p.P50 != 0.05 || p.P90 != 0.09 || p.P95 != 0.095 || p.P99 != 0.099 || p.Max != 0.1 {
		t.Errorf("percentiles of 1..100 ms: %+v", p)
	}
	if got := percentiles(nil); got != (Percentiles{}) {
		t.Errorf("empty: %+v", got)
	}
}
