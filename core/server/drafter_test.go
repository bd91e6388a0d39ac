package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/sdk"
)

// brokenDrafter fails every call, as a drafter that errors, traps or times out does.
type brokenDrafter struct{}

func (brokenDrafter) Draft(context.Context, *sdk.DraftRequest) (sdk.DraftResult, error) {
	return sdk.DraftResult{}, errors.New("wasm trap: unreachable")
}

// brokenResolver gives every request depth-3 rounds by a drafter that always fails.
type brokenResolver struct{ testResolver }

func (r brokenResolver) Resolve(ctx context.Context, p Params, hasDraft bool) (*Plugins, error) {
	pl, err := r.testResolver.Resolve(ctx, p, hasDraft)
	if err != nil {
		return nil, err
	}
	pl.Policy, pl.PolicyName = engine.FixedDepth(3), "static"
	pl.Drafters = []engine.Drafter{{Name: "broken", Drafter: brokenDrafter{}}}
	return pl, nil
}

// syncBuilder is a log the server's goroutines may write at once.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestDrafterFailureFallsBack: a request whose drafter fails every call still gets
// plain decoding's greedy text, whole and streamed; the failure is logged once per
// request with the drafter's name, and /metrics counts the failed calls (one per
// request: the first turns the drafter off) and the requests that turned it off.
func TestDrafterFailureFallsBack(t *testing.T) {
	_, plainHS := newTestServer(t, 1)
	const body = `{"prompt":"Once upon a time","max_tokens":24,"temperature":0}`
	code, out := post(t, plainHS.URL+"/v1/completions", body)
	if code != 200 {
		t.Fatalf("plain: status %d: %v", code, out)
	}
	want := out["choices"].([]any)[0].(map[string]any)["text"].(string)

	var log syncBuilder
	_, hs := serveStories(t, cpu.New(cpu.Options{Threads: 1}), Options{ModelID: "stories260K", Parallel: 1, QueueSize: 4, Resolver: brokenResolver{}, Log: &log})
	code, out = post(t, hs.URL+"/v1/completions", body)
	if code != 200 {
		t.Fatalf("broken drafter: status %d: %v", code, out)
	}
	if got := out["choices"].([]any)[0].(map[string]any)["text"].(string); got != want {
		t.Fatalf("broken drafter: text %q, want plain decoding's %q", got, want)
	}
	by := out["minfer"].(map[string]any)["spec"].(map[string]any)["by_drafter"].(map[string]any)["broken"].(map[string]any)
	if by["failed"] != float64(1) || by["off"] != true {
		t.Fatalf("by_drafter.broken %v: want 1 failure and off", by)
	}
	sresp, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(sresp.Body)
	sresp.Body.Close()
	if got, _ := parseSSE(t, string(raw)); got != want {
		t.Fatalf("broken drafter, streamed: text %q, want %q", got, want)
	}
	if n := strings.Count(log.String(), `drafter "broken" failed`); n != 2 || !strings.Contains(log.String(), "wasm trap: unreachable") {
		t.Fatalf("log %q: want the failure once per request (2), with the drafter's error", log.String())
	}
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m, _ := io.ReadAll(resp.Body)
	for _, line := range []string{`minfer_drafter_failures_total{drafter="broken"} 2`, `minfer_drafter_off_total{drafter="broken"} 2`} {
		if !strings.Contains(string(m), line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}
