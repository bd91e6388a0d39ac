package tokenizer

import (
	"context"
	"strings"
	"unicode/utf8"
)

// Prompt is a rendered prompt ready to encode. A raw prompt (RawPrompt, a completion
// request's text) has control-token text parsed everywhere, as llama.cpp's
// llama_tokenize(parse_special=true) does. A chat prompt (RenderChatPrompt) has the
// control-token text inside message contents marked, so that EncodePrompt encodes it
// as plain text and only the template's own markers become control tokens: a user who
// types "<|im_start|>system" cannot forge a turn. (llama-server and Hugging Face's
// apply_chat_template(tokenize=True) both tokenize the rendered string with special
// tokens parsed, so there such text does become control tokens.)
type Prompt struct {
	// Text is the prompt as the model reads it.
	Text string
	// marked is Text with mark after the first character of each control-token
	// text that came from a message; "" when nothing needed marking.
	marked string
	mark   rune
}

// RawPrompt is text with control-token text parsed everywhere.
func RawPrompt(text string) Prompt { return Prompt{Text: text} }

// EncodePrompt encodes p like Encode(p.Text, addSpecial, true), except that
// control-token text from a chat prompt's messages is encoded as plain text. It stops
// when ctx ends.
func (t *Tokenizer) EncodePrompt(ctx context.Context, p Prompt, addSpecial bool) ([]int32, error) {
	if p.marked == "" {
		return t.encode(ctx, p.Text, addSpecial, true, true)
	}
	return t.encodeMarked(ctx, p.marked, p.mark, addSpecial)
}

// controlTexts are the texts partition matches only when parseSpecial is set (control
// and unknown tokens; user-defined tokens are matched in any case).
func (t *Tokenizer) controlTexts() []string {
	var out []string
	for _, id := range t.special { // longest first
		if tok := t.tokens[id]; tok.attr&(attrControl|attrUnknown) != 0 && tok.text != "" {
			out = append(out, tok.text)
		}
	}
	return out
}

// markControl returns s with mark inserted after the first character of every
// occurrence of a control-token text, and whether it found one.
func markControl(s string, texts []string, mark rune) (string, bool) {
	var b strings.Builder
	found := false
	last := 0
	for i := 0; i < len(s); {
		hit := ""
		for _, tx := range texts {
			if s[i] == tx[0] && strings.HasPrefix(s[i:], tx) {
				hit = tx
				break
			}
		}
		if hit == "" {
			i++
			continue
		}
		if !found {
			b.Grow(len(s) + 16)
			found = true
		}
		_, n := utf8.DecodeRuneInString(hit)
		b.WriteString(s[last : i+n])
		b.WriteRune(mark)
		last = i + n
		i += len(hit)
	}
	if !found {
		return s, false
	}
	b.WriteString(s[last:])
	return b.String(), true
}

// pickMark returns a private-use character that occurs in none of texts.
func pickMark(texts ...string) rune {
	for r := rune(0xE000); r <= 0xF8FF; r++ {
		free := true
		for _, s := range texts {
			if strings.ContainsRune(s, r) {
				free = false
				break
			}
		}
		if free {
			return r
		}
	}
	return 0
}

// RenderChatPrompt renders msgs with tmpl ("" = the model's template, named in
// errors by where it came from), the vocabulary's BOS and EOS texts and o, like
// RenderTemplateContext, and returns a Prompt whose message contents and tool
// definitions EncodePrompt encodes as plain text.
func (t *Tokenizer) RenderChatPrompt(ctx context.Context, tmpl string, msgs []Message, addGenerationPrompt bool, o RenderOptions) (Prompt, error) {
	if tmpl == "" {
		tmpl = t.chatTpl
		if o.Name == "" {
			o.Name = t.ChatTemplateName()
		}
	}
	if tmpl == "" {
		return Prompt{}, ErrNoTemplate
	}
	bos, eos := t.TokenText(t.bos), t.TokenText(t.eos)
	texts := t.controlTexts()
	var inputs []string // every string the request brings
	for _, m := range msgs {
		inputs = append(inputs, m.Content, m.ReasoningContent, m.ToolCallID, m.Name)
		for _, c := range m.ToolCalls {
			inputs = append(inputs, c.ID, c.Function.Name, c.Function.Arguments)
		}
	}
	for _, v := range o.Tools {
		inputs = appendStrings(inputs, v)
	}
	needs := false
	for _, s := range inputs {
		if _, hit := markControl(s, texts, 0); hit {
			needs = true
			break
		}
	}
	if !needs {
		out, err := RenderTemplateContext(ctx, tmpl, msgs, addGenerationPrompt, bos, eos, o)
		return RawPrompt(out), err
	}
	all := append(inputs, tmpl, bos, eos)
	for _, id := range t.special {
		all = append(all, t.tokens[id].text)
	}
	mark := pickMark(all...)
	if mark == 0 { // every private-use character is taken: parse as llama.cpp does
		out, err := RenderTemplateContext(ctx, tmpl, msgs, addGenerationPrompt, bos, eos, o)
		return RawPrompt(out), err
	}
	mk := func(s string) string { m, _ := markControl(s, texts, mark); return m }
	marked := make([]Message, len(msgs))
	for i, m := range msgs {
		m.Content, m.ReasoningContent, m.ToolCallID, m.Name = mk(m.Content), mk(m.ReasoningContent), mk(m.ToolCallID), mk(m.Name)
		if len(m.ToolCalls) > 0 {
			calls := make([]ToolCall, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				c.ID, c.Function.Name, c.Function.Arguments = mk(c.ID), mk(c.Function.Name), mk(c.Function.Arguments)
				calls[j] = c
			}
			m.ToolCalls = calls
		}
		marked[i] = m
	}
	if len(o.Tools) > 0 {
		tools := make([]any, len(o.Tools))
		for i, v := range o.Tools {
			tools[i] = mapStrings(v, mk)
		}
		o.Tools = tools
	}
	out, err := RenderTemplateContext(ctx, tmpl, marked, addGenerationPrompt, bos, eos, o)
	if err != nil {
		return Prompt{}, err
	}
	return Prompt{Text: strings.ReplaceAll(out, string(mark), ""), marked: out, mark: mark}, nil
}

// appendStrings appends the strings inside a JSON-decoded value.
func appendStrings(dst []string, v any) []string {
	switch x := v.(type) {
	case string:
		dst = append(dst, x)
	case []any:
		for _, e := range x {
			dst = appendStrings(dst, e)
		}
	case map[string]any:
		for k, e := range x {
			dst = appendStrings(append(dst, k), e)
		}
	}
	return dst
}

// mapStrings copies a JSON-decoded value with f applied to its strings (not keys).
func mapStrings(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = mapStrings(e, f)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = mapStrings(e, f)
		}
		return out
	}
	return v
}
