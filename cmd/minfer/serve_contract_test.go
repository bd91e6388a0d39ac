package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/minfer/minfer/internal/testpath"
)

// chatReply is the part of a non-streamed chat completion these tests read.
type chatReply struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
		Logprobs     *struct {
			Content []struct {
				Token       string  `json:"token"`
				Logprob     float64 `json:"logprob"`
				TopLogprobs []struct {
					Token   string  `json:"token"`
					Logprob float64 `json:"logprob"`
				} `json:"top_logprobs"`
			} `json:"content"`
		} `json:"logprobs"`
	} `json:"choices"`
	Usage struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Minfer struct {
		Policy        string `json:"policy"`
		PolicyVersion string `json:"policy_version"`
		Spec          struct {
			Accepted int `json:"accepted"`
		} `json:"spec"`
	} `json:"minfer"`
}

func postChat(t *testing.T, url string, req map[string]any) chatReply {
	t.Helper()
	b, status, raw := sendChat(t, url, req)
	var r chatReply
	if err := json.Unmarshal(raw, &r); err != nil || status != 200 || len(r.Choices) != 1 {
		t.Fatalf("chat %s: status %d, %v: %s", b, status, err, raw)
	}
	return r
}

// sendChat posts req, with the user message "Once upon a time", to /v1/chat/completions
// and returns the request body, the status and the reply body.
func sendChat(t *testing.T, url string, req map[string]any) ([]byte, int, []byte) {
	t.Helper()
	req["messages"] = []map[string]string{{"role": "user", "content": "Once upon a time"}}
	b, _ := json.Marshal(req)
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return b, resp.StatusCode, raw
}

// streamChat streams req and returns the text chunks in order and the finish reason.
func streamChat(t *testing.T, url string, req map[string]any) ([]string, string) {
	t.Helper()
	req["stream"] = true
	_, _, raw := sendChat(t, url, req)
	events, err := readSSE(raw)
	if err != nil {
		t.Fatalf("stream framing: %v", err)
	}
	var chunks []string
	finish := ""
	for _, ev := range events {
		for _, c := range ev["choices"].([]any) {
			c := c.(map[string]any)
			if s, _ := c["delta"].(map[string]any)["content"].(string); s != "" {
				chunks = append(chunks, s)
			}
			if f, ok := c["finish_reason"].(string); ok {
				finish = f
			}
		}
	}
	return chunks, finish
}

// TestServeStopNeverEmitted: a stop string ends the reply just before it, streamed or
// whole, plain or speculative (the draft here is the target itself, so every draft
// token is accepted and the stop strings fall inside accepted runs), and nothing of
// it or after it is sent.
func TestServeStopNeverEmitted(t *testing.T) {
	draft := testpath.Path(t, "models", "stories260K.gguf")
	cfg := emptyConfig(t)
	plainURL, _ := startServe(t, "--config", cfg, "--ctx", "256", "--temp", "0")
	specURL, _ := startServe(t, "--config", cfg, "--ctx", "256", "--temp", "0", "--draft", draft, "--depth", "4")
	full := postChat(t, plainURL, map[string]any{"max_tokens": 40})
	text := full.Choices[0].Message.Content
	words := strings.Fields(text)
	if len(words) < 8 {
		t.Fatalf("too little text to pick stop strings from: %q", text)
	}
	for _, stop := range []string{words[2], words[4], words[5], words[7], words[3] + " " + words[4]} {
		cut := strings.Index(text, stop)
		if cut <= 0 {
			continue
		}
		want := text[:cut]
		var plainTokens int
		for _, srv := range []struct{ name, url string }{{"plain", plainURL}, {"spec", specURL}} {
			t.Run(fmt.Sprintf("%s/%q", srv.name, stop), func(t *testing.T) {
				req := func() map[string]any { return map[string]any{"max_tokens": 40, "stop": []string{stop}} }
				r := postChat(t, srv.url, req())
				c := r.Choices[0]
				if c.Message.Content != want || c.FinishReason != "stop" {
					t.Fatalf("whole: got %q (%s), want %q (stop)", c.Message.Content, c.FinishReason, want)
				}
				if srv.name == "plain" {
					plainTokens = r.Usage.CompletionTokens
				} else {
					if r.Usage.CompletionTokens != plainTokens {
						t.Fatalf("speculative: %d completion tokens, plain %d", r.Usage.CompletionTokens, plainTokens)
					}
					if r.Minfer.Spec.Accepted == 0 {
						t.Fatalf("speculative run accepted no draft token: %+v", r.Minfer)
					}
				}
				chunks, finish := streamChat(t, srv.url, req())
				if got := strings.Join(chunks, ""); got != want || finish != "stop" {
					t.Fatalf("stream: got %q (%s), want %q (stop)", got, finish, want)
				}
			})
		}
	}
}

// TestServeLogprobsAndPolicyVersion: greedy logprobs, with speculative rounds, name
// the argmax token at every position, and the response names the policy's version.
func TestServeLogprobsAndPolicyVersion(t *testing.T) {
	draft := testpath.Path(t, "models", "stories260K.gguf")
	url, _ := startServe(t, "--config", emptyConfig(t), "--ctx", "256", "--temp", "0", "--draft", draft)
	r := postChat(t, url, map[string]any{"max_tokens": 16, "logprobs": true, "top_logprobs": 3})
	if r.Minfer.Policy == "" || r.Minfer.PolicyVersion == "" {
		t.Fatalf("minfer field: got policy %q version %q, want both", r.Minfer.Policy, r.Minfer.PolicyVersion)
	}
	lp := r.Choices[0].Logprobs
	if lp == nil || len(lp.Content) != r.Usage.CompletionTokens {
		t.Fatalf("logprobs: got %+v, want %d entries", lp, r.Usage.CompletionTokens)
	}
	var joined strings.Builder
	for i, e := range lp.Content {
		joined.WriteString(e.Token)
		if len(e.TopLogprobs) != 3 {
			t.Fatalf("entry %d: %d alternatives, want 3", i, len(e.TopLogprobs))
		}
		top := e.TopLogprobs[0]
		if e.Logprob > 0 || top.Token != e.Token || math.Abs(top.Logprob-e.Logprob) > 1e-6 {
			t.Fatalf("entry %d: chosen %q %.6f, best alternative %q %.6f: greedy must choose the best", i, e.Token, e.Logprob, top.Token, top.Logprob)
		}
		for k := 1; k < 3; k++ {
			if e.TopLogprobs[k].Logprob > e.TopLogprobs[k-1].Logprob {
				t.Fatalf("entry %d: alternatives out of order: %+v", i, e.TopLogprobs)
			}
		}
	}
	if got, want := strings.TrimSpace(joined.String()), strings.TrimSpace(r.Choices[0].Message.Content); got != want {
		t.Fatalf("logprob tokens spell %q, the reply is %q", got, want)
	}
}
