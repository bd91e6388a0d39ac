package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/kv"
	"github.com/minfer/minfer/core/model"
	"github.com/minfer/minfer/core/tokenizer"
	"github.com/minfer/minfer/internal/enginetest"
	"github.com/minfer/minfer/internal/testpath"
)

type testResolver struct{}

func (testResolver) Resolve(_ context.Context, p Params, _ bool) (*Plugins, error) {
	for _, f := range []struct{ field, name string }{{"minfer.policy", p.Policy}, {"minfer.sampler", p.Sampler}, {"minfer.penalty", p.Penalty}} {
		if f.name != "" && f.name != "greedy" {
			return nil, badRequest(f.field, "unknown plugin %q", f.name)
		}
	}
	return &Plugins{Sampler: enginetest.Greedy{}, SamplerName: "greedy", Greedy: true, PolicyName: "none"}, nil
}

// newTestServer serves stories260K on the CPU with the given number of slots.
func newTestServer(t *testing.T, parallel int) (*Server, *httptest.Server) {
	t.Helper()
	return serveStories(t, cpu.New(cpu.Options{Threads: 1}), Options{
		ModelID: "stories260K", Parallel: parallel, QueueSize: 256, Resolver: testResolver{},
	})
}

// serveStories loads stories260K on b and serves it with opts (Tokenizer and
// NewSession filled in: sessions of 256 positions, f16 KV). Everything is closed when
// the test ends, b included.
func serveStories(t *testing.T, b backend.Backend, opts Options) (*Server, *httptest.Server) {
	t.Helper()
	srv, err := New(storiesOn(t, b, opts))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	return srv, hs
}

// storiesOptions is opts with stories260K loaded on a one-thread CPU backend.
func storiesOptions(t *testing.T, opts Options) Options {
	return storiesOn(t, cpu.New(cpu.Options{Threads: 1}), opts)
}

// storiesOn is opts with stories260K loaded on b (Tokenizer and NewSession filled
// in: sessions of 256 positions, f16 KV); the model and b are closed when the test
// ends, after whatever the caller registers to close later.
func storiesOn(t *testing.T, b backend.Backend, opts Options) Options {
	t.Helper()
	f, err := gguf.Open(testpath.Path(t, "models", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(b, f, model.Options{Name: "target"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Close()
		b.Close()
	})
	opts.Tokenizer = tok
	opts.NewSession = func() (*engine.Session, error) {
		return engine.NewSession(engine.Config{Target: m, Vocab: TokenizerVocab(tok), Ctx: 256, KVType: backend.KVF16})
	}
	return opts
}

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("response is not JSON: %v", err)
	}
	return resp.StatusCode, out
}

func TestCompletionAndChat(t *testing.T) {
	_, hs := newTestServer(t, 2)
	code, out := post(t, hs.URL+"/v1/completions", `{"prompt":"Once upon a time","max_tokens":12,"temperature":0}`)
	if code != 200 {
		t.Fatalf("completions: status %d: %v", code, out)
	}
	ch := out["choices"].([]any)[0].(map[string]any)
	if ch["text"].(string) == "" || ch["finish_reason"] != "length" {
		t.Fatalf("completions: got choice %v", ch)
	}
	if u := out["usage"].(map[string]any); u["completion_tokens"].(float64) != 12 {
		t.Fatalf("usage: got %v, want 12 completion tokens", u)
	}
	code, out = post(t, hs.URL+"/v1/chat/completions", `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Tell a story"}]}],"max_completion_tokens":8,"logprobs":true,"top_logprobs":2}`)
	if code != 200 {
		t.Fatalf("chat: status %d: %v", code, out)
	}
	ch = out["choices"].([]any)[0].(map[string]any)
	msg := ch["message"].(map[string]any)
	if msg["role"] != "assistant" {
		t.Fatalf("chat: got message %v", msg)
	}
	lp := ch["logprobs"].(map[string]any)["content"].([]any)
	if len(lp) != 8 {
		t.Fatalf("logprobs: got %d entries, want 8", len(lp))
	}
	first := lp[0].(map[string]any)
	if top := first["top_logprobs"].([]any); len(top) != 2 || first["logprob"].(float64) > 0 {
		t.Fatalf("logprobs entry: got %v", first)
	}
	if out["minfer"].(map[string]any)["spec"] == nil {
		t.Fatalf("no minfer.spec in %v", out)
	}
}

func TestSameGreedyTextStreamedAndWhole(t *testing.T) {
	_, hs := newTestServer(t, 1)
	_, out := post(t, hs.URL+"/v1/completions", `{"prompt":"The cat","max_tokens":16}`)
	want := out["choices"].([]any)[0].(map[string]any)["text"].(string)
	resp, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"The cat","max_tokens":16,"stream":true,"stream_options":{"include_usage":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type: got %q", ct)
	}
	raw, _ := io.ReadAll(resp.Body)
	got, events := parseSSE(t, string(raw))
	if got != want {
		t.Fatalf("streamed text: got %q, want %q", got, want)
	}
	last := events[len(events)-1]
	if last["usage"] == nil || len(last["choices"].([]any)) != 0 {
		t.Fatalf("last event should carry usage and no choices: %v", last)
	}
}

// parseSSE checks the framing byte for byte (every event is "data: JSON\n\n", the
// stream ends with "data: [DONE]\n\n") and returns the concatenated text.
func parseSSE(t *testing.T, raw string) (string, []map[string]any) {
	t.Helper()
	text, events, err := checkSSE(raw)
	if err != nil {
		t.Fatal(err)
	}
	return text, events
}

// checkSSE is parseSSE for any goroutine: it returns what is wrong instead of failing.
func checkSSE(raw string) (string, []map[string]any, error) {
	if !strings.HasSuffix(raw, "data: [DONE]\n\n") {
		return "", nil, fmt.Errorf("stream does not end with the [DONE] event: %q", raw[max(0, len(raw)-80):])
	}
	parts := strings.Split(strings.TrimSuffix(raw, "\n\n"), "\n\n")
	var text strings.Builder
	var events []map[string]any
	for i, p := range parts {
		if !strings.HasPrefix(p, "data: ") || strings.Contains(p, "\n") {
			return "", nil, fmt.Errorf("event %d is not one data line: %q", i, p)
		}
		payload := strings.TrimPrefix(p, "data: ")
		if payload == "[DONE]" {
			if i != len(parts)-1 {
				return "", nil, fmt.Errorf("[DONE] before the end")
			}
			break
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(payload), &ev); err != nil {
			return "", nil, fmt.Errorf("event %d: %v", i, err)
		}
		events = append(events, ev)
		for _, c := range ev["choices"].([]any) {
			ch := c.(map[string]any)
			if s, ok := ch["text"].(string); ok {
				text.WriteString(s)
			}
			if d, ok := ch["delta"].(map[string]any); ok {
				if s, ok := d["content"].(string); ok {
					text.WriteString(s)
				}
			}
		}
	}
	return text.String(), events, nil
}

func TestBadRequests(t *testing.T) {
	_, hs := newTestServer(t, 1)
	for _, tc := range []struct {
		name, path, body, param string
		code                    int
	}{
		{"malformed json", "/v1/chat/completions", `{"messages": [`, "", 400},
		{"empty body", "/v1/chat/completions", ``, "", 400},
		{"wrong type", "/v1/chat/completions", `{"messages":"hi"}`, "messages", 400},
		{"no messages", "/v1/chat/completions", `{"messages":[]}`, "messages", 400},
		{"unknown role", "/v1/chat/completions", `{"messages":[{"role":"wizard","content":"x"}]}`, "messages[0].role", 400},
		{"missing content", "/v1/chat/completions", `{"messages":[{"role":"user"}]}`, "messages[0].content", 400},
		{"n=2", "/v1/completions", `{"prompt":"a","n":2}`, "n", 400},
		{"negative max_tokens", "/v1/completions", `{"prompt":"a","max_tokens":-5}`, "max_tokens", 400},
		{"huge max_tokens type", "/v1/completions", `{"prompt":"a","max_tokens":1e40}`, "max_tokens", 400},
		{"temperature", "/v1/completions", `{"prompt":"a","temperature":9}`, "temperature", 400},
		{"stop type", "/v1/completions", `{"prompt":"a","stop":5}`, "", 400},
		{"unknown plugin", "/v1/completions", `{"prompt":"a","minfer":{"sampler":"nope"}}`, "minfer.sampler", 400},
		{"unknown extension key", "/v1/completions", `{"prompt":"a","minfer":{"polciy":"ucb"}}`, "minfer.polciy", 400},
		{"extension wrong type", "/v1/completions", `{"prompt":"a","minfer":{"draft_max":"4"}}`, "minfer.draft_max", 400},
		{"extension not an object", "/v1/completions", `{"prompt":"a","minfer":7}`, "minfer", 400},
		{"logit_bias", "/v1/completions", `{"prompt":"a","logit_bias":{"50256":-100}}`, "logit_bias", 400},
		{"json mode", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"response_format":{"type":"json_object"}}`, "response_format", 400},
		{"json schema", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"response_format":{"type":"json_schema","json_schema":{}}}`, "response_format", 400},
		{"response_format not an object", "/v1/completions", `{"prompt":"a","response_format":"json"}`, "response_format", 400},
		{"tools", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"tools":[{"type":"function","function":{"name":"f"}}]}`, "tools", 400},
		{"tool_choice", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"tool_choice":"required"}`, "tool_choice", 400},
		{"assert identity non-greedy", "/v1/completions", `{"prompt":"a","minfer":{"draft_max":99}}`, "minfer.draft_max", 400},
		{"llama-server depth bound", "/v1/completions", `{"prompt":"a","speculative.n_max":-1}`, "speculative.n_max", 400},
		{"llama-server depth bound type", "/v1/completions", `{"prompt":"a","speculative.n_max":"4"}`, "speculative.n_max", 400},
		{"prompt missing", "/v1/completions", `{}`, "prompt", 400},
		{"prompt too long", "/v1/completions", `{"prompt":"` + strings.Repeat("once upon a time ", 200) + `"}`, "prompt", 400},
		{"chat too long", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + strings.Repeat("once upon a time ", 200) + `"}]}`, "messages", 400},
		{"huge max_tokens", "/v1/completions", `{"prompt":"a","max_tokens":100000}`, "max_tokens", 400},
		{"huge max_completion_tokens", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"max_completion_tokens":2147483647}`, "max_completion_tokens", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := post(t, hs.URL+tc.path, tc.body)
			if code != tc.code {
				t.Fatalf("status: got %d, want %d (%v)", code, tc.code, out)
			}
			e, ok := out["error"].(map[string]any)
			if !ok || e["message"] == "" {
				t.Fatalf("no OpenAI error object: %v", out)
			}
			if tc.param != "" && e["param"] != tc.param {
				t.Fatalf("param: got %v, want %q (%v)", e["param"], tc.param, e["message"])
			}
		})
	}
}

func TestModelsHealthMetrics(t *testing.T) {
	_, hs := newTestServer(t, 1)
	post(t, hs.URL+"/v1/completions", `{"prompt":"a","max_tokens":2}`)
	for _, tc := range []struct{ path, want string }{
		{"/v1/models", `"stories260K"`},
		{"/health", `"ok"`},
		{"/metrics", "minfer_requests_total"},
		{"/metrics", "process_cpu_seconds_total"},
		{"/metrics", "go_goroutines"},
	} {
		resp, err := http.Get(hs.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), tc.want) {
			t.Fatalf("%s: status %d, body lacks %s:\n%s", tc.path, resp.StatusCode, tc.want, b)
		}
	}
}

// TestConcurrentStreams runs many streaming clients, some disconnecting mid-stream,
// and checks every finished response is well-formed and equals the one-at-a-time
// answer for its prompt, and that no slot or goroutine leaks.
func TestConcurrentStreams(t *testing.T) {
	srv, hs := newTestServer(t, 4)
	prompts := []string{"Once upon a time", "The dog", "Lily was", "One day"}
	want := map[string]string{}
	for _, p := range prompts {
		_, out := post(t, hs.URL+"/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":10}`, p))
		want[p] = out["choices"].([]any)[0].(map[string]any)["text"].(string)
	}
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for c := 0; c < 16; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for r := 0; r < 4; r++ {
				p := prompts[(c+r)%len(prompts)]
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/completions", strings.NewReader(fmt.Sprintf(`{"prompt":%q,"max_tokens":10,"stream":true}`, p)))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					cancel()
					errs <- err
					return
				}
				if (c+r)%5 == 0 { // disconnect after the first event
					bufio.NewReader(resp.Body).ReadString('\n')
					cancel()
					resp.Body.Close()
					continue
				}
				raw, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				cancel()
				if err != nil {
					errs <- err
					return
				}
				got, _, err := checkSSE(string(raw))
				if err != nil {
					errs <- err
					continue
				}
				if got != want[p] {
					errs <- fmt.Errorf("prompt %q: got %q, want %q", p, got, want[p])
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for srv.FreeSlots() != 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := srv.FreeSlots(); got != 4 {
		t.Fatalf("free slots after the load: got %d, want 4", got)
	}
	http.DefaultClient.CloseIdleConnections()
	for runtime.NumGoroutine() > before+4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before+4 {
		t.Fatalf("goroutines: %d after the load, %d before", g, before)
	}
}

func TestWrongMethod(t *testing.T) {
	_, hs := newTestServer(t, 1)
	for _, tc := range []struct{ method, path, allow string }{
		{"GET", "/v1/chat/completions", "POST"},
		{"POST", "/v1/models", "GET"},
	} {
		req, _ := http.NewRequest(tc.method, hs.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != tc.allow {
			t.Fatalf("%s %s: got %d Allow %q, want 405 Allow %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), tc.allow)
		}
	}
	resp, err := http.Get(hs.URL + "/v2/nothing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown path: got %d, want 404", resp.StatusCode)
	}
}

// TestNoOpFormatFieldsAccepted: the values of response_format, tools and tool_choice
// that ask for nothing minfer lacks are accepted.
func TestNoOpFormatFieldsAccepted(t *testing.T) {
	_, hs := newTestServer(t, 1)
	code, out := post(t, hs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"max_tokens":2,"response_format":{"type":"text"},"tools":[],"tool_choice":"none"}`)
	if code != 200 {
		t.Fatalf("status %d: %v", code, out)
	}
}

// TestKVPool: slots whose caches come from a block pool serve as before, /metrics
// reports the pool, and a request the pool cannot serve now (every block held by
// running sequences) gets 503 kv_pool_full with Retry-After — whole or streamed — and
// the server keeps serving once blocks are free again.
func TestKVPool(t *testing.T) {
	pool, hs := servePooled(t)
	if pool.Used() != 0 {
		t.Fatalf("%d blocks taken before any request, want 0", pool.Used())
	}
	body := `{"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}`
	code, ok := post(t, hs.URL+"/v1/completions", body)
	if code != http.StatusOK {
		t.Fatalf("status %d: %v", code, ok)
	}
	if pool.Used() == 0 {
		t.Fatal("the request took no blocks")
	}
	// every block held by running sequences (taking them back from the idle slot
	// first, as another sequence's Take would): nothing left to take back
	held := pool.Blocks()
	if err := pool.Take(held); err != nil {
		t.Fatal(err)
	}
	for _, stream := range []bool{false, true} {
		b := strings.Replace(body, "Once upon", "Far away", 1) // not the cached prefix
		if stream {
			b = strings.Replace(b, "{", `{"stream": true, `, 1)
		}
		resp, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(raw), "kv_pool_full") {
			t.Errorf("stream %v: status %d, body %s: want kv_pool_full", stream, resp.StatusCode, raw)
		}
		if !stream && (resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "") {
			t.Errorf("status %d, Retry-After %q: want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"minfer_kv_pool_bytes 65536", "minfer_kv_pool_used_bytes", "minfer_kv_pool_used_ratio 1"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	pool.Give(held)
	if code, out := post(t, hs.URL+"/v1/completions", body); code != http.StatusOK {
		t.Fatalf("after blocks came back: status %d: %v", code, out)
	}
}

// TestSlotsSharePrefix: on paged caches a request that lands on a fresh slot while
// another slot generates from the same long prompt prefix takes that prefix from the
// other slot's cache (cached_tokens > 0 on a slot that never ran) and replies exactly
// what it replies on a server without sharing.
func TestSlotsSharePrefix(t *testing.T) {
	const prefix = "Once upon a time there was a little girl named Lily. She loved to play outside in the sun with her friends."
	bodyB := fmt.Sprintf(`{"prompt": %q, "max_tokens": 8, "temperature": 0}`, prefix+" One day her dog")
	reply := func(out map[string]any) (string, int) {
		t.Helper()
		text := out["choices"].([]any)[0].(map[string]any)["text"].(string)
		usage, _ := out["usage"].(map[string]any)
		details, _ := usage["prompt_tokens_details"].(map[string]any)
		n, _ := details["cached_tokens"].(float64)
		return text, int(n)
	}
	_, _, plain := servePool(t, false)
	code, out := post(t, plain.URL+"/v1/completions", bodyB)
	if code != http.StatusOK {
		t.Fatalf("status %d: %v", code, out)
	}
	want, _ := reply(out)
	pool, _, hs := servePool(t, true)
	// A holds slot 1, generating, its prompt's prefill done (its first event is out)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/completions", strings.NewReader(
		fmt.Sprintf(`{"prompt": %q, "max_tokens": 200, "temperature": 0, "stream": true}`, prefix+" The sun")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	code, out = post(t, hs.URL+"/v1/completions", bodyB)
	if code != http.StatusOK {
		t.Fatalf("status %d: %v", code, out)
	}
	got, cached := reply(out)
	if cached == 0 {
		t.Error("the second slot's first request reused nothing, want the prefix the first slot holds")
	}
	if got != want {
		t.Errorf("with a shared prefix: %q, without: %q", got, want)
	}
	// the pool counts the shared blocks once, and /metrics says what sharing saves
	m := scrapeMetrics(t, hs.URL)
	if shared := m["minfer_kv_pool_shared_bytes"]; shared <= 0 || shared != float64(pool.SharedBytes()) {
		t.Errorf("minfer_kv_pool_shared_bytes %v (the pool: %d), want more than 0 while both slots hold the prefix", shared, pool.SharedBytes())
	}
	if phys, used := m["minfer_kv_pool_physical_bytes"], m["minfer_kv_pool_used_bytes"]; phys <= 0 || phys > used {
		t.Errorf("minfer_kv_pool_physical_bytes %v, used %v: want more than 0, at most used", phys, used)
	}
}

// scrapeMetrics is the server's /metrics samples without labels, by name.
func scrapeMetrics(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		name, val, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") || strings.Contains(name, "{") {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			out[name] = v
		}
	}
	return out
}

// TestCachedTokensAsReused: cached_tokens is what the engine reused, also when the
// pool takes the chosen slot's blocks back between the choice (made for its cached
// prefix) and the generation: the engine then recomputes the prompt, and the request
// reports 0, not the prefix its slot held when it was chosen.
func TestCachedTokensAsReused(t *testing.T) {
	pool, srv, hs := servePooledServer(t)
	body := `{"prompt": "Once upon a time there was", "max_tokens": 4, "temperature": 0}`
	cached := func() int {
		t.Helper()
		code, out := post(t, hs.URL+"/v1/completions", body)
		if code != http.StatusOK {
			t.Fatalf("status %d: %v", code, out)
		}
		usage, _ := out["usage"].(map[string]any)
		details, _ := usage["prompt_tokens_details"].(map[string]any)
		n, ok := details["cached_tokens"].(float64)
		if !ok {
			t.Fatalf("no usage.prompt_tokens_details.cached_tokens in %v", out)
		}
		return int(n)
	}
	cached()
	want := cached()
	if want == 0 {
		t.Fatal("the repeated request reused nothing, want its prompt's prefix")
	}
	srv.beforeGenerate = func() { // the slot is chosen, its session not yet busy
		all := pool.Blocks()
		if err := pool.Take(all); err != nil {
			t.Error(err)
			return
		}
		pool.Give(all)
	}
	if got := cached(); got != 0 {
		t.Errorf("blocks taken back after the slot was chosen: cached_tokens %d, want 0 (the engine recomputed the prompt)", got)
	}
	srv.beforeGenerate = nil
	// That slot's record went stale with the reclaim, so the next repeat may go to
	// either slot; the one after finds the prefix again.
	cached()
	if got := cached(); got != want {
		t.Errorf("a later repeat: cached_tokens %d, want %d", got, want)
	}
}

// servePooled serves stories260K on two slots whose caches come from a pool of 16
// blocks of 32 positions.
func servePooled(t *testing.T) (*kv.Pool, *httptest.Server) {
	t.Helper()
	pool, _, hs := servePooledServer(t)
	return pool, hs
}

// servePooledServer is servePooled, with the Server.
func servePooledServer(t *testing.T) (*kv.Pool, *Server, *httptest.Server) {
	t.Helper()
	return servePool(t, false)
}

// servePool is servePooledServer, the caches paged (engine.Paging) when paged.
func servePool(t *testing.T, paged bool) (*kv.Pool, *Server, *httptest.Server) {
	t.Helper()
	pool, err := kv.NewPool(32, 16, 4096)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(testpath.Path(t, "models", "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	b := cpu.New(cpu.Options{Threads: 1})
	m, err := model.Load(b, f, model.Options{Name: "target"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); b.Close() })
	var paging *engine.Paging
	if paged {
		if paging, err = engine.NewPaging(pool, m, nil, backend.KVF16, backend.KVF16); err != nil || paging == nil {
			t.Fatalf("NewPaging: %v, %v", paging, err)
		}
		t.Cleanup(paging.Close) // after the server's Close, which closes the sessions
	}
	srv, err := New(Options{ModelID: "stories260K", Parallel: 2, QueueSize: 8, Resolver: testResolver{}, KVPool: pool, Tokenizer: tok,
		NewSession: func() (*engine.Session, error) {
			return engine.NewSession(engine.Config{Target: m, Vocab: TokenizerVocab(tok), Ctx: 256, KVType: backend.KVF16, Pool: pool, Paging: paging})
		}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return pool, srv, hs
}

// TestKVPoolReclaimForgetsPrefix: once the pool takes an idle slot's blocks back (its
// session forgets the sequence), the server no longer counts that slot's old prefix as
// cached: the repeated request reports cached_tokens 0, as the engine recomputed it,
// and the request after it (nothing taken back) reuses the prefix again.
func TestKVPoolReclaimForgetsPrefix(t *testing.T) {
	pool, hs := servePooled(t)
	body := `{"prompt": "Once upon a time there was", "max_tokens": 4, "temperature": 0}`
	cached := func() int {
		t.Helper()
		code, out := post(t, hs.URL+"/v1/completions", body)
		if code != http.StatusOK {
			t.Fatalf("status %d: %v", code, out)
		}
		usage, _ := out["usage"].(map[string]any)
		details, _ := usage["prompt_tokens_details"].(map[string]any)
		n, ok := details["cached_tokens"].(float64)
		if !ok {
			t.Fatalf("no usage.prompt_tokens_details.cached_tokens in %v", out)
		}
		return int(n)
	}
	cached()
	if got := cached(); got == 0 {
		t.Fatal("the repeated request reused nothing, want its prompt's prefix")
	}
	all := pool.Blocks() // takes back every idle slot's blocks
	if err := pool.Take(all); err != nil {
		t.Fatal(err)
	}
	pool.Give(all)
	if got := cached(); got != 0 {
		t.Errorf("after the pool took the slots' blocks back: cached_tokens %d, want 0", got)
	}
	if got := cached(); got == 0 {
		t.Error("the next repeat reused nothing, want its prompt's prefix")
	}
}
