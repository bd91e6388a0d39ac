package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/minfer/minfer/core/tokenizer"
)

func init() {
	register(&command{
		name:    "template",
		summary: "render a conversation with a model's chat template",
		run:     runTemplate,
	})
}

const templateUsage = `
Usage: minfer template (-m MODEL.gguf | --tokenizer PATH/tokenizer.json | --chat-template NAME)
                       --messages FILE.json [--add-generation-prompt]
                       [--tools TOOLS.json] [--no-thinking]

Renders the conversation in FILE.json (a JSON array of {"role", "content"} objects, as
in the OpenAI API; - reads stdin) with the model's chat template (tokenizer.chat_template
in the GGUF, chat_template in tokenizer_config.json beside tokenizer.json) and prints the
prompt exactly, with no newline added. --chat-template NAME uses a built-in template
instead (chatml, llama3, llama2, phi3, gemma), e.g. for a model that has none.
--tools passes a JSON array of OpenAI tool definitions as the template's tools;
--no-thinking sets enable_thinking to false (Qwen3 then opens an empty think block).
Messages may carry tool_calls, tool_call_id, name and reasoning_content as in the API.

Examples:
  minfer template -m model.gguf --messages chat.json --add-generation-prompt
  minfer template --tokenizer qwen3/tokenizer.json --messages chat.json
  minfer template --tokenizer qwen3/tokenizer.json --messages chat.json --tools tools.json --no-thinking
  echo '[{"role":"user","content":"Hi"}]' | minfer template --chat-template chatml --messages -
`

func runTemplate(ctx context.Context, m *Main, args []string) error {
	var (
		tf                tokenizerFlags
		messages, builtin string
		tools             string
		addGen, noThink   bool
	)
	fs := m.newFlagSet("template", templateUsage)
	tf.register(fs)
	fs.StringVar(&messages, "messages", "", "the conversation: a JSON array of {role, content} in `FILE.json` (- for stdin)")
	fs.BoolVar(&addGen, "add-generation-prompt", false, "end with the header of the assistant's turn")
	fs.StringVar(&tools, "tools", "", "pass the JSON array of tool definitions in `TOOLS.json` as tools")
	fs.BoolVar(&noThink, "no-thinking", false, "set enable_thinking to false")
	fs.StringVar(&builtin, "chat-template", "", "use the built-in template `NAME` ("+strings.Join(tokenizer.BuiltinTemplateNames(), ", ")+")")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("template: unexpected argument %q", pos[0])
	}
	if messages == "" {
		return usagef("template: need --messages FILE.json")
	}
	var src string
	if builtin != "" {
		var ok bool
		if src, ok = tokenizer.BuiltinTemplate(builtin); !ok {
			return usagef("template: unknown built-in template %q (have %s)", builtin, strings.Join(tokenizer.BuiltinTemplateNames(), ", "))
		}
	}
	tok, err := tf.load("template", builtin == "")
	if err != nil {
		return err
	}
	b, err := m.readInput(messages)
	if err != nil {
		return err
	}
	var msgs []tokenizer.Message
	if err := json.Unmarshal(b, &msgs); err != nil {
		return fmt.Errorf("template: %s: want a JSON array of {\"role\", \"content\"}: %w", messages, err)
	}
	for i, msg := range msgs {
		if msg.Role == "" {
			return fmt.Errorf("template: %s: message %d has no \"role\"", messages, i)
		}
	}
	var opts tokenizer.RenderOptions
	if tools != "" {
		tb, err := m.readInput(tools)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(tb, &opts.Tools); err != nil {
			return fmt.Errorf("template: %s: want a JSON array of tool definitions: %w", tools, err)
		}
	}
	if noThink {
		f := false
		opts.EnableThinking = &f
	}
	var out string
	switch {
	case src != "":
		bos, eos := "", ""
		if tok != nil {
			bos, eos = tok.TokenText(tok.BOS()), tok.TokenText(tok.EOS())
		}
		opts.Name = "built-in " + builtin
		out, err = tokenizer.RenderTemplateContext(ctx, src, msgs, addGen, bos, eos, opts)
	default:
		out, err = tok.RenderChatContext(ctx, msgs, addGen, opts)
	}
	if err != nil {
		return err
	}
	_, err = io.WriteString(m.Stdout, out)
	return err
}
