package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/tokenizer"
)

// TestHostileChatTemplateKeepsServing: a chat template that recurses, allocates
// without end or loops for ever (before renders were bounded: a fatal stack overflow
// on the first chat request, a fatal out of memory, a render that ignored shutdown)
// answers 400 naming the template and the limit, and the server keeps serving.
func TestHostileChatTemplateKeepsServing(t *testing.T) {
	for _, tc := range []struct{ name, src, limit string }{
		{"recursion", `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`, "nesting depth exceeds"},
		{"range", `{% for i in range(1000000000) %}{{ i }}{% endfor %}`, "items in one list exceeds"},
		{"loops", `{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`, ""}, // steps, or time on a loaded machine
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, hs := serveStories(t, cpu.New(cpu.Options{Threads: 1}), Options{
				ModelID: "stories260K", Parallel: 1, QueueSize: 4, Resolver: testResolver{}, ChatTemplate: Template{Text: tc.src, Name: "hostile.jinja"},
			})
			code, out := post(t, hs.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
			msg, _ := out["error"].(map[string]any)["message"].(string)
			if code != http.StatusBadRequest || !strings.Contains(msg, "chat template hostile.jinja: render stopped: "+tc.limit) {
				t.Fatalf("got %d %q, want 400 naming the template and %q", code, msg, tc.limit)
			}
			resp, err := http.Get(hs.URL + "/health")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("/health after the render: %v %v", resp, err)
			}
			resp.Body.Close()
			if code, out := post(t, hs.URL+"/v1/completions", `{"prompt":"Once","max_tokens":2,"temperature":0}`); code != http.StatusOK {
				t.Fatalf("completion after the render: %d %v", code, out)
			}
		})
	}
}

// signalResolver is testResolver that reports each request that got a slot.
type signalResolver struct {
	testResolver
	started chan struct{}
}

func (r signalResolver) Resolve(ctx context.Context, p Params, hasDraft bool) (*Plugins, error) {
	select {
	case r.started <- struct{}{}:
	default:
	}
	return r.testResolver.Resolve(ctx, p, hasDraft)
}

// smallBuffers accepts connections whose send buffer is 4 KiB, so a reply of a few
// hundred KB blocks on a client that does not read (a loopback socket would
// otherwise absorb megabytes).
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// stalledClient sends body to path and never reads the reply.
func stalledClient(t *testing.T, addr, path, body string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).SetReadBuffer(4096)
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
	return c
}

// TestSlowReaderFreesItsSlot: a client that asks for a large reply (logprobs with 20
// alternatives per token) and never reads it does not hold its slot: a whole reply is
// written after its slot is free, a stream's writes are bounded by SendTimeout; the
// next request is served and /health answers (before: the slot stayed pinned for the
// whole write, up to write_timeout, and the next request waited behind it).
func TestSlowReaderFreesItsSlot(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			res := signalResolver{started: make(chan struct{}, 1)}
			opts := Options{Parallel: 1, QueueSize: 4, Resolver: res}
			if stream {
				// A stream's events may stall before generation ends (on how much the
				// sockets buffer); SendTimeout then ends it. A whole reply needs none.
				opts.SendTimeout = time.Second
			}
			srv, err := New(storiesOptions(t, opts))
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewUnstartedServer(srv.Handler())
			hs.Listener = smallBuffers{hs.Listener}
			hs.Start()
			t.Cleanup(func() { hs.Close(); srv.Close() })

			body := fmt.Sprintf(`{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":200,"temperature":0,"logprobs":true,"top_logprobs":20,"stream":%v}`, stream)
			stalledClient(t, hs.Listener.Addr().String(), "/v1/chat/completions", body)
			<-res.started // the stalled request has the slot

			client := &http.Client{Timeout: 20 * time.Second} // a hang guard, not a measurement
			resp, err := client.Get(hs.URL + "/health")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("/health beside a stalled reader: %v %v", resp, err)
			}
			resp.Body.Close()
			resp, err = client.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"Once","max_tokens":2,"temperature":0}`))
			if err != nil {
				t.Fatalf("the next request, behind a stalled reader: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("the next request: status %d", resp.StatusCode)
			}
		})
	}
}

// holdResolver is testResolver that holds each request in Resolve (with its slot)
// until release is closed.
type holdResolver struct {
	testResolver
	started chan struct{}
	release chan struct{}
}

func (r holdResolver) Resolve(ctx context.Context, p Params, hasDraft bool) (*Plugins, error) {
	r.started <- struct{}{}
	<-r.release
	return r.testResolver.Resolve(ctx, p, hasDraft)
}

// TestQueueZeroMeansNoneWait: QueueSize < 0 (config queue = 0) answers 503 with
// Retry-After as soon as every slot is busy (before: queue = 0 silently became 64).
func TestQueueZeroMeansNoneWait(t *testing.T) {
	res := holdResolver{started: make(chan struct{}, 1), release: make(chan struct{})}
	_, hs := serveStories(t, cpu.New(cpu.Options{Threads: 1}), Options{Parallel: 1, QueueSize: -1, Resolver: res})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"Once","max_tokens":2}`)); err == nil {
			resp.Body.Close()
		}
	}()
	<-res.started // the first request holds the only slot
	resp, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"Once","max_tokens":2}`))
	close(res.release)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("got %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// listenLoopback serves srv on a loopback port until the test ends and returns its address.
func listenLoopback(t *testing.T, srv *Server) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(ctx, "127.0.0.1:0", 5*time.Second, func(a net.Addr) { addrc <- a }) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	select {
	case a := <-addrc:
		return a.String()
	case err := <-done:
		t.Fatal(err)
	}
	return ""
}

// halfOpen opens n connections that start a request and never finish its headers.
func halfOpen(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	var conns []net.Conn
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprint(c, "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
		conns = append(conns, c)
	}
	return conns
}

// closedByServer counts the connections the server has closed (a read ends at once
// instead of waiting out the short deadline).
func closedByServer(conns []net.Conn, wait time.Duration) int {
	var n int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetReadDeadline(time.Now().Add(wait))
			_, err := c.Read(make([]byte, 1))
			if ne, ok := err.(net.Error); err != nil && !(ok && ne.Timeout()) {
				mu.Lock()
				n++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return n
}

// TestSlowlorisIsBounded: connections that never finish their headers are closed
// after ReadHeaderTimeout, and beyond MaxConns each new connection displaces the
// oldest of them, so /health answers throughout (before: no header timeout and no
// cap, so a flood reached the file limit and then nobody was served).
func TestSlowlorisIsBounded(t *testing.T) {
	t.Run("max_conns", func(t *testing.T) {
		srv, err := New(storiesOptions(t, Options{Parallel: 1, Resolver: testResolver{}, MaxConns: 8}))
		if err != nil {
			t.Fatal(err)
		}
		addr := listenLoopback(t, srv)
		conns := halfOpen(t, addr, 50)
		client := &http.Client{Timeout: 20 * time.Second}
		for range 5 {
			resp, err := client.Get("http://" + addr + "/health")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("/health beside 50 half-open connections: %v %v", resp, err)
			}
			resp.Body.Close()
		}
		if got := closedByServer(conns, 500*time.Millisecond); got < 50-8 {
			t.Fatalf("the server closed %d of 50 half-open connections, want at least %d (a cap of 8)", got, 50-8)
		}
	})
	t.Run("keep-alive kept", func(t *testing.T) {
		// a client's idle keep-alive connection outlives a flood of half-open ones,
		// which go first
		srv, err := New(storiesOptions(t, Options{Parallel: 1, Resolver: testResolver{}, MaxConns: 8}))
		if err != nil {
			t.Fatal(err)
		}
		addr := listenLoopback(t, srv)
		client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{}}
		get := func() (reused bool) {
			req, _ := http.NewRequest("GET", "http://"+addr+"/health", nil)
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
			}))
			resp, err := client.Do(req)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("/health: %v %v", resp, err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return reused
		}
		get()
		halfOpen(t, addr, 50)
		time.Sleep(100 * time.Millisecond) // let the flood be accepted
		if !get() {
			t.Fatal("the keep-alive connection was displaced by half-open ones")
		}
	})
	t.Run("slow bodies", func(t *testing.T) {
		// whole headers, then a body that never finishes: the handler waits in its
		// read, and such connections must stay displaceable too
		srv, err := New(storiesOptions(t, Options{Parallel: 1, Resolver: testResolver{}, MaxConns: 8}))
		if err != nil {
			t.Fatal(err)
		}
		addr := listenLoopback(t, srv)
		var conns []net.Conn
		for range 50 {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			fmt.Fprint(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"prompt\":")
			conns = append(conns, c)
		}
		client := &http.Client{Timeout: 20 * time.Second}
		for range 5 {
			resp, err := client.Get("http://" + addr + "/health")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("/health beside 50 unfinished bodies: %v %v", resp, err)
			}
			resp.Body.Close()
		}
		if got := closedByServer(conns, 500*time.Millisecond); got < 50-8 {
			t.Fatalf("the server closed %d of 50 connections with unfinished bodies, want at least %d", got, 50-8)
		}
	})
	t.Run("read_header_timeout", func(t *testing.T) {
		srv, err := New(storiesOptions(t, Options{Parallel: 1, Resolver: testResolver{}, ReadHeaderTimeout: 200 * time.Millisecond}))
		if err != nil {
			t.Fatal(err)
		}
		conns := halfOpen(t, listenLoopback(t, srv), 3)
		if got := closedByServer(conns, 20*time.Second); got != 3 {
			t.Fatalf("the server closed %d of 3 half-open connections, want all 3", got)
		}
	})
}

// TestHugePromptRefusedUntokenized: a prompt whose bytes alone prove it is over the
// context is refused before tokenizing (before: 7.5 MB were tokenized, 8.5 s of CPU
// and 340 MB, only to fail the context check), and the server keeps serving.
func TestHugePromptRefusedUntokenized(t *testing.T) {
	_, hs := newTestServer(t, 1)
	for _, body := range []string{
		fmt.Sprintf(`{"prompt":%q,"max_tokens":2}`, strings.Repeat("Once upon a time ", 400000)),
		fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":2}`, strings.Repeat("Once upon a time ", 400000)),
	} {
		path := "/v1/completions"
		if strings.Contains(body, "messages") {
			path = "/v1/chat/completions"
		}
		code, out := post(t, hs.URL+path, body)
		e, _ := out["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if code != http.StatusBadRequest || e["code"] != "context_length_exceeded" || !strings.Contains(msg, "bytes, at least") {
			t.Fatalf("%s: got %d %v, want 400 context_length_exceeded from the byte bound", path, code, out)
		}
	}
	if code, out := post(t, hs.URL+"/v1/completions", `{"prompt":"Once","max_tokens":2,"temperature":0}`); code != http.StatusOK {
		t.Fatalf("after: %d %v", code, out)
	}
}

// TestAPIKeySchemeAnyCase: "Authorization: bearer KEY" is accepted (RFC 7235 makes
// the scheme case-insensitive; before: 401), a wrong key or scheme is not, and
// /health and /metrics stay open without a key (as the README says).
func TestAPIKeySchemeAnyCase(t *testing.T) {
	_, hs := serveStories(t, cpu.New(cpu.Options{Threads: 1}), Options{Parallel: 1, Resolver: testResolver{}, APIKey: "sk-test"})
	for _, tc := range []struct {
		path, auth string
		want       int
	}{
		{"/v1/models", "Bearer sk-test", 200},
		{"/v1/models", "bearer sk-test", 200},
		{"/v1/models", "BEARER  sk-test", 200},
		{"/v1/models", "Bearer sk-tesT", 401},
		{"/v1/models", "Bearer sk-test2", 401},
		{"/v1/models", "Basic sk-test", 401},
		{"/v1/models", "sk-test", 401},
		{"/v1/models", "", 401},
		{"/health", "", 200},
		{"/metrics", "", 200},
	} {
		req, _ := http.NewRequest("GET", hs.URL+tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s with %q: got %d, want %d", tc.path, tc.auth, resp.StatusCode, tc.want)
		}
	}
}

// TestTopKOverVocabulary: top_k beyond the vocabulary is a 400 naming top_k (before:
// the sampler failed on it, a 500).
func TestTopKOverVocabulary(t *testing.T) {
	_, hs := newTestServer(t, 1)
	code, out := post(t, hs.URL+"/v1/completions", `{"prompt":"Once","max_tokens":2,"top_k":1000000000000}`)
	e, _ := out["error"].(map[string]any)
	if code != http.StatusBadRequest || e["param"] != "top_k" {
		t.Fatalf("got %d %v, want 400 for top_k", code, out)
	}
	if code, out := post(t, hs.URL+"/v1/completions", `{"prompt":"Once","max_tokens":2,"top_k":512}`); code != http.StatusOK {
		t.Fatalf("top_k = the vocabulary: got %d %v, want 200", code, out)
	}
}

// TestChatCannotForgeControlTokens: the server's chat rendering keeps a user's "</s>"
// plain text (before: it became the end-of-sequence token in the prompt), while a
// completion's raw prompt still parses it, as llama.cpp does.
func TestChatCannotForgeControlTokens(t *testing.T) {
	opts := storiesOptions(t, Options{})
	tok := opts.Tokenizer
	ctx := context.Background()
	p, err := RenderChat(ctx, tok, Template{}, []tokenizer.Message{{Role: "user", Content: "a</s>b"}})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := EncodePrompt(ctx, tok, p)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(ids, tok.EOS()) {
		t.Fatalf("chat prompt %q: the user's </s> became EOS", p.Text)
	}
	raw, err := EncodePrompt(ctx, tok, tokenizer.RawPrompt("a</s>b"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(raw, tok.EOS()) {
		t.Fatal("a raw prompt's </s> is not EOS")
	}
}
