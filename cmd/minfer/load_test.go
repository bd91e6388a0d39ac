package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/server"
	"github.com/minfer/minfer/internal/stack"
)

var loadFull = flag.Bool("load-full", false, "TestLoad: 64 clients × 20 requests (default 16 × 4) and print the throughput")

// loadPrompts are the distinct greedy prompts of the load test; each has its own
// expected reply, so a response carrying another request's tokens is caught.
var loadPrompts = []string{
	"Once upon a time", "The dog ran", "Lily was sad", "One day, Tom", "The sun was hot",
	"A little bird", "Mom said no", "The big red ball",
}

const loadMaxTokens = 12

// loadServer is an in-process minfer serve on the embedded model.
type loadServer struct {
	url  string
	srv  *server.Server
	stop func() error
}

func startLoadServer(t *testing.T, parallel int) *loadServer {
	t.Helper()
	return startLoadServerWith(t, parallel, nil)
}

// startLoadServerWith is startLoadServer with edit applied to the configuration.
func startLoadServerWith(t *testing.T, parallel int, edit func(*config.Config)) *loadServer {
	t.Helper()
	cfg := config.Default()
	cfg.Model.Ctx = 256
	cfg.Sampling.Temperature = 0
	cfg.Server.Parallel = parallel
	cfg.Server.Queue = 256
	// The built-in plugins' per-call deadline (100 ms of wall time) is about a stuck
	// plugin; on a loaded 2-core machine 64 clients can stall a call past it, which
	// is not what this test measures.
	for name, p := range cfg.Plugins {
		p.Timeout = 10 * time.Second
		cfg.Plugins[name] = p
	}
	if edit != nil {
		edit(cfg)
	}
	m := &Main{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}
	ctx, cancel := context.WithCancel(context.Background())
	srv, st, err := stack.NewServer(ctx, cfg, stack.ServerOptions{Stack: m.stackOptions()})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- srv.ListenAndServe(ctx, "127.0.0.1:0", 30*time.Second, func(a net.Addr) { addrc <- a })
	}()
	var once sync.Once
	var stopErr error
	ls := &loadServer{srv: srv, stop: func() error {
		once.Do(func() {
			cancel()
			stopErr = <-done
			srv.Close()
			st.Close()
		})
		return stopErr
	}}
	t.Cleanup(func() { ls.stop() })
	select {
	case a := <-addrc:
		ls.url = "http://" + a.String()
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	return ls
}

func loadBody(prompt string, stream bool) string {
	b, _ := json.Marshal(map[string]any{
		"messages":   []map[string]string{{"role": "user", "content": prompt}},
		"max_tokens": loadMaxTokens, "temperature": 0, "stream": stream,
		"stream_options": map[string]bool{"include_usage": true},
	})
	return string(b)
}

// expected is one prompt's reply, made alone before the load.
type expected struct {
	text, finish string
	tokens       int
}

func expectedReplies(t *testing.T, client *http.Client, url string) map[string]expected {
	t.Helper()
	out := map[string]expected{}
	for _, p := range loadPrompts {
		resp, err := client.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(loadBody(p, false)))
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Choices []struct {
				Message      struct{ Content string } `json:"message"`
				FinishReason string                   `json:"finish_reason"`
			} `json:"choices"`
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(r.Choices) != 1 {
			t.Fatalf("prompt %q: status %d, %v", p, resp.StatusCode, err)
		}
		out[p] = expected{r.Choices[0].Message.Content, r.Choices[0].FinishReason, r.Usage.CompletionTokens}
	}
	return out
}

// loadResult is one streamed request's outcome.
type loadResult struct {
	latency time.Duration
	tokens  int
	aborted bool // the client disconnected on purpose
}

// streamOnce runs one streamed request. With abort it disconnects after the first
// text chunk and checks that what arrived is a prefix of the expected reply.
func streamOnce(client *http.Client, url, prompt string, want expected, abort bool) (loadResult, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions", strings.NewReader(loadBody(prompt, true)))
	resp, err := client.Do(req)
	if err != nil {
		return loadResult{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return loadResult{}, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	if abort {
		br := bufio.NewReader(resp.Body)
		var got strings.Builder
		for events := 0; events < 3; { // the role chunk, then two text chunks
			line, err := br.ReadString('\n')
			if err != nil {
				return loadResult{}, fmt.Errorf("before the disconnect: %w", err)
			}
			if !strings.HasPrefix(line, "data: ") {
				continue
			}
			events++
			var ev struct {
				Choices []struct {
					Delta struct{ Content string } `json:"delta"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev); err == nil && len(ev.Choices) == 1 {
				got.WriteString(ev.Choices[0].Delta.Content)
			}
		}
		if !strings.HasPrefix(want.text, got.String()) {
			return loadResult{}, fmt.Errorf("prompt %q: the first chunks %q are not a prefix of %q", prompt, got.String(), want.text)
		}
		return loadResult{aborted: true}, nil
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return loadResult{}, err
	}
	events, err := readSSE(raw)
	if err != nil {
		return loadResult{}, fmt.Errorf("prompt %q: framing: %w", prompt, err)
	}
	var text strings.Builder
	finish, tokens := "", -1
	for _, ev := range events {
		var e struct {
			Choices []struct {
				Delta        struct{ Content string } `json:"delta"`
				FinishReason *string                  `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		b, _ := json.Marshal(ev)
		if err := json.Unmarshal(b, &e); err != nil {
			return loadResult{}, fmt.Errorf("prompt %q: event %v: %w", prompt, ev, err)
		}
		for _, c := range e.Choices {
			text.WriteString(c.Delta.Content)
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
		if e.Usage != nil {
			tokens = e.Usage.CompletionTokens
		}
	}
	if text.String() != want.text || finish != want.finish || tokens != want.tokens {
		return loadResult{}, fmt.Errorf("prompt %q: got %q (%s, %d tokens), want %q (%s, %d tokens)",
			prompt, text.String(), finish, tokens, want.text, want.finish, want.tokens)
	}
	return loadResult{latency: time.Since(start), tokens: tokens}, nil
}

// TestLoad: concurrent streaming clients on loopback, every 7th request disconnecting
// mid-stream. Every finished response must be well-formed and carry exactly its own
// prompt's greedy reply; afterwards every slot is free and, once the server is shut
// down, no goroutine is left. -load-full runs 64 clients × 20 requests and prints the
// throughput (docs/perf-server.md).
func TestLoad(t *testing.T) {
	clients, perClient := 16, 4
	if *loadFull {
		clients, perClient = 64, 20
	}
	const parallel = 4
	before := runtime.NumGoroutine()
	ls := startLoadServer(t, parallel)
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: 0}
	client := &http.Client{Transport: tr}
	want := expectedReplies(t, client, ls.url)

	var mu sync.Mutex
	var results []loadResult
	var errs []error
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range perClient {
				p := loadPrompts[(c*3+r)%len(loadPrompts)]
				res, err := streamOnce(client, ls.url, p, want[p], (c*perClient+r)%7 == 3)
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("client %d request %d: %w", c, r, err))
				} else {
					results = append(results, res)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	for _, err := range errs[:min(len(errs), 10)] {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.Fatalf("%d of %d requests failed", len(errs), clients*perClient)
	}

	// no slot leak: every slot comes back (a disconnect frees its slot when the
	// handler notices; poll a bounded while)
	deadline := time.Now().Add(10 * time.Second)
	for ls.srv.FreeSlots() != parallel && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := ls.srv.FreeSlots(); got != parallel {
		t.Fatalf("free slots after the load: got %d, want %d", got, parallel)
	}
	if m := metricsText(t, ls.url); !strings.Contains(m, "minfer_requests_in_flight 0") || !strings.Contains(m, "minfer_queue_depth 0") {
		t.Fatalf("metrics after the load: want nothing in flight or queued:\n%s", grepLines(m, "in_flight", "queue_depth"))
	}
	reportLoad(t, results, clients, perClient, wall)

	// no goroutine leak: shut everything down and come back to the count before
	tr.CloseIdleConnections()
	if err := ls.stop(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	for runtime.NumGoroutine() > before && time.Now().Before(deadline.Add(10*time.Second)) {
		time.Sleep(20 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before {
		var dump bytes.Buffer
		pprof.Lookup("goroutine").WriteTo(&dump, 1)
		t.Fatalf("goroutines: %d after the load and shutdown, %d before:\n%s", g, before, dump.String())
	}
}

func metricsText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	http.DefaultClient.CloseIdleConnections()
	return string(b)
}

func grepLines(s string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, sub := range subs {
			if strings.Contains(l, sub) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// reportLoad logs the throughput (printed to stdout with -load-full).
func reportLoad(t *testing.T, results []loadResult, clients, perClient int, wall time.Duration) {
	var lat []time.Duration
	tokens, aborted := 0, 0
	for _, r := range results {
		if r.aborted {
			aborted++
			continue
		}
		lat = append(lat, r.latency)
		tokens += r.tokens
	}
	if len(lat) == 0 {
		t.Fatal("no request finished")
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	msg := fmt.Sprintf("load: %d clients × %d requests (%d completed, %d disconnected on purpose) in %.2f s: %.1f requests/s, %.1f generated tokens/s; latency p50 %.0f ms, p95 %.0f ms, max %.0f ms",
		clients, perClient, len(lat), aborted, wall.Seconds(), float64(len(lat))/wall.Seconds(), float64(tokens)/wall.Seconds(),
		msOf(pct(0.50)), msOf(pct(0.95)), msOf(lat[len(lat)-1]))
	t.Log(msg)
	if *loadFull {
		fmt.Fprintln(os.Stdout, msg)
	}
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// metricValue is the value of the unlabelled series name in a /metrics text, or -1.
func metricValue(m, name string) float64 {
	for _, l := range strings.Split(m, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}
