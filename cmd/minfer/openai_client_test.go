package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needTool finds a command the test needs: missing, the test is skipped locally and
// fails in CI (CI set), where the tools are part of the contract.
func needTool(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			if os.Getenv("CI") == "" {
				t.Skipf("%s is not installed (CI unset)", n)
			}
			t.Fatalf("%s is required in CI: %v", n, err)
		}
	}
}

// apiClientDir is examples/api-client in this checkout.
func apiClientDir(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(wd, "..", "..", "examples", "api-client")
	if _, err := os.Stat(filepath.Join(dir, "client.mjs")); err != nil {
		t.Fatalf("examples/api-client: %v", err)
	}
	return dir
}

type clientLine struct {
	Mode         string `json:"mode"`
	Model        string `json:"model"`
	Text         string `json:"text"`
	FinishReason string `json:"finish_reason"`
	Chunks       int    `json:"chunks"`
	Usage        struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
	Minfer struct {
		Sampler  string `json:"sampler"`
		Identity string `json:"identity"`
	} `json:"minfer"`
}

// TestOpenAIClient runs examples/api-client (the official openai npm package) against
// the server: a non-streamed and a streamed chat completion, and one with minfer's
// extension field passed through the library.
func TestOpenAIClient(t *testing.T) {
	needTool(t, "node", "npm")
	src := apiClientDir(t)
	dir := t.TempDir()
	for _, f := range []string{"package.json", "package-lock.json", "client.mjs"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	npm := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--cache", filepath.Join(dir, ".npm-cache"))
	npm.Dir = dir
	if out, err := npm.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
	url, _ := startServe(t, "--config", emptyConfig(t), "--ctx", "256")
	const prompt = "Once upon a time"
	want := chatText(t, url, prompt) // 24 tokens, greedy, like the client
	node := exec.Command("node", "client.mjs", url, prompt)
	node.Dir = dir
	var stderr bytes.Buffer
	node.Stderr = &stderr
	out, err := node.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 {
		t.Fatalf("client printed %d lines, want 3:\n%s", len(lines), out)
	}
	for i, mode := range []string{"whole", "stream", "extension"} {
		t.Run(mode, func(t *testing.T) {
			var got clientLine
			if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
				t.Fatalf("line %q: %v", lines[i], err)
			}
			if got.Mode != mode || got.Text != want || got.FinishReason != "length" || got.Model != embeddedName {
				t.Fatalf("got %+v, want mode %s, text %q, finish_reason length, model %s", got, mode, want, embeddedName)
			}
			if u := got.Usage; u.CompletionTokens != 24 || u.PromptTokens < 1 || u.TotalTokens != u.PromptTokens+24 {
				t.Fatalf("usage: got %+v, want 24 completion tokens", u)
			}
			if mode == "extension" && (got.Minfer.Sampler != "greedy" || got.Minfer.Identity != "ok") {
				t.Fatalf("extension: got %+v, want sampler greedy, identity ok", got.Minfer)
			}
			if mode == "stream" && got.Chunks < 4 {
				t.Fatalf("stream: got %d chunks, want the role, text, final and usage chunks", got.Chunks)
			}
		})
	}
}

// readSSE checks OpenAI's SSE framing byte for byte: the body is a sequence of
// "data: <one-line JSON object>\n\n" events ending with exactly "data: [DONE]\n\n".
// It returns the decoded events.
func readSSE(body []byte) ([]map[string]any, error) {
	var events []map[string]any
	rest := body
	for {
		if !bytes.HasPrefix(rest, []byte("data: ")) {
			return nil, fmt.Errorf("event %d at byte %d: want \"data: \", got %q", len(events), len(body)-len(rest), head(rest))
		}
		end := bytes.Index(rest, []byte("\n\n"))
		if end < 0 {
			return nil, fmt.Errorf("event %d: no terminating blank line: %q", len(events), head(rest))
		}
		payload := rest[len("data: "):end]
		rest = rest[end+2:]
		if bytes.Equal(payload, []byte("[DONE]")) {
			if len(rest) != 0 {
				return nil, fmt.Errorf("%d bytes after data: [DONE]: %q", len(rest), head(rest))
			}
			return events, nil
		}
		if bytes.ContainsAny(payload, "\r\n") {
			return nil, fmt.Errorf("event %d: payload spans lines: %q", len(events), payload)
		}
		var ev map[string]any
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, fmt.Errorf("event %d: %v: %q", len(events), err, payload)
		}
		events = append(events, ev)
		if len(rest) == 0 {
			return nil, fmt.Errorf("stream ended after %d events without data: [DONE]", len(events))
		}
	}
}

func head(b []byte) []byte { return b[:min(len(b), 80)] }

// TestSSEFramingCurl streams with curl -N (a client that knows nothing of OpenAI) and
// checks the framing and the chunks' shape on both endpoints.
func TestSSEFramingCurl(t *testing.T) {
	needTool(t, "curl")
	url, _ := startServe(t, "--config", emptyConfig(t), "--ctx", "256")
	const prompt = "Once upon a time"
	want := chatText(t, url, prompt)
	for _, tc := range []struct {
		name, path, body, object string
		chat                     bool
	}{
		{"chat", "/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":24,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`, prompt), "chat.completion.chunk", true},
		{"completions", "/v1/completions", `{"prompt":"Once upon a time","max_tokens":24,"temperature":0,"stream":true}`, "text_completion", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := filepath.Join(t.TempDir(), "headers")
			out, err := exec.Command("curl", "-sS", "-N", "--fail-with-body", "-D", hdr, "-H", "Content-Type: application/json",
				"-d", tc.body, url+tc.path).Output()
			if err != nil {
				t.Fatalf("curl: %v\n%s", err, out)
			}
			h, _ := os.ReadFile(hdr)
			if !strings.Contains(strings.ToLower(string(h)), "content-type: text/event-stream") {
				t.Fatalf("headers lack text/event-stream:\n%s", h)
			}
			events, err := readSSE(out)
			if err != nil {
				t.Fatalf("framing: %v\nbody:\n%s", err, out)
			}
			var text strings.Builder
			finishes := 0
			for i, ev := range events {
				if ev["object"] != tc.object || ev["id"] != events[0]["id"] {
					t.Fatalf("event %d: object %v id %v, want %s and the first event's id %v", i, ev["object"], ev["id"], tc.object, events[0]["id"])
				}
				choices, _ := ev["choices"].([]any)
				for _, c := range choices {
					c := c.(map[string]any)
					if tc.chat {
						d, _ := c["delta"].(map[string]any)
						if i == 0 && d["role"] != "assistant" {
							t.Fatalf("first chunk: delta %v, want role assistant", d)
						}
						s, _ := d["content"].(string)
						text.WriteString(s)
					} else {
						s, _ := c["text"].(string)
						text.WriteString(s)
					}
					if c["finish_reason"] != nil {
						finishes++
						if c["finish_reason"] != "length" {
							t.Fatalf("finish_reason %v, want length", c["finish_reason"])
						}
					}
				}
			}
			if finishes != 1 {
				t.Fatalf("got %d chunks with a finish_reason, want 1", finishes)
			}
			if tc.chat {
				if text.String() != want {
					t.Fatalf("streamed text %q, want the non-streamed %q", text.String(), want)
				}
				last := events[len(events)-1]
				u, _ := last["usage"].(map[string]any)
				if c, _ := last["choices"].([]any); len(c) != 0 || u["completion_tokens"] != float64(24) {
					t.Fatalf("last event %v: want empty choices and usage with 24 completion tokens", last)
				}
			} else if text.Len() == 0 {
				t.Fatal("completions stream carried no text")
			}
		})
	}
}

// TestReadSSE: the framing checker rejects what OpenAI clients would choke on.
func TestReadSSE(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		events     int
		ok         bool
	}{
		{"good", "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n", 2, true},
		{"only done", "data: [DONE]\n\n", 0, true},
		{"no done", "data: {\"a\":1}\n\n", 0, false},
		{"bytes after done", "data: [DONE]\n\n\n", 0, false},
		{"missing space", "data:{\"a\":1}\n\ndata: [DONE]\n\n", 0, false},
		{"single newline", "data: {\"a\":1}\ndata: [DONE]\n\n", 0, false},
		{"event field", "event: x\ndata: {}\n\ndata: [DONE]\n\n", 0, false},
		{"not json", "data: hello\n\ndata: [DONE]\n\n", 0, false},
		{"done unterminated", "data: [DONE]\n", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := readSSE([]byte(tc.body))
			if (err == nil) != tc.ok || len(evs) != tc.events {
				t.Fatalf("got %d events, err %v; want %d events, ok %v", len(evs), err, tc.events, tc.ok)
			}
		})
	}
}
