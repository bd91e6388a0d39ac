// Package repl is the chat REPL of minfer run --chat (alias --cnv) with no -p/-f.
package repl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/chzyer/readline"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/core/server"
	"github.com/minfer/minfer/core/tokenizer"
	"github.com/minfer/minfer/internal/cli"
	"github.com/minfer/minfer/internal/stack"
)

// The chat REPL (`minfer run --chat` with no -p/-f, alias --cnv).
//
// Each turn renders the whole conversation with the model's chat template and encodes
// it exactly as the server does (server.RenderChat, server.EncodePrompt), so a greedy
// reply here is the server's reply. The session keeps the conversation's KV cache:
// engine.Session reuses the longest prefix the new prompt shares with what it holds,
// so a turn prefills only its new tokens (the rendered reply re-tokenizes like the
// generated tokens in the common case; where it does not, the cache is reused up to the
// first difference).
//
// On a terminal the REPL reads with github.com/chzyer/readline (line editing, history)
// and owns SIGINT: Ctrl-C during a reply stops that reply (what was generated stays in
// the history), Ctrl-C or Ctrl-D at an empty prompt leaves. When stdin is not a
// terminal it reads one turn per line, so it can be driven by a pipe.

const chatHelp = `Commands:
  /reset         forget the conversation (the system prompt stays)
  /system TEXT   set the system prompt (/system alone shows it)
  /stats         timings and speculative statistics of the last reply
  /help          this text
  /exit          leave (also Ctrl-D, or Ctrl-C at an empty prompt)
A line starting with // sends the rest of it starting with /.
Ctrl-C during a reply stops the reply and keeps what it wrote.
`

// Options are Run's options: the streams and what the command line asked of each reply.
type Options struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	System         string   // the system prompt (-sys; /system changes it)
	Stop           []string // stop strings of every reply
	TopLogits      int      // as run --top-logits
	Verbose        bool     // print each reply's timings on Stderr
}

// repl is one conversation on a stack.
type repl struct {
	o      Options
	st     *stack.Stack
	cfg    *config.Config
	system string
	msgs   []tokenizer.Message // user and assistant turns, in order
	last   *engine.Result
	reused int // prompt tokens of the last reply that came from the cache (the engine's count)
	failed int // turns that ended with an error (non-interactive mode reports them)
}

// lineReader reads one user line; io.EOF ends the conversation, cli.ErrInterrupted is
// Ctrl-C at the prompt (with the discarded line).
type lineReader interface {
	readLine() (string, error)
	close()
}

// Run runs the REPL on st until /exit, end of input or Ctrl-C at an empty prompt.
func Run(ctx context.Context, st *stack.Stack, cfg *config.Config, o Options) error {
	r := &repl{o: o, st: st, cfg: cfg, system: o.System}
	if in, ok := o.Stdin.(*os.File); ok && readline.IsTerminal(int(in.Fd())) {
		return r.interactive(ctx, in)
	}
	return r.loop(ctx, &pipeReader{in: newScanner(o.Stdin), prompt: o.Stderr}, nil)
}

func newScanner(r io.Reader) *bufio.Scanner {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	return s
}

// pipeReader reads turns line by line, writing a "> " prompt before each.
type pipeReader struct {
	in     *bufio.Scanner
	prompt io.Writer
}

func (p *pipeReader) readLine() (string, error) {
	fmt.Fprint(p.prompt, "> ")
	if !p.in.Scan() {
		fmt.Fprintln(p.prompt)
		if err := p.in.Err(); err != nil {
			return "", err
		}
		return "", io.EOF
	}
	return p.in.Text(), nil
}

func (p *pipeReader) close() {}

// termReader is readline on a terminal.
type termReader struct{ rl *readline.Instance }

func (t *termReader) readLine() (string, error) {
	line, err := t.rl.Readline()
	if errors.Is(err, readline.ErrInterrupt) {
		return line, cli.ErrInterrupted
	}
	return line, err
}

func (t *termReader) close() { t.rl.Close() }

// interrupts turns SIGINT into "stop the current reply" and SIGTERM into "stop the
// reply and leave" while the REPL runs on a terminal.
type interrupts struct {
	mu     sync.Mutex
	cancel context.CancelFunc // the running reply's, nil between replies
	quit   bool
}

func (i *interrupts) set(c context.CancelFunc) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.cancel = c
}

func (i *interrupts) signal(sig os.Signal, closeInput func()) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.cancel != nil {
		i.cancel()
	}
	if sig == syscall.SIGTERM {
		i.quit = true
		closeInput()
	}
}

func (i *interrupts) quitting() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.quit
}

// interactive runs the REPL on a terminal. main's signal context is cancelled by the
// first Ctrl-C, so replies run under a context detached from it and this REPL watches
// the signals itself.
func (r *repl) interactive(ctx context.Context, in *os.File) error {
	rl, err := readline.NewEx(&readline.Config{
		Prompt:          "> ",
		HistoryFile:     historyFile(),
		InterruptPrompt: "^C",
		EOFPrompt:       "",
		Stdin:           in,
		Stdout:          r.o.Stderr,
		Stderr:          r.o.Stderr,
	})
	if err != nil {
		return fmt.Errorf("chat: terminal: %w", err)
	}
	tr := &termReader{rl: rl}
	defer tr.close()
	intr := &interrupts{}
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigc)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case sig := <-sigc:
				intr.signal(sig, tr.close)
			case <-done:
				return
			}
		}
	}()
	fmt.Fprintln(r.o.Stderr, "minfer chat: type a message, /help for commands, Ctrl-D to leave.")
	return r.loop(context.WithoutCancel(ctx), tr, intr)
}

// historyFile is where readline keeps the line history ("" when there is no cache
// directory).
func historyFile() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	dir = filepath.Join(dir, "minfer")
	if os.MkdirAll(dir, 0o755) != nil {
		return ""
	}
	return filepath.Join(dir, "chat_history")
}

// loop reads turns until the conversation ends. intr is nil when not on a terminal.
func (r *repl) loop(ctx context.Context, in lineReader, intr *interrupts) error {
	for {
		line, err := in.readLine()
		switch {
		case errors.Is(err, cli.ErrInterrupted):
			if strings.TrimSpace(line) == "" {
				return nil
			}
			continue // Ctrl-C on a typed line discards it
		case errors.Is(err, io.EOF) || (intr != nil && intr.quitting()):
			return r.endErr(intr)
		case err != nil:
			return fmt.Errorf("chat: reading input: %w", err)
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "/") && !strings.HasPrefix(line, "//") {
			if exit := r.command(line); exit {
				return r.endErr(intr)
			}
			continue
		}
		line = strings.TrimPrefix(line, "/")
		if err := r.turn(ctx, line, intr); err != nil {
			return err
		}
		if intr != nil && intr.quitting() {
			return nil
		}
	}
}

// endErr is the loop's result at the end of input: turns that failed make a
// non-interactive run fail, so scripts notice.
func (r *repl) endErr(intr *interrupts) error {
	if r.failed > 0 && intr == nil {
		return fmt.Errorf("chat: %d turn(s) failed", r.failed)
	}
	return nil
}

// command runs a /command and reports whether the REPL should exit.
func (r *repl) command(line string) bool {
	name, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	w := r.o.Stderr
	switch name {
	case "/exit", "/quit":
		return true
	case "/help":
		fmt.Fprint(w, chatHelp)
	case "/reset":
		r.msgs = nil
		r.last = nil
		fmt.Fprintln(w, "conversation cleared")
	case "/system":
		if arg == "" {
			if r.system == "" {
				fmt.Fprintln(w, "system prompt: (none)")
			} else {
				fmt.Fprintf(w, "system prompt: %s\n", r.system)
			}
			return false
		}
		r.system = arg
		fmt.Fprintln(w, "system prompt set")
	case "/stats":
		r.printStats()
	default:
		fmt.Fprintf(w, "unknown command %s (try /help)\n", name)
	}
	return false
}

// conversation is the message list the template renders.
func (r *repl) conversation() []tokenizer.Message {
	msgs := make([]tokenizer.Message, 0, len(r.msgs)+1)
	if r.system != "" {
		msgs = append(msgs, tokenizer.Message{Role: "system", Content: r.system})
	}
	return append(msgs, r.msgs...)
}

// turn sends one user message and streams the reply. Only an error that makes the
// stack unusable is returned; a failed turn is reported and dropped.
func (r *repl) turn(ctx context.Context, text string, intr *interrupts) error {
	r.msgs = append(r.msgs, tokenizer.Message{Role: "user", Content: text})
	fail := func(format string, args ...any) error {
		r.msgs = r.msgs[:len(r.msgs)-1]
		r.failed++
		fmt.Fprintf(r.o.Stderr, "error: "+format+"\n", args...)
		return nil
	}
	prompt, err := server.RenderChat(ctx, r.st.Tok, r.st.ChatTemplate, r.conversation())
	if err != nil {
		return fail("chat template: %v", err)
	}
	ids, err := server.EncodePrompt(ctx, r.st.Tok, prompt)
	if err != nil {
		return fail("%v", err)
	}
	if n := r.st.Sess.Ctx(); len(ids) >= n {
		return fail("the conversation is %d tokens; the context holds %d (/reset starts over)", len(ids), n)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := r.st.Request(rctx, r.cfg, ids)
	if err != nil {
		return fail("%v", err)
	}
	req.Stop, req.TopLogits = r.o.Stop, r.o.TopLogits
	req.OnText = func(s string) error { _, err := io.WriteString(r.o.Stdout, s); return err }
	if intr != nil {
		intr.set(cancel)
		defer intr.set(nil)
	}
	res, err := r.st.Sess.Generate(rctx, req)
	r.st.CloseRequest()
	interrupted := intr != nil && rctx.Err() != nil && res != nil
	if err != nil && !interrupted {
		if res != nil && res.Text != "" {
			fmt.Fprintln(r.o.Stdout)
		}
		if errors.Is(err, engine.ErrContextFull) {
			return fail("%v (/reset starts over)", err)
		}
		if ctx.Err() != nil {
			return err // the whole command was cancelled
		}
		return fail("%v", err)
	}
	fmt.Fprintln(r.o.Stdout)
	if interrupted {
		fmt.Fprintln(r.o.Stderr, "[reply stopped]")
		res.Stop = "interrupted"
	}
	r.last, r.reused = res, res.CachedTokens
	r.msgs = append(r.msgs, tokenizer.Message{Role: "assistant", Content: res.Text})
	if r.o.Verbose {
		stack.PrintTimings(r.o.Stderr, res, r.st.Speculates(r.cfg))
	}
	return nil
}

func (r *repl) printStats() {
	w := r.o.Stderr
	if r.last == nil {
		fmt.Fprintln(w, "no reply yet")
		return
	}
	res := r.last
	fmt.Fprintf(w, "conversation: %d messages; last prompt %d tokens, %d reused from the cache, %d prefilled\n",
		len(r.msgs), res.PromptTokens, r.reused, res.PromptTokens-r.reused)
	stack.PrintTimings(r.o.Stderr, res, r.st.Speculates(r.cfg))
	if r.st.Draft == nil {
		fmt.Fprintf(w, "spec: off (no --draft): %d plain decoding steps\n", res.Spec.Rounds)
	}
}
