package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minfer/minfer/internal/testpath"
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
// `minfer run --chat -p`, the REPL on a pipe and the server, without and with a draft.
func TestServeRunAndREPLAgree(t *testing.T) {
	draft := testpath.Path(t, "models", "stories260K.gguf")
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"plain", nil},
		{"draft", []string{"--draft", draft, "--depth", "3"}},
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
