package server

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/internal/enginetest"
	"github.com/minfer/minfer/sdk"
)

// rowCounter counts the token rows the model embeds: prefilled prompt rows plus one
// per decoding step.
type rowCounter struct {
	backend.Backend
	rows atomic.Int64
}

func (c *rowCounter) Embed(dst backend.Buffer, table backend.Weight, ids backend.Buffer, nt int) {
	c.rows.Add(int64(nt))
	c.Backend.Embed(dst, table, ids, nt)
}

// newCountingServer serves stories260K with parallel slots on a backend that counts
// the rows it computes.
func newCountingServer(t *testing.T, parallel int, res Resolver) (*rowCounter, *httptest.Server) {
	t.Helper()
	b := &rowCounter{Backend: cpu.New(cpu.Options{Threads: 1})}
	_, hs := serveStories(t, b, Options{Parallel: parallel, Resolver: res})
	return b, hs
}

type completion struct {
	text                string
	prompt, gen, cached int
	finish              string
}

func complete(t *testing.T, b *rowCounter, url, prompt string) (completion, int) {
	t.Helper()
	return completeN(t, b, url, prompt, 8)
}

func completeN(t *testing.T, b *rowCounter, url, prompt string, maxTokens int) (completion, int) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": maxTokens})
	before := b.rows.Load()
	code, out := post(t, url+"/v1/completions", string(body))
	if code != 200 {
		t.Fatalf("status %d: %v", code, out)
	}
	rows := int(b.rows.Load() - before)
	raw, _ := json.Marshal(out)
	var r struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			CompletionTokens    int `json:"completion_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("reply %s: %v", raw, err)
	}
	return completion{r.Choices[0].Text, r.Usage.PromptTokens, r.Usage.CompletionTokens,
		r.Usage.PromptTokensDetails.CachedTokens, r.Choices[0].FinishReason}, rows
}

// TestSlotReuse: a conversation's next request goes back to the slot that holds its
// prefix (with two idle slots, the FIFO order alone would pick the other one), and
// usage.prompt_tokens_details.cached_tokens is exactly what the engine did not
// recompute.
func TestSlotReuse(t *testing.T) {
	b, hs := newCountingServer(t, 2, testResolver{})
	check := func(name string, c completion, rows int) {
		t.Helper()
		if c.finish != "length" {
			t.Fatalf("%s: finish %s; the row count assumes the length limit", name, c.finish)
		}
		// prefill of prompt[cached:n-1], then one row per generated token
		if want := c.prompt - 1 - c.cached + c.gen; rows != want {
			t.Fatalf("%s: %d rows computed, want %d (prompt %d, cached %d, generated %d)", name, rows, want, c.prompt, c.cached, c.gen)
		}
	}
	const p1 = "Once upon a time"
	a, rows := complete(t, b, hs.URL, p1)
	check("first", a, rows)
	if a.cached != 0 {
		t.Fatalf("first request: %d cached tokens on a fresh server", a.cached)
	}
	next, rows := complete(t, b, hs.URL, p1+a.text+" Then")
	check("continuation", next, rows)
	if next.cached < a.prompt {
		t.Fatalf("continuation: %d cached tokens, want at least the first prompt's %d (it went to the other slot?)", next.cached, a.prompt)
	}
	other, rows := complete(t, b, hs.URL, "The dog ran to the park")
	check("unrelated", other, rows)
	if other.cached > 1 {
		t.Fatalf("unrelated prompt: %d cached tokens, want at most the BOS", other.cached)
	}
	// the conversation's slot was kept for it: the unrelated prompt took the other one
	again, rows := complete(t, b, hs.URL, p1+a.text+" Then"+next.text+" So")
	check("third turn", again, rows)
	if again.cached < next.prompt {
		t.Fatalf("third turn: %d cached tokens, want at least %d", again.cached, next.prompt)
	}
}

func TestCachedTokens(t *testing.T) {
	isEOG := func(id int32) bool { return id == 99 }
	for _, tc := range []struct {
		name    string
		held    []int32
		heldEOG bool
		prompt  []int32
		want    int
	}{
		{"nothing held", nil, false, []int32{1, 2, 3}, 0},
		{"continuation", []int32{1, 2, 3, 4}, false, []int32{1, 2, 3, 4, 5, 6}, 3}, // the newest held token was never cached
		{"same prompt", []int32{1, 2, 3}, false, []int32{1, 2, 3}, 2},              // the last prompt token always runs
		{"diverges", []int32{1, 2, 7, 8}, false, []int32{1, 2, 3, 4}, 2},
		{"eog written back", []int32{1, 2, 3}, true, []int32{1, 2, 3, 99, 5, 6}, 3},
		{"eog not written back", []int32{1, 2, 3}, true, []int32{1, 2, 3, 4, 5}, 3}, // the cache holds 1 2 3, the sequence 1 2 3 EOG
		{"one-token prompt", []int32{1, 2}, false, []int32{1}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CachedTokens(tc.held, tc.heldEOG, tc.prompt, isEOG); got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
}

// eogSampler is greedy but ends every generation with token eog after n tokens.
type eogSampler struct {
	enginetest.Greedy
	n   uint64
	eog int32
}

func (e eogSampler) Sample(ctx context.Context, r *sdk.SampleRound) (sdk.SampleResult, error) {
	if r.Step >= e.n {
		return sdk.SampleResult{Accepted: 0, Next: e.eog}, nil
	}
	return e.Greedy.Sample(ctx, r)
}

type eogResolver struct{ s eogSampler }

func (e eogResolver) Resolve(context.Context, Params, bool) (*Plugins, error) {
	return &Plugins{Sampler: e.s, SamplerName: "eog", Greedy: true}, nil
}

// TestSlotReuseAfterEOG: a reply that ended with an end-of-generation token, written
// back by the next prompt (as chat templates do), is counted as cached, exactly.
func TestSlotReuseAfterEOG(t *testing.T) {
	const eos = 2 // stories260K's </s>
	b, hs := newCountingServer(t, 1, eogResolver{eogSampler{n: 5, eog: eos}})
	const p1 = "Once upon a time"
	a, rows := completeN(t, b, hs.URL, p1, 50)
	if a.finish != "stop" || a.gen != 5 {
		t.Fatalf("first: finish %s after %d tokens, want stop after 5", a.finish, a.gen)
	}
	// rounds: 5 tokens and the EOG
	if want := a.prompt - 1 + a.gen + 1; rows != want {
		t.Fatalf("first: %d rows, want %d", rows, want)
	}
	next, rows := completeN(t, b, hs.URL, p1+a.text+"</s> The end", 50)
	if want := next.prompt - 1 - next.cached + next.gen + 1; rows != want {
		t.Fatalf("next: %d rows computed, want %d (prompt %d, cached %d, generated %d)", rows, want, next.prompt, next.cached, next.gen)
	}
	if want := a.prompt + a.gen; next.cached != want {
		t.Fatalf("next: %d cached tokens, want %d (the first prompt, its reply and the EOG before the cache's end)", next.cached, want)
	}
}

// TestIgnoreEOS: with llama-server's and vLLM's ignore_eos an end-of-generation token
// does not end the reply: it runs to max_tokens (what benchmarks rely on); without it
// the same sampler stops at the EOG.
func TestIgnoreEOS(t *testing.T) {
	const eos = 2 // stories260K's </s>
	_, hs := newCountingServer(t, 1, eogResolver{eogSampler{n: 3, eog: eos}})
	for _, tc := range []struct {
		ignore bool
		finish string
		gen    int
	}{{false, "stop", 3}, {true, "length", 12}} {
		body, _ := json.Marshal(map[string]any{"prompt": "Once upon a time", "max_tokens": 12, "ignore_eos": tc.ignore})
		code, out := post(t, hs.URL+"/v1/completions", string(body))
		if code != 200 {
			t.Fatalf("ignore_eos %v: status %d: %v", tc.ignore, code, out)
		}
		raw, _ := json.Marshal(out)
		var r struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(raw, &r); err != nil || len(r.Choices) != 1 {
			t.Fatalf("ignore_eos %v: reply %s (%v)", tc.ignore, raw, err)
		}
		if r.Choices[0].FinishReason != tc.finish || r.Usage.CompletionTokens != tc.gen {
			t.Fatalf("ignore_eos %v: finish %s after %d tokens, want %s after %d", tc.ignore, r.Choices[0].FinishReason, r.Usage.CompletionTokens, tc.finish, tc.gen)
		}
	}
}
