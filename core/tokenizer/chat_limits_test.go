package tokenizer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// hostileChatTemplates are chat templates a downloaded GGUF may carry that, before
// renders were bounded, killed minfer (a Go stack overflow or out of memory is fatal)
// or rendered until SIGKILL. They seed FuzzChatTemplate too.
var hostileChatTemplates = map[string]string{
	"recursive macro": `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`,
	"range 1e9":       `{% for i in range(1000000000) %}{{ i }}{% endfor %}`,
	"string doubling": `{% set ns = namespace(s=messages[0].content) %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}`,
	"nested loops":    `{% for m in range(100000) %}{% for n in range(100000) %}{% if n == -1 %}x{% endif %}{% endfor %}{% endfor %}`,
	"self-holding":    `{% set l = [messages] %}{% set _ = l.append(l) %}{{ l | tojson }}`,
}

var chatHi = []Message{{Role: "user", Content: "Hi"}}

// TestHostileChatTemplatesFailNamingTheTemplate: every hostile template ends in an
// error that names the template and the limit, under the default limits.
func TestHostileChatTemplatesFailNamingTheTemplate(t *testing.T) {
	for name, src := range hostileChatTemplates {
		t.Run(name, func(t *testing.T) {
			_, err := RenderTemplateContext(context.Background(), src, chatHi, true, "<s>", "</s>", RenderOptions{Name: "tokenizer.chat_template"})
			var le *RenderLimitError
			if !errors.As(err, &le) {
				t.Fatalf("got %v, want a *RenderLimitError", err)
			}
			if !strings.Contains(err.Error(), "chat template tokenizer.chat_template: render stopped: ") {
				t.Errorf("got %q, want it to name the template and say the render stopped", err)
			}
		})
	}
}

// TestChatTemplateHonoursContext: a cancelled request stops its render.
func TestChatTemplateHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	o := RenderOptions{Limits: RenderLimits{MaxSteps: 1 << 62, Timeout: time.Hour}}
	_, err := RenderTemplateContext(ctx, hostileChatTemplates["nested loops"], chatHi, true, "", "", o)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// TestRealTemplatesFarBelowTheLimits: the Qwen3 and Llama 3 templates with tools over
// 100 messages of 1 KB (about 150 KB of prompt, some 40K tokens) render under a
// hundredth of the default step, output and allocation limits (and a fifth of the
// depth), so the defaults do not refuse a real template over a long context.
func TestRealTemplatesFarBelowTheLimits(t *testing.T) {
	var msgs []Message
	long := strings.Repeat("All work and no play makes Jack a dull boy. ", 23)
	for i := range 50 {
		msgs = append(msgs, Message{Role: "user", Content: fmt.Sprintf("%d %s", i, long)},
			Message{Role: "assistant", Content: long, ReasoningContent: "thinking " + long})
	}
	tools := []any{map[string]any{"type": "function", "function": map[string]any{
		"name": "get_weather", "description": "the weather in a city",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}
	d := DefaultRenderLimits
	small := RenderLimits{MaxSteps: d.MaxSteps / 100, MaxOutput: d.MaxOutput / 100, MaxAlloc: d.MaxAlloc / 100, MaxDepth: d.MaxDepth / 5}
	for _, name := range []string{"qwen3", "llama3"} {
		t.Run(name, func(t *testing.T) {
			tok := loadHF(t, name)
			out, err := tok.RenderChatOptions(msgs, true, RenderOptions{Tools: tools, Limits: small})
			if err != nil {
				t.Fatal(err)
			}
			if len(out) < 100*len(long) {
				t.Fatalf("rendered %d bytes, want at least the %d of the messages", len(out), 100*len(long))
			}
		})
	}
}

// FuzzChatTemplate renders arbitrary templates over a small conversation: any
// template must render or fail with an error, never panic, overflow the stack, run
// out of memory or hang. The seeds are the templates that once did.
func FuzzChatTemplate(f *testing.F) {
	for _, src := range hostileChatTemplates {
		f.Add(src)
	}
	for _, name := range BuiltinTemplateNames() {
		src, _ := BuiltinTemplate(name)
		f.Add(src)
	}
	f.Add(`{{ messages[0].content | tojson(indent=2) }}{{ (messages * 3) | length }}`)
	// Small limits keep each input fast; the defaults only scale them.
	lim := RenderLimits{MaxSteps: 200_000, MaxOutput: 1 << 20, MaxAlloc: 16 << 20, Timeout: time.Second}
	f.Fuzz(func(t *testing.T, src string) {
		_, err := RenderTemplateContext(context.Background(), src, chatHi, true, "<s>", "</s>", RenderOptions{Limits: lim})
		if err != nil && !strings.HasPrefix(err.Error(), "tokenizer: chat template: ") {
			t.Fatalf("error %q does not name the template", err)
		}
	})
}
