package tokenizer

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/minfer/minfer/core/tokenizer/internal/jinja"
)

// Message is one chat turn, as in the OpenAI API. Role is "system", "user", "assistant"
// or "tool" (templates decide what other roles mean); Content is the text. The optional
// fields reach the template only when set (templates test them with "is defined"):
// ReasoningContent (an assistant's thinking), ToolCalls (an assistant's calls),
// ToolCallID and Name (a tool result).
type Message struct {
	Role             string     `json:"role"`
	Content          string     `json:"content"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
	Name             string     `json:"name,omitempty"`
}

// ToolCall is one function call of an assistant message (OpenAI format: Arguments is
// the JSON text of the arguments).
type ToolCall struct {
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// RenderOptions are the optional template variables.
type RenderOptions struct {
	// Tools are the tool definitions (JSON-decoded OpenAI "tools" entries), passed as
	// the tools variable when non-empty.
	Tools []any
	// EnableThinking, when set, is passed as enable_thinking (Qwen3: false skips the
	// thinking block).
	EnableThinking *bool
	// Vars are further variables; they never replace messages, add_generation_prompt,
	// bos_token, eos_token, tools or enable_thinking.
	Vars map[string]any
	// Name names the template in errors (RenderChat names the model's template by
	// where it came from; "" for RenderTemplate says "chat template").
	Name string
	// Limits bound the render; zero fields take DefaultRenderLimits.
	Limits RenderLimits
}

// RenderLimits bound one render of a chat template: evaluation steps, nesting depth,
// output bytes, bytes allocated and wall time. A chat template is code from the model
// file; a render that passes a limit, or whose context ends, returns an error that
// names the template and the limit, and never takes the process down.
type RenderLimits = jinja.Limits

// DefaultRenderLimits are the limits of a zero RenderLimits: far above what real
// chat templates use (the Qwen3 template with tools over 100 messages of 1 KB uses
// under 1% of each), low enough that a hostile template stops within a second or so.
var DefaultRenderLimits = jinja.DefaultLimits

// RenderLimitError is the error (under the wrapping) of a render stopped by a limit
// or by its context; errors.Is(err, context.Canceled) holds for the latter.
type RenderLimitError = jinja.LimitError

// ErrNoTemplate is returned by RenderChat when the model ships no chat template.
var ErrNoTemplate = errors.New("tokenizer: model has no chat template (choose a built-in one: chatml, llama3, llama2, phi3, gemma)")

// RenderChat renders msgs with the model's own chat template (ChatTemplate), passing the
// vocabulary's BOS and EOS texts as bos_token and eos_token. It returns ErrNoTemplate
// when the model has none.
func (t *Tokenizer) RenderChat(msgs []Message, addGenerationPrompt bool) (string, error) {
	return t.RenderChatOptions(msgs, addGenerationPrompt, RenderOptions{})
}

// RenderChatOptions is RenderChat with tools, enable_thinking and further variables.
func (t *Tokenizer) RenderChatOptions(msgs []Message, addGenerationPrompt bool, o RenderOptions) (string, error) {
	return t.RenderChatContext(context.Background(), msgs, addGenerationPrompt, o)
}

// RenderChatContext is RenderChatOptions stopped when ctx ends (a request's context:
// a client that goes away stops its render).
func (t *Tokenizer) RenderChatContext(ctx context.Context, msgs []Message, addGenerationPrompt bool, o RenderOptions) (string, error) {
	if t.chatTpl == "" {
		return "", ErrNoTemplate
	}
	if o.Name == "" {
		o.Name = t.ChatTemplateName()
	}
	return RenderTemplateContext(ctx, t.chatTpl, msgs, addGenerationPrompt, t.TokenText(t.bos), t.TokenText(t.eos), o)
}

// ChatTemplateName says where the model's chat template came from, for errors:
// "tokenizer.chat_template" (GGUF metadata) or "chat_template of tokenizer_config.json".
func (t *Tokenizer) ChatTemplateName() string {
	if t.chatTplName == "" {
		return "the model's chat template"
	}
	return t.chatTplName
}

// tplCache holds compiled templates by source (compiled templates are immutable). It
// keeps at most tplCacheMax: a server sees one or two templates, a fuzzer millions.
var (
	tplCache    sync.Map // template source → *jinja.Template
	tplCacheLen atomic.Int64
)

const tplCacheMax = 64

// RenderTemplate renders a Jinja chat template the way Hugging Face's renderer does,
// with the variables messages (a list of {role, content}), add_generation_prompt,
// bos_token and eos_token. Templates are compiled once per distinct source. Errors name
// the template problem (syntax or a failing expression).
func RenderTemplate(tmpl string, msgs []Message, addGenerationPrompt bool, bos, eos string) (string, error) {
	return RenderTemplateOptions(tmpl, msgs, addGenerationPrompt, bos, eos, RenderOptions{})
}

// RenderTemplateOptions is RenderTemplate with the optional variables of o.
func RenderTemplateOptions(tmpl string, msgs []Message, addGenerationPrompt bool, bos, eos string, o RenderOptions) (string, error) {
	return RenderTemplateContext(context.Background(), tmpl, msgs, addGenerationPrompt, bos, eos, o)
}

// RenderTemplateContext is RenderTemplateOptions stopped when ctx ends. Every render
// runs under o.Limits; a stopped one returns an error naming the template (o.Name)
// and wrapping a *RenderLimitError.
func RenderTemplateContext(ctx context.Context, tmpl string, msgs []Message, addGenerationPrompt bool, bos, eos string, o RenderOptions) (string, error) {
	name := "chat template"
	if o.Name != "" {
		name = "chat template " + o.Name
	}
	var tp *jinja.Template
	if v, ok := tplCache.Load(tmpl); ok {
		tp = v.(*jinja.Template)
	} else {
		c, err := jinja.Compile(tmpl)
		if err != nil {
			return "", fmt.Errorf("tokenizer: %s: %w", name, err)
		}
		if tplCacheLen.Load() < tplCacheMax {
			if _, loaded := tplCache.LoadOrStore(tmpl, c); !loaded {
				tplCacheLen.Add(1)
			}
		}
		tp = c
	}
	vars := map[string]any{}
	for k, v := range o.Vars {
		vars[k] = v
	}
	list := make([]any, len(msgs))
	for i, m := range msgs {
		list[i] = messageVar(m)
	}
	vars["messages"] = list
	vars["add_generation_prompt"] = addGenerationPrompt
	vars["bos_token"] = bos
	vars["eos_token"] = eos
	if len(o.Tools) > 0 {
		vars["tools"] = o.Tools
	}
	if o.EnableThinking != nil {
		vars["enable_thinking"] = *o.EnableThinking
	}
	if ctx == nil {
		ctx = context.Background()
	}
	out, err := tp.RenderContext(ctx, vars, o.Limits)
	if err != nil {
		return "", fmt.Errorf("tokenizer: %s: %w", name, err)
	}
	return out, nil
}

// messageVar is the template's view of m: only the fields that are set.
func messageVar(m Message) map[string]any {
	v := map[string]any{"role": m.Role, "content": m.Content}
	if m.ReasoningContent != "" {
		v["reasoning_content"] = m.ReasoningContent
	}
	if m.ToolCallID != "" {
		v["tool_call_id"] = m.ToolCallID
	}
	if m.Name != "" {
		v["name"] = m.Name
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]any, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			typ := c.Type
			if typ == "" {
				typ = "function"
			}
			call := map[string]any{"type": typ, "function": map[string]any{
				"name": c.Function.Name, "arguments": c.Function.Arguments}}
			if c.ID != "" {
				call["id"] = c.ID
			}
			calls[i] = call
		}
		v["tool_calls"] = calls
	}
	return v
}

// BuiltinTemplate returns the Jinja source of a built-in chat template for models that
// ship none: "chatml", "llama3", "llama2", "phi3" or "gemma". Each produces what
// llama.cpp's built-in template of that name produces (no BOS text: Encode adds BOS).
func BuiltinTemplate(name string) (string, bool) {
	s, ok := builtinTemplates[name]
	return s, ok
}

// BuiltinTemplateNames lists the names BuiltinTemplate accepts, sorted.
func BuiltinTemplateNames() []string {
	names := make([]string, 0, len(builtinTemplates))
	for n := range builtinTemplates {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

var builtinTemplates = map[string]string{
	"chatml": `{%- for message in messages -%}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}`,

	"llama3": `{%- for message in messages -%}
{{- '<|start_header_id|>' + message.role + '<|end_header_id|>\n\n' + (message.content | trim) + '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}{%- endif -%}`,

	"llama2": `{%- set ns = namespace(inside=true) -%}
{{- '[INST] ' -}}
{%- for message in messages -%}
{%- if not ns.inside -%}{{- '[INST] ' -}}{%- set ns.inside = true -%}{%- endif -%}
{%- if message.role == 'system' -%}{{- '<<SYS>>\n' + message.content + '\n<</SYS>>\n\n' -}}
{%- elif message.role == 'user' -%}{{- message.content + ' [/INST]' -}}
{%- else -%}{{- message.content + '</s>' -}}{%- set ns.inside = false -%}
{%- endif -%}
{%- endfor -%}`,

	"phi3": `{%- for message in messages -%}
{{- '<|' + message.role + '|>\n' + message.content + '<|end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>\n' -}}{%- endif -%}`,

	"gemma": `{%- set ns = namespace(sys='') -%}
{%- for message in messages -%}
{%- if message.role == 'system' -%}{%- set ns.sys = ns.sys + (message.content | trim) -%}
{%- else -%}
{%- set role = 'model' if message.role == 'assistant' else message.role -%}
{{- '<start_of_turn>' + role + '\n' -}}
{%- if ns.sys and role != 'model' -%}{{- ns.sys + '\n\n' -}}{%- set ns.sys = '' -%}{%- endif -%}
{{- (message.content | trim) + '<end_of_turn>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<start_of_turn>model\n' -}}{%- endif -%}`,
}
