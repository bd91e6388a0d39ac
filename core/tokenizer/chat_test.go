package tokenizer

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/minfer/minfer/internal/testpath"
)

// TestRendersJSON renders every case of shared/testdata/chat/renders.json with the
// template from its tokenizer_config.json and compares byte for byte.
func TestRendersJSON(t *testing.T) {
	b, err := os.ReadFile(testpath.Path(t, "chat", "renders.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Cases []struct {
			Tokenizer string    `json:"tokenizer"`
			Messages  []Message `json:"messages"`
			AddGen    bool      `json:"add_generation_prompt"`
			BOS       string    `json:"bos_token"`
			EOS       string    `json:"eos_token"`
			Rendered  string    `json:"rendered"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Cases) == 0 {
		t.Fatal("no cases")
	}
	for i, c := range r.Cases {
		name := strings.TrimPrefix(c.Tokenizer, "tokenizer/hf/")
		tok := loadHF(t, name)
		t.Run(name, func(t *testing.T) {
			// Through the tokenizer (its own BOS/EOS texts) and through RenderTemplate
			// with the case's variables.
			got, err := RenderTemplate(tok.ChatTemplate(), c.Messages, c.AddGen, c.BOS, c.EOS)
			if err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			if got != c.Rendered {
				t.Fatalf("case %d:\n got %q\nwant %q", i, got, c.Rendered)
			}
			got, err = tok.RenderChat(c.Messages, c.AddGen)
			if err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			if got != c.Rendered {
				t.Fatalf("case %d RenderChat:\n got %q\nwant %q", i, got, c.Rendered)
			}
		})
	}
}

func TestRealTemplates(t *testing.T) {
	qwen, llama := loadHF(t, "qwen3"), loadHF(t, "llama3")
	multi := []Message{
		{Role: "system", Content: "You are terse."},
		{Role: "user", Content: "Hi"},
		{Role: "assistant", Content: "Hello."},
		{Role: "user", Content: "  Spaces  "},
	}
	for _, tc := range []struct {
		name   string
		tok    *Tokenizer
		msgs   []Message
		addGen bool
		want   string
	}{
		{"qwen3 multi-turn", qwen, multi, true,
			"<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\n  Spaces  <|im_end|>\n<|im_start|>assistant\n"},
		{"qwen3 think stripped from history", qwen, []Message{
			{Role: "user", Content: "a"}, {Role: "assistant", Content: "<think>\nr\n</think>\n\nb"}, {Role: "user", Content: "c"}}, false,
			"<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n<|im_start|>user\nc<|im_end|>\n"},
		{"qwen3 think kept after last query", qwen, []Message{
			{Role: "user", Content: "a"}, {Role: "assistant", Content: "<think>\nr\n</think>\n\nb"}}, false,
			"<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n<think>\nr\n</think>\n\nb<|im_end|>\n"},
		{"qwen3 tool turn", qwen, []Message{{Role: "user", Content: "w?"}, {Role: "tool", Content: "sunny"}}, true,
			"<|im_start|>user\nw?<|im_end|>\n<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n"},
		{"llama3 multi-turn trims", llama, multi, true,
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nSpaces<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.tok.RenderChat(tc.msgs, tc.addGen)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestBuiltinTemplates(t *testing.T) {
	msgs := []Message{{Role: "system", Content: "S"}, {Role: "user", Content: " U1 "}, {Role: "assistant", Content: "A1"}, {Role: "user", Content: "U2"}}
	for _, tc := range []struct{ name, want string }{
		{"chatml", "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n U1 <|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n"},
		{"llama3", "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU1<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nA1<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nU2<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"llama2", "[INST] <<SYS>>\nS\n<</SYS>>\n\n U1  [/INST]A1</s>[INST] U2 [/INST]"},
		{"phi3", "<|system|>\nS<|end|>\n<|user|>\n U1 <|end|>\n<|assistant|>\nA1<|end|>\n<|user|>\nU2<|end|>\n<|assistant|>\n"},
		{"gemma", "<start_of_turn>user\nS\n\nU1<end_of_turn>\n<start_of_turn>model\nA1<end_of_turn>\n<start_of_turn>user\nU2<end_of_turn>\n<start_of_turn>model\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, ok := BuiltinTemplate(tc.name)
			if !ok {
				t.Fatal("missing")
			}
			got, err := RenderTemplate(src, msgs, true, "<s>", "</s>")
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("\n got %q\nwant %q", got, tc.want)
			}
		})
	}
	if _, ok := BuiltinTemplate("nope"); ok {
		t.Fatal("BuiltinTemplate(nope) ok")
	}
}

func TestTemplateErrors(t *testing.T) {
	if _, err := RenderTemplate("{% for %}", nil, false, "", ""); err == nil {
		t.Fatal("syntax error not reported")
	}
	if _, err := RenderTemplate("{{ raise_exception('no system role') }}", nil, false, "", ""); err == nil {
		t.Fatal("raise_exception not reported")
	}
	spm := loadGGUF(t, "models", "stories260K.gguf")
	if _, err := spm.RenderChat([]Message{{Role: "user", Content: "x"}}, true); err != ErrNoTemplate {
		t.Fatalf("RenderChat without template: %v, want ErrNoTemplate", err)
	}
}

// TestQwen3ToolsAndThinking drives the Qwen3 template's tools, tool-call, tool-result,
// reasoning and enable_thinking branches.
func TestQwen3ToolsAndThinking(t *testing.T) {
	qwen := loadHF(t, "qwen3")
	call := ToolCall{}
	call.Function.Name = "get_weather"
	call.Function.Arguments = `{"city": "Paris"}`
	msgs := []Message{
		{Role: "system", Content: "S"},
		{Role: "user", Content: "weather?"},
		{Role: "assistant", Content: "Checking.", ReasoningContent: "need a tool", ToolCalls: []ToolCall{call}},
		{Role: "tool", Content: "sunny", ToolCallID: "1", Name: "get_weather"},
		{Role: "tool", Content: "warm"},
	}
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}}
	off := false
	got, err := qwen.RenderChatOptions(msgs, true, RenderOptions{Tools: tools, EnableThinking: &off})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"<|im_start|>system\nS\n\n# Tools",
		`{"function": {"name": "get_weather"}, "type": "function"}`,
		"<|im_start|>assistant\n<think>\nneed a tool\n</think>\n\nChecking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n",
		"<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\nwarm\n</tool_response><|im_end|>\n",
		"<|im_start|>assistant\n<think>\n\n</think>\n\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rendered prompt lacks %q:\n%s", want, got)
		}
	}
	// Vars never override the core variables.
	got2, err := qwen.RenderChatOptions(msgs[:2], true, RenderOptions{Vars: map[string]any{"add_generation_prompt": false}})
	if err != nil || !strings.HasSuffix(got2, "<|im_start|>assistant\n") {
		t.Fatalf("Vars overrode add_generation_prompt: %q %v", got2, err)
	}
}
