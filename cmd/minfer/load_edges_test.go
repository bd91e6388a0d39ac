package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minfer/minfer/core/config"
)

// TestLoadHardEdges is a bounded load on loopback of the clients issue 23 found
// taking the server down, all at once: 300 half-open connections (5× max_conns;
// slowloris), 4 clients that ask for 200 tokens with 20 logprobs each and never read,
// 3 prompts of 7 MB (over the context by their bytes alone) and 3 of 100 KB (tokenized,
// one at a time, then over the context), beside 4 clients that stream ordinary
// requests. /health must answer throughout, every ordinary reply must equal the one
// made alone, and every slot must come back. It stops by itself: every client makes a
// fixed number of requests, each under a client timeout.
func TestLoadHardEdges(t *testing.T) {
	const parallel = 4
	ls := startLoadServerWith(t, parallel, func(c *config.Config) {
		c.Model.Ctx = 8192
		c.Server.MaxConns = 64
		c.Server.ReadHeaderTimeout = time.Second
		c.Server.SendTimeout = 2 * time.Second
	})
	addr := strings.TrimPrefix(ls.url, "http://")
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	want := expectedReplies(t, client, ls.url)
	// The connections that asked for them predate the attack below: at the connection
	// cap they are the oldest idle ones, which the cap displaces first, and a POST
	// reusing a displaced one reads a reset (seen under CI's load). Ordinary clients
	// start on fresh connections.
	client.CloseIdleConnections()

	var errs []error
	var mu sync.Mutex
	fail := func(format string, args ...any) {
		mu.Lock()
		errs = append(errs, fmt.Errorf(format, args...))
		mu.Unlock()
	}

	var wg sync.WaitGroup
	// slowloris
	var held []net.Conn
	for range 300 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("half-open connection: %v", err)
		}
		fmt.Fprint(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ")
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	// /health, polled throughout the load once the half-open connections hold their
	// places: a poll that raced the flood's arrival would be the oldest connection
	// without a request in progress, the one the cap displaces first
	stop := make(chan struct{})
	var healthOK atomic.Int64
	healthDone := make(chan struct{})
	go func() {
		defer close(healthDone)
		// A new connection per poll, as a probe makes it: at the connection cap the
		// server may displace an idle keep-alive connection (the cap's rule), and a
		// poll reusing one then reads a reset (seen once under CI's load).
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := hc.Get(ls.url + "/health")
			if err != nil {
				fail("/health during the load: %v", err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				fail("/health during the load: status %d", resp.StatusCode)
				return
			}
			healthOK.Add(1)
			time.Sleep(20 * time.Millisecond)
		}
	}()

	// slow readers: send, never read, hang up at the end
	var stalled []net.Conn
	for i := range 4 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.(*net.TCPConn).SetReadBuffer(4096)
		body := fmt.Sprintf(`{"messages":[{"role":"user","content":"%s"}],"max_tokens":200,"temperature":0,"logprobs":true,"top_logprobs":20,"stream":%v}`, loadPrompts[i], i%2 == 1)
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		stalled = append(stalled, c)
	}
	defer func() {
		for _, c := range stalled {
			c.Close()
		}
	}()
	// big prompts
	for i, size := range []int{7 << 20, 7 << 20, 7 << 20, 100 << 10, 100 << 10, 100 << 10} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prompt := strings.Repeat("Once upon a time there was a dog. ", size/34)
			b, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": 4})
			resp, err := client.Post(ls.url+"/v1/completions", "application/json", strings.NewReader(string(b)))
			if err != nil {
				fail("big prompt %d (%d bytes): %v", i, size, err)
				return
			}
			var out struct{ Error struct{ Code string } }
			json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || out.Error.Code != "context_length_exceeded" {
				fail("big prompt %d (%d bytes): status %d code %q, want 400 context_length_exceeded", i, size, resp.StatusCode, out.Error.Code)
			}
		}()
	}
	// ordinary clients
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 4 {
				p := loadPrompts[(c*3+r)%len(loadPrompts)]
				if _, err := streamOnce(client, ls.url, p, want[p], false); err != nil {
					fail("client %d request %d: %v", c, r, err)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-healthDone
	for _, err := range errs[:min(len(errs), 10)] {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	if healthOK.Load() == 0 {
		t.Fatal("/health was never polled during the load")
	}
	deadline := time.Now().Add(20 * time.Second)
	for ls.srv.FreeSlots() != parallel && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := ls.srv.FreeSlots(); got != parallel {
		t.Fatalf("free slots after the load: got %d, want %d (a stalled reader holds one)", got, parallel)
	}
	t.Logf("/health answered %d times during the load", healthOK.Load())
}
