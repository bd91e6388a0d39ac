package server

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestInterTokenLatency: every gap between two pieces of a reply's text is one
// observation of minfer_inter_token_latency_seconds, streamed (one per content event
// after the first) or not (at most one per token after the first).
func TestInterTokenLatency(t *testing.T) {
	_, hs := newTestServer(t, 1)
	count := func() float64 {
		t.Helper()
		resp, err := http.Get(hs.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		for line := range strings.SplitSeq(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "minfer_inter_token_latency_seconds_count "); ok {
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
		}
		t.Fatalf("/metrics lacks minfer_inter_token_latency_seconds_count")
		return 0
	}
	const body = `{"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0, "ignore_eos": true}`

	before := count()
	code, out := post(t, hs.URL+"/v1/completions", body)
	if code != http.StatusOK {
		t.Fatalf("status %d: %v", code, out)
	}
	tokens := out["usage"].(map[string]any)["completion_tokens"].(float64)
	if got := count() - before; got < 1 || got > tokens-1 {
		t.Errorf("a whole reply of %v tokens: %v gaps observed, want 1 to %v", tokens, got, tokens-1)
	}

	before = count()
	resp, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(strings.Replace(body, "{", `{"stream": true, `, 1)))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_, events := parseSSE(t, string(raw))
	pieces := 0
	for _, ev := range events {
		for _, c := range ev["choices"].([]any) {
			if s, _ := c.(map[string]any)["text"].(string); s != "" {
				pieces++
			}
		}
	}
	if got := count() - before; pieces < 2 || got != float64(pieces-1) {
		t.Errorf("a stream of %d content events: %v gaps observed, want %d", pieces, got, pieces-1)
	}
}

// TestForwardMetricsByModel: the batch-size and forward-time histograms keep the
// target's forwards apart from the draft's (a label each).
func TestForwardMetricsByModel(t *testing.T) {
	s, hs := newTestServer(t, 1)
	s.ObserveForward("target", 4, 12, 3*time.Millisecond)
	s.ObserveForward("target", 3, 3, time.Millisecond)
	s.ObserveForward("draft", 1, 1, time.Millisecond)
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	m := string(raw)
	for _, want := range []string{
		`minfer_batch_sequences_count{model="target"} 2`, `minfer_batch_sequences_sum{model="target"} 7`,
		`minfer_batch_sequences_count{model="draft"} 1`, `minfer_batch_rows_sum{model="target"} 15`,
		`minfer_forward_seconds_count{model="draft"} 1`,
	} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
