package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minfer/minfer/internal/cli"
)

// TestChatHelperProcess is the minfer binary for TestChatTmux: the test binary runs
// itself with MINFER_HELPER_ARGS set, and this runs main's code on the real terminal.
func TestChatHelperProcess(t *testing.T) {
	raw := os.Getenv("MINFER_HELPER_ARGS")
	if raw == "" {
		t.Skip("only run as TestChatTmux's child process")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	// as main() does
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, StderrTerminal: cli.IsTerminal(os.Stderr)}
	err := m.Run(ctx, args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "minfer: %v\n", err)
	}
	os.Exit(exitCode(err))
}

// tmuxPane drives one tmux session on a private server socket.
type tmuxPane struct {
	t    *testing.T
	sock string
}

func (p *tmuxPane) tmux(args ...string) string {
	p.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", p.sock}, args...)...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (p *tmuxPane) capture() string {
	p.t.Helper()
	return p.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "chat")
}

// waitFor polls the pane until ok accepts its text (60 s at most: a bound for a stuck
// child, not a timing assertion).
func (p *tmuxPane) waitFor(what string, ok func(screen string) bool) string {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := p.capture()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("waiting for %s; the pane shows:\n%s", what, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *tmuxPane) waitText(s string) string {
	p.t.Helper()
	return p.waitFor(fmt.Sprintf("%q", s), func(screen string) bool { return strings.Contains(screen, s) })
}

// TestChatTmux runs the REPL on a real terminal (tmux): readline input, a streamed
// reply stopped by Ctrl-C that stays in the conversation, /stats, and Ctrl-C at an
// empty prompt to leave.
func TestChatTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	args, _ := json.Marshal([]string{"run", "--config", emptyConfig(t), "--chat", "--temp", "0",
		"--ctx", "2048", "-n", "2000", "--threads", "1"})
	p := &tmuxPane{t: t, sock: filepath.Join(dir, "tmux.sock")}
	shq := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	cmd := fmt.Sprintf("env HOME=%s XDG_CACHE_HOME=%s MINFER_HELPER_ARGS=%s %s -test.run='^TestChatHelperProcess$'; echo EXIT=$?; sleep 120",
		shq(dir), shq(dir), shq(string(args)), shq(self))
	p.tmux("new-session", "-d", "-s", "chat", "-x", "160", "-y", "50", cmd)
	t.Cleanup(func() { exec.Command("tmux", "-S", p.sock, "kill-server").Run() })

	p.waitText("minfer chat:")
	p.tmux("send-keys", "-t", "chat", "Hello", "Enter")
	// a reply has started streaming when text follows the "> Hello" line
	replyStarted := regexp.MustCompile(`(?m)^> Hello\n\s*\S`)
	p.waitFor("the reply to start", replyStarted.MatchString)
	p.tmux("send-keys", "-t", "chat", "C-c")
	screen := p.waitText("[reply stopped]")
	if strings.Contains(screen, "EXIT=") {
		t.Fatalf("Ctrl-C during a reply left the REPL:\n%s", screen)
	}
	p.waitFor("a new prompt", func(s string) bool {
		i := strings.Index(s, "[reply stopped]")
		return strings.Contains(s[i:], "\n> ")
	})
	p.tmux("send-keys", "-t", "chat", "/stats", "Enter")
	screen = p.waitText("reused from the cache")
	// the stopped reply stays in the conversation: user + assistant
	if !strings.Contains(screen, "conversation: 2 messages") {
		t.Fatalf("/stats after a stopped reply: want 2 messages in the conversation:\n%s", screen)
	}
	// Ctrl-C on a typed line discards the line and stays
	p.tmux("send-keys", "-t", "chat", "not sent", "C-c")
	p.tmux("send-keys", "-t", "chat", "/help", "Enter")
	screen = p.waitText("Commands:")
	if strings.Contains(screen, "EXIT=") {
		t.Fatalf("Ctrl-C on a typed line left the REPL:\n%s", screen)
	}
	p.tmux("send-keys", "-t", "chat", "C-c")
	screen = p.waitText("EXIT=")
	if !strings.Contains(screen, "EXIT=0") {
		t.Fatalf("Ctrl-C at an empty prompt: want exit status 0:\n%s", screen)
	}
	t.Logf("pane:\n%s", screen)
	if strings.Contains(screen, "conversation: 3") || strings.Contains(screen, "not sent\n") {
		t.Fatalf("the discarded line was sent:\n%s", screen)
	}

	// Ctrl-D at an empty prompt leaves too
	// (a second tmux server: a new session on the first one races with its exit)
	p2 := &tmuxPane{t: t, sock: filepath.Join(dir, "tmux2.sock")}
	p2.tmux("new-session", "-d", "-s", "chat", "-x", "160", "-y", "50", cmd)
	t.Cleanup(func() { exec.Command("tmux", "-S", p2.sock, "kill-server").Run() })
	p2.waitText("minfer chat:")
	p2.tmux("send-keys", "-t", "chat", "C-d")
	if screen := p2.waitText("EXIT="); !strings.Contains(screen, "EXIT=0") {
		t.Fatalf("Ctrl-D at an empty prompt: want exit status 0:\n%s", screen)
	}
}
