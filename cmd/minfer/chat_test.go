package main

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/minfer/minfer/core/tokenizer"
	"github.com/minfer/minfer/internal/testpath"
)

// replies splits the REPL's stdout into its replies (one line each).
func replies(out string) []string {
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}

// TestChatPipe drives the REPL through a pipe: multi-turn, commands, a bad command,
// /reset and /exit.
func TestChatPipe(t *testing.T) {
	cfg := emptyConfig(t)
	args := []string{"run", "--config", cfg, "--cnv", "-n", "8", "--temp", "0", "--ctx", "512"}
	script := strings.Join([]string{
		"Hello",
		"/stats",
		"/bogus",
		"Tell me a story",
		"/stats",
		"/reset",
		"Hello",
		"/system You are a pirate.",
		"/system",
		"Hello",
		"/help",
		"/exit",
		"Never read",
	}, "\n") + "\n"
	out, stderr, err := runCLI(t, script, args...)
	if err != nil {
		t.Fatalf("chat: %v\n%s", err, stderr)
	}
	got := replies(out)
	if len(got) != 4 {
		t.Fatalf("got %d replies %q, want 4 (the line after /exit is not read)", len(got), got)
	}
	for _, want := range []string{
		"unknown command /bogus (try /help)",
		"conversation cleared",
		"system prompt set",
		"system prompt: You are a pirate.",
		"/system TEXT",
		"stop: length",
		"reused from the cache",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	t.Run("reset", func(t *testing.T) {
		// greedy: after /reset the same first message gets the same reply
		if got[2] != got[0] {
			t.Fatalf("reply after /reset: got %q, want the first reply %q", got[2], got[0])
		}
	})
	t.Run("system", func(t *testing.T) {
		if got[3] == got[2] {
			t.Fatalf("the system prompt changed nothing: %q", got[3])
		}
	})
	t.Run("second turn reuses the cache", func(t *testing.T) {
		// the first /stats is about the first turn (nothing cached), the second about
		// the second turn, which must reuse at least the first turn's prompt
		var reused []int
		for _, m := range regexp.MustCompile(`last prompt \d+ tokens, (\d+) reused`).FindAllStringSubmatch(stderr, -1) {
			n, _ := strconv.Atoi(m[1])
			reused = append(reused, n)
		}
		if len(reused) != 2 || reused[0] != 0 || reused[1] < 20 {
			t.Fatalf("reused tokens per /stats: got %v, want [0, ≥20]", reused)
		}
	})
}

// TestChatPipeMatchesServer: a multi-turn REPL conversation, with a system prompt,
// gives the server's greedy reply for the same messages.
func TestChatPipeMatchesServer(t *testing.T) {
	cfg := emptyConfig(t)
	common := []string{"--config", cfg, "--temp", "0", "--ctx", "512"}
	out, stderr, err := runCLI(t, "/system Be brief.\nHello\nWhat next?\n", append([]string{"run", "--chat", "-n", "12"}, common...)...)
	if err != nil {
		t.Fatalf("chat: %v\n%s", err, stderr)
	}
	got := replies(out)
	if len(got) != 2 {
		t.Fatalf("got replies %q, want 2", got)
	}
	url, stop := startServe(t, common...)
	defer stop()
	msgs := []tokenizer.Message{
		{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hello"},
		{Role: "assistant", Content: got[0]}, {Role: "user", Content: "What next?"},
	}
	body, _ := json.Marshal(map[string]any{"messages": msgs, "max_tokens": 12, "temperature": 0})
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("server: status %d, %v", resp.StatusCode, err)
	}
	if r.Choices[0].Message.Content != got[1] {
		t.Fatalf("second turn: REPL %q, server %q", got[1], r.Choices[0].Message.Content)
	}
}

func TestChatPipeErrors(t *testing.T) {
	cfg := emptyConfig(t)
	// a message that does not fit the context is reported, dropped, and the REPL goes
	// on; the failed turn makes the piped run fail at the end
	long := strings.Repeat("Once upon a time ", 30)
	out, stderr, err := runCLI(t, long+"\nHi\n", "run", "--config", cfg, "--chat", "-n", "4", "--temp", "0", "--ctx", "64")
	if err == nil || !strings.Contains(err.Error(), "1 turn(s) failed") {
		t.Fatalf("got err %v, want 1 failed turn", err)
	}
	if !strings.Contains(stderr, "the context holds 64") {
		t.Fatalf("stderr lacks the context error:\n%s", stderr)
	}
	if got := replies(out); len(got) != 1 || got[0] == "" {
		t.Fatalf("got replies %q, want one for the second message", got)
	}
}

// TestChatStatsSpeculative: with a draft model, /stats reports the last reply's
// speculative rounds by depth.
func TestChatStatsSpeculative(t *testing.T) {
	draft := testpath.Path(t, "models", "stories260K.gguf")
	out, stderr, err := runCLI(t, "Hello\n/stats\n", "run", "--config", emptyConfig(t), "--chat", "-n", "12", "--temp", "0",
		"--ctx", "256", "--draft", draft, "--depth", "3")
	if err != nil {
		t.Fatalf("chat: %v\n%s", err, stderr)
	}
	if got := replies(out); len(got) != 1 || got[0] == "" {
		t.Fatalf("got replies %q, want one", got)
	}
	for _, want := range []string{"spec: policy static", "depth  3:", "stop: length"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("/stats lacks %q:\n%s", want, stderr)
		}
	}
}
