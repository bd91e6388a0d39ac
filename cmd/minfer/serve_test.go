package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minfer/minfer/internal/testpath"
	"github.com/minfer/minfer/plugins"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe runs `minfer serve args…` on a free port and returns its base URL and a
// stop function that shuts it down and returns Run's error.
func startServe(t *testing.T, args ...string) (string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)) }()
	re := regexp.MustCompile(`http://(\S+)`)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if mm := re.FindStringSubmatch(stderr.String()); mm != nil {
			var once sync.Once
			var stopErr error
			stop := func() error { // idempotent: tests call it and t.Cleanup calls it again
				once.Do(func() {
					cancel()
					select {
					case stopErr = <-done:
					case <-time.After(30 * time.Second):
						stopErr = fmt.Errorf("serve did not shut down")
					}
				})
				return stopErr
			}
			t.Cleanup(func() { stop() })
			return "http://" + mm[1], stop
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	t.Fatalf("serve did not start:\n%s", stderr.String())
	return "", nil
}

func chatText(t *testing.T, url, content string) string {
	t.Helper()
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":24,"temperature":0}`, content)
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Error any `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
		t.Fatalf("chat: status %d, err %v, body %+v", resp.StatusCode, err, out)
	}
	return out.Choices[0].Message.Content
}

// TestServeRunAndREPLAgree: the same greedy chat turn gives the same text through
// `minfer run --chat -p`, the REPL on a pipe and the server, without and with a draft,
// and with drafter plugins (alone, and beside the draft).
func TestServeRunAndREPLAgree(t *testing.T) {
	draft := testpath.Path(t, "models", "stories260K.gguf")
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"plain", nil},
		{"draft", []string{"--draft", draft, "--depth", "3"}},
		{"ngram drafter", []string{"--drafter", "ngram", "--depth", "3"}},
		{"suffix drafter beside the draft", []string{"--draft", draft, "--drafter", "suffix"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const prompt = "Once upon a time"
			common := append([]string{"--temp", "0", "--ctx", "256"}, tc.extra...)
			out, stderr, err := runCLI(t, "", append([]string{"run", "--chat", "-p", prompt, "-n", "24"}, common...)...)
			if err != nil {
				t.Fatalf("run: %v\n%s", err, stderr)
			}
			want := strings.TrimSuffix(out, "\n")
			out, stderr, err = runCLI(t, prompt+"\n", append([]string{"run", "--chat", "-n", "24"}, common...)...)
			if err != nil {
				t.Fatalf("repl: %v\n%s", err, stderr)
			}
			if got := strings.TrimSuffix(out, "\n"); got != want {
				t.Fatalf("REPL: got %q, want (run) %q", got, want)
			}
			url, stop := startServe(t, common...)
			if got := chatText(t, url, prompt); got != want {
				t.Fatalf("server: got %q, want (run) %q", got, want)
			}
			if err := stop(); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
		})
	}
}

// TestServeTraceNamesPrompts: serve --trace records each request's prompt key, so
// policy replay --walk can pool a served prompt's rounds as it does specbench's.
func TestServeTraceNamesPrompts(t *testing.T) {
	draft := testpath.Path(t, "models", "stories260K.gguf")
	trace := filepath.Join(t.TempDir(), "serve.jsonl")
	url, stop := startServe(t, "--temp", "0", "--ctx", "256", "--draft", draft, "--depth", "2", "--trace", trace)
	a := chatText(t, url, "Once upon a time")
	if b := chatText(t, url, "Once upon a time"); b != a {
		t.Fatalf("the same greedy request gave %q, then %q", a, b)
	}
	chatText(t, url, "The little dog")
	if err := stop(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	rounds, err := plugins.ReadTraceFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[int]string{} // sequence → prompt key
	for _, r := range rounds {
		if r.Prompt == "" {
			t.Fatalf("round %d of sequence %d has no prompt key", r.Round, r.Seq)
		}
		if k, ok := keys[r.Seq]; ok && k != r.Prompt {
			t.Fatalf("sequence %d has prompt keys %s and %s", r.Seq, k, r.Prompt)
		}
		keys[r.Seq] = r.Prompt
	}
	distinct := map[string]bool{}
	for _, k := range keys {
		distinct[k] = true
	}
	if len(keys) != 3 || len(distinct) != 2 {
		t.Fatalf("%d sequences with %d prompt keys, want 3 with 2 (two requests shared a prompt)", len(keys), len(distinct))
	}
	out, stderr, err := runCLI(t, "", "policy", "replay", trace, "--walk", "--policy", "static")
	if err != nil || !strings.Contains(out, "walked static") {
		t.Fatalf("policy replay --walk of the serve trace: %v\n%s%s", err, out, stderr)
	}
}

func TestServeBadFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"extra argument", []string{"serve", "oops"}, 2},
		{"bad kv", []string{"serve", "--kv", "q3"}, 2},
		{"missing model", []string{"serve", "-m", "/nonexistent.gguf"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCLI(t, "", tc.args...)
			if got := exitCode(err); got != tc.code {
				t.Fatalf("exit code: got %d, want %d (%v)", got, tc.code, err)
			}
		})
	}
}
