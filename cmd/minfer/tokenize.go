package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/tokenizer"
)

func init() {
	register(&command{
		name:    "tokenize",
		summary: "turn text into token ids with a model's (or a tokenizer.json's) vocabulary",
		run:     runTokenize,
	})
}

const tokenizeUsage = `
Usage: minfer tokenize (-m MODEL.gguf | --tokenizer PATH/tokenizer.json)
                       [--no-bos] [--special] [--json | --ids] (TEXT | -p TEXT | -f FILE)

Tokenizes TEXT exactly as llama.cpp's llama-tokenize does and prints one line per
token, "ID -> 'PIECE'" (PIECE is the token's text; control tokens show their name).
--json prints only a JSON array of the ids, --ids a bracketed list like llama-tokenize.
The BOS token (and EOS) the vocabulary asks for is added unless --no-bos. Special-token
text in the input (e.g. <|im_start|>) stays plain text unless --special. With
--tokenizer, tokenizer_config.json is read from the same folder. -f - reads stdin.

Examples:
  minfer tokenize -m model.gguf "Hello world"
  minfer tokenize --tokenizer qwen3/tokenizer.json --json "Hello world"
  minfer tokenize -m model.gguf --special --no-bos "<|im_start|>user"
  minfer tokenize -m model.gguf -f prompt.txt --ids
`

// tokenizerFlags are the flags that pick a vocabulary, shared by tokenize, detokenize
// and template.
type tokenizerFlags struct {
	model, tokenizerJSON string
}

func (o *tokenizerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&o.model, "m", "", "read the vocabulary from `MODEL.gguf`")
	fs.StringVar(&o.model, "model", "", "same as -m")
	fs.StringVar(&o.tokenizerJSON, "tokenizer", "", "read the vocabulary from a Hugging Face `tokenizer.json`")
}

// load builds the tokenizer the flags name. required=false allows neither (nil, nil).
func (o *tokenizerFlags) load(cmd string, required bool) (*tokenizer.Tokenizer, error) {
	switch {
	case o.model != "" && o.tokenizerJSON != "":
		return nil, usagef("%s: give -m or --tokenizer, not both", cmd)
	case o.model != "":
		f, err := gguf.Open(o.model)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		t, err := tokenizer.FromGGUF(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.model, err)
		}
		return t, nil
	case o.tokenizerJSON != "":
		t, err := tokenizer.FromHF(o.tokenizerJSON)
		if err != nil && isGGUF(o.tokenizerJSON) {
			return nil, usagef("%s: --tokenizer %s is a GGUF file (give it with -m)", cmd, o.tokenizerJSON)
		}
		return t, err
	case required:
		return nil, usagef("%s: need -m MODEL.gguf or --tokenizer tokenizer.json", cmd)
	}
	return nil, nil
}

// isGGUF reports whether the file at path starts with the GGUF magic.
func isGGUF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, len(gguf.Magic))
	_, err = io.ReadFull(f, magic)
	return err == nil && string(magic) == gguf.Magic
}

// readInput reads a file argument, "-" meaning stdin.
func (m *Main) readInput(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(m.Stdin)
	}
	return os.ReadFile(path)
}

func runTokenize(ctx context.Context, m *Main, args []string) error {
	var (
		tf                     tokenizerFlags
		noBOS, special, asJSON bool
		idsOnly                bool
		prompt, file           string
	)
	fs := m.newFlagSet("tokenize", tokenizeUsage)
	tf.register(fs)
	fs.BoolVar(&noBOS, "no-bos", false, "do not add the BOS/EOS tokens the vocabulary asks for")
	fs.BoolVar(&special, "special", false, "match special-token text in the input as those tokens")
	fs.BoolVar(&asJSON, "json", false, "print a JSON array of ids")
	fs.BoolVar(&idsOnly, "ids", false, "print only the ids, as [1, 2, 3]")
	fs.StringVar(&prompt, "p", "", "the `TEXT` to tokenize")
	fs.StringVar(&file, "f", "", "tokenize the contents of `FILE` (- for stdin)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if asJSON && idsOnly {
		return usagef("tokenize: --json and --ids exclude each other")
	}
	sources := len(pos)
	if prompt != "" {
		sources++
	}
	if file != "" {
		sources++
	}
	if sources != 1 || len(pos) > 1 {
		return usagef("tokenize: give the text as one argument, -p TEXT or -f FILE")
	}
	text := prompt
	switch {
	case len(pos) == 1:
		text = pos[0]
	case file != "":
		b, err := m.readInput(file)
		if err != nil {
			return err
		}
		text = string(b)
	}
	tok, err := tf.load("tokenize", true)
	if err != nil {
		return err
	}
	ids, err := tok.Encode(text, !noBOS, special)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(m.Stdout)
	switch {
	case asJSON:
		if ids == nil {
			ids = []int32{}
		}
		b, _ := json.Marshal(ids)
		fmt.Fprintf(w, "%s\n", b)
	case idsOnly:
		fmt.Fprint(w, "[")
		for i, id := range ids {
			if i > 0 {
				fmt.Fprint(w, ", ")
			}
			fmt.Fprint(w, id)
		}
		fmt.Fprintln(w, "]")
	default:
		for _, id := range ids {
			fmt.Fprintf(w, "%6d -> '%s'\n", id, tok.Piece(id))
		}
	}
	return w.Flush()
}
