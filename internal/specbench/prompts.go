package specbench

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/minfer/minfer/core/tokenizer"
)

// DefaultPrompts are the prompts of a run that names none.
var DefaultPrompts = []string{
	"Once upon a time, there was a little girl named Lily. She loved to play",
	"The quick brown fox jumps over the lazy dog. Then",
	"def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
	"In the beginning of the twentieth century, the city",
}

// linePrompts reads one prompt per non-blank line of file: plain text, or in a .jsonl
// file a JSON string or an object with a "prompt" (or "text") field per line. Each is
// encoded as run encodes a prompt (BOS where the vocabulary asks for it).
func linePrompts(tok *tokenizer.Tokenizer, file string) ([][]int32, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("specbench: %w", err)
	}
	var out [][]int32
	jsonl := strings.HasSuffix(file, ".jsonl")
	for n, line := range strings.Split(string(b), "\n") {
		text := strings.TrimRight(line, "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		if jsonl {
			var v any
			if err := json.Unmarshal([]byte(text), &v); err != nil {
				return nil, fmt.Errorf("specbench: %s:%d: %v", file, n+1, err)
			}
			switch x := v.(type) {
			case string:
				text = x
			case map[string]any:
				p, ok := x["prompt"].(string)
				if !ok {
					p, ok = x["text"].(string)
				}
				if !ok {
					return nil, fmt.Errorf("specbench: %s:%d: want a string or an object with a \"prompt\" string", file, n+1)
				}
				text = p
			default:
				return nil, fmt.Errorf("specbench: %s:%d: want a string or an object with a \"prompt\" string", file, n+1)
			}
		}
		ids, err := tok.Encode(text, true, false)
		if err != nil {
			return nil, fmt.Errorf("specbench: %s:%d: %w", file, n+1, err)
		}
		out = append(out, ids)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("specbench: %s holds no prompt (one per non-blank line)", file)
	}
	return out, nil
}

// corpusPrompts tokenizes the prompts: count evenly spaced windows of ptoks tokens per
// file, each followed by its own first copy tokens when copy > 0 (a copy-heavy prompt:
// the continuation repeats what the prompt holds, as in code editing and quoting), or
// the built-in prompts when there are no files.
func corpusPrompts(tok *tokenizer.Tokenizer, files []string, count, ptoks, copy int) ([][]int32, error) {
	var out [][]int32
	bos := []int32{}
	if tok.AddBOS() {
		bos = append(bos, tok.BOS())
	}
	if len(files) == 0 {
		for _, p := range DefaultPrompts {
			ids, err := tok.Encode(p, true, false)
			if err != nil {
				return nil, err
			}
			out = append(out, ids)
		}
		return out, nil
	}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("specbench: %w", err)
		}
		ids, err := tok.Encode(string(text), false, false)
		if err != nil {
			return nil, err
		}
		if len(ids) < ptoks {
			return nil, fmt.Errorf("specbench: %s has %d tokens, fewer than --prompt-tokens %d (--prompts cuts a corpus into windows; for one prompt per line give --prompt-lines %s)", f, len(ids), ptoks, f)
		}
		for i := range count {
			off := i * (len(ids) - ptoks) / count // the offsets of train-report.json's simulation
			p := append(append([]int32{}, bos...), ids[off:off+ptoks]...)
			out = append(out, append(p, ids[off:off+copy]...))
		}
	}
	return out, nil
}
