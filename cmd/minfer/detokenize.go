package main

import (
	"context"
	"io"
	"strconv"
	"strings"
)

func init() {
	register(&command{
		name:    "detokenize",
		summary: "turn token ids back into text",
		run:     runDetokenize,
	})
}

const detokenizeUsage = `
Usage: minfer detokenize (-m MODEL.gguf | --tokenizer PATH/tokenizer.json) IDS...

Prints the text of the token ids exactly, with no newline added, as llama.cpp's
detokenizer produces it (control tokens as their text; an SPM vocabulary's leading
space removed; the clean-up of spaces before punctuation that some BPE vocabularies ask
for). IDS may be separate arguments or one list separated by commas or spaces, with or
without brackets (the output of tokenize --json). "-" reads the list from stdin. An id
outside the vocabulary is an error.

Examples:
  minfer detokenize -m model.gguf 9906 1917
  minfer detokenize --tokenizer qwen3/tokenizer.json "[9707, 1879]"
  minfer tokenize -m model.gguf --json "Hi there" | minfer detokenize -m model.gguf -
`

func runDetokenize(ctx context.Context, m *Main, args []string) error {
	var tf tokenizerFlags
	fs := m.newFlagSet("detokenize", detokenizeUsage)
	tf.register(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("detokenize: no token ids given")
	}
	var list []string
	for _, p := range pos {
		if p == "-" {
			b, err := io.ReadAll(m.Stdin)
			if err != nil {
				return err
			}
			p = string(b)
		}
		list = append(list, p)
	}
	ids, err := parseIDs(strings.Join(list, " "))
	if err != nil {
		return err
	}
	tok, err := tf.load("detokenize", true)
	if err != nil {
		return err
	}
	text, err := tok.Decode(ids)
	if err != nil {
		return err
	}
	_, err = io.WriteString(m.Stdout, text)
	return err
}

// parseIDs reads ids separated by commas and/or white space, optionally in brackets.
func parseIDs(s string) ([]int32, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == '[' || r == ']' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
	if len(fields) == 0 {
		return nil, usagef("detokenize: no token ids given")
	}
	ids := make([]int32, len(fields))
	for i, f := range fields {
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, usagef("detokenize: %q is not a token id", f)
		}
		ids[i] = int32(v)
	}
	return ids, nil
}
