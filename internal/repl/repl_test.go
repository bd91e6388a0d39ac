package repl

import (
	"context"
	"io"
	"sync/atomic"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/internal/stack"
	"github.com/minfer/minfer/internal/testpath"
)

// countingBackend counts the token rows the model embeds: prompt rows prefilled plus
// one per decoding step.
type countingBackend struct {
	backend.Backend
	rows atomic.Int64
}

func (c *countingBackend) Embed(dst backend.Buffer, table backend.Weight, ids backend.Buffer, nt int) {
	c.rows.Add(int64(nt))
	c.Backend.Embed(dst, table, ids, nt)
}

// testStack opens a stack of the embedded model on b.
func testStack(t *testing.T, b backend.Backend, cfg *config.Config) *stack.Stack {
	t.Helper()
	path := testpath.Path(t, "models", "stories260K.gguf")
	o := stack.Options{Backend: b, Embedded: func() (*gguf.File, error) { return gguf.Open(path) }}
	st, err := stack.Open(context.Background(), cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// TestChatPrefillsOnlyNewTokens counts the rows the backend embeds per turn: a turn
// computes only the tokens the cache does not hold.
func TestChatPrefillsOnlyNewTokens(t *testing.T) {
	cfg := config.Default()
	cfg.Model.Ctx = 512
	cfg.Sampling.Temperature = 0
	cfg.Sampling.NPredict = 8
	b := &countingBackend{Backend: cpu.New(cpu.Options{Threads: 1})}
	st := testStack(t, b, cfg)
	r := &repl{o: Options{Stdout: io.Discard, Stderr: io.Discard}, st: st, cfg: cfg}
	prevPrompt := 0
	for i, msg := range []string{"Hello", "Tell me a story", "And then?"} {
		before := b.rows.Load()
		if err := r.turn(context.Background(), msg, nil); err != nil || r.failed > 0 {
			t.Fatalf("turn %d: %v (failed %d)", i, err, r.failed)
		}
		if r.last.Stop != engine.StopLength {
			t.Fatalf("turn %d ended by %s; the row count below assumes the length limit", i, r.last.Stop)
		}
		rows := int(b.rows.Load() - before)
		// prefill of prompt[reused:n-1], then one row per generated token
		want := r.last.PromptTokens - 1 - r.reused + len(r.last.Tokens)
		if rows != want {
			t.Fatalf("turn %d: got %d rows computed, want %d (prompt %d, reused %d, generated %d)",
				i, rows, want, r.last.PromptTokens, r.reused, len(r.last.Tokens))
		}
		if i > 0 && r.reused < prevPrompt {
			t.Fatalf("turn %d: reused %d tokens, want at least the previous prompt's %d", i, r.reused, prevPrompt)
		}
		prevPrompt = r.last.PromptTokens
	}
}
