package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minfer/minfer/internal/enginetest"
	"github.com/minfer/minfer/sdk"
)

// gateSampler is greedy, but its first call signals started and then waits for
// release (or the request's end), so a test can hold a generation in flight.
type gateSampler struct {
	enginetest.Greedy
	calls   atomic.Int64
	started chan struct{}
	release chan struct{}
}

func (g *gateSampler) Sample(ctx context.Context, r *sdk.SampleRound) (sdk.SampleResult, error) {
	if g.calls.Add(1) == 1 {
		close(g.started)
		select {
		case <-g.release:
		case <-ctx.Done():
			return sdk.SampleResult{}, ctx.Err()
		}
	}
	return g.Greedy.Sample(ctx, r)
}

type gateResolver struct{ s *gateSampler }

func (g gateResolver) Resolve(context.Context, Params, bool) (*Plugins, error) {
	return &Plugins{Sampler: g.s, SamplerName: "greedy", Greedy: true}, nil
}

// listen runs srv.ListenAndServe on a free port; it returns the base URL, the cancel
// that starts the shutdown and the channel of ListenAndServe's result.
func listen(t *testing.T, srv *Server, grace time.Duration) (string, context.CancelFunc, chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(ctx, "127.0.0.1:0", grace, func(a net.Addr) { addr <- a }) }()
	select {
	case a := <-addr:
		return "http://" + a.String(), cancel, done
	case err := <-done:
		cancel()
		t.Fatalf("listen: %v", err)
	}
	return "", nil, nil
}

// waitRefused waits until the listener is closed (the shutdown has begun).
func waitRefused(t *testing.T, url string) {
	t.Helper()
	host := strings.TrimPrefix(url, "http://")
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		c, err := net.Dial("tcp", host)
		if err != nil {
			return
		}
		c.Close()
	}
	t.Fatal("the listener still accepts connections after the shutdown began")
}

// TestShutdownDrains: a request in flight when the shutdown begins still completes,
// streamed or whole, while new connections are refused.
func TestShutdownDrains(t *testing.T) {
	srv0, hs := newTestServer(t, 1)
	wantBody := `{"prompt":"Once upon a time","max_tokens":12,"temperature":0}`
	_, out := post(t, hs.URL+"/v1/completions", wantBody)
	want := out["choices"].([]any)[0].(map[string]any)["text"].(string)
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "whole", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			srv, gate := gatedServer(t, srv0)
			url, shutdown, done := listen(t, srv, 30*time.Second)
			defer shutdown()
			body := strings.TrimSuffix(wantBody, "}") + map[bool]string{false: `}`, true: `,"stream":true}`}[stream]
			type reply struct {
				raw    string
				status int
				err    error
			}
			got := make(chan reply, 1)
			go func() {
				resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
				if err != nil {
					got <- reply{err: err}
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				got <- reply{string(b), resp.StatusCode, err}
			}()
			<-gate.started // the generation is in flight
			shutdown()
			waitRefused(t, url)
			close(gate.release)
			r := <-got
			if r.err != nil || r.status != 200 {
				t.Fatalf("in-flight request: status %d, %v: %s", r.status, r.err, r.raw)
			}
			var text string
			if stream {
				text, _ = parseSSE(t, r.raw)
			} else {
				var m struct {
					Choices []struct{ Text string } `json:"choices"`
				}
				if err := json.Unmarshal([]byte(r.raw), &m); err != nil || len(m.Choices) != 1 {
					t.Fatalf("whole reply %q: %v", r.raw, err)
				}
				text = m.Choices[0].Text
			}
			if text != want {
				t.Fatalf("drained reply: got %q, want %q", text, want)
			}
			if err := <-done; err != nil {
				t.Fatalf("ListenAndServe after the drain: %v", err)
			}
			srv.Close()
		})
	}
}

// TestShutdownGraceExpires: when the grace runs out, the remaining requests are cut
// off, ListenAndServe says so, and Close waits for their slots instead of freeing a
// session under a running generation.
func TestShutdownGraceExpires(t *testing.T) {
	srv0, _ := newTestServer(t, 1)
	srv, gate := gatedServer(t, srv0)
	url, shutdown, done := listen(t, srv, 20*time.Millisecond)
	go func() {
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"a","max_tokens":4}`))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	<-gate.started
	shutdown()
	err := <-done
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ListenAndServe: got %v, want the grace's deadline", err)
	}
	closed := make(chan struct{})
	go func() { srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return: the cut-off request kept its slot")
	}
	if got := srv.FreeSlots(); got != 0 {
		t.Fatalf("free slots after Close: got %d, want 0 (all taken back)", got)
	}
}

// gatedServer is a server with srv0's options whose sampler waits at the gate it
// returns.
func gatedServer(t *testing.T, srv0 *Server) (*Server, *gateSampler) {
	t.Helper()
	gate := &gateSampler{started: make(chan struct{}), release: make(chan struct{})}
	opts := srv0.opts
	opts.Resolver = gateResolver{gate}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return srv, gate
}
