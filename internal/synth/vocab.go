package synth

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/tokenizer"
)

// llama.cpp token types (llama_token_type / gguf-py TokenType).
const (
	tokNormal      = 1
	tokControl     = 3
	tokUserDefined = 4
	tokUnused      = 5
)

// synthVocab is the tokenizer.* metadata of a synthetic model.
type vocab struct {
	kvs []gguf.KV
	n   int // number of tokens
}

func (v *vocab) set(key string, val any) {
	x, err := gguf.NewValue(val)
	if err != nil {
		panic("BUG: synth vocab " + key + ": " + err.Error())
	}
	for i := range v.kvs {
		if v.kvs[i].Key == key {
			v.kvs[i].Value = x
			return
		}
	}
	v.kvs = append(v.kvs, gguf.KV{Key: key, Value: x})
}

// pad grows the vocabulary to n tokens with "[PAD<id>]" tokens of type UNUSED (score
// -1000 where there are scores), as llama.cpp's converter pads a model's embedding rows.
func (v *vocab) pad(n int) {
	for i := range v.kvs {
		kv := &v.kvs[i]
		switch kv.Key {
		case "tokenizer.ggml.tokens":
			s := kv.Value.V.([]string)
			for id := len(s); id < n; id++ {
				s = append(s, fmt.Sprintf("[PAD%d]", id))
			}
			kv.Value.V = s
		case "tokenizer.ggml.token_type":
			kv.Value.V = padInts(kv.Value.V, n, tokUnused)
		case "tokenizer.ggml.scores":
			if s, ok := kv.Value.V.([]float32); ok {
				kv.Value.V = padded(s, n, -1000)
			}
		}
	}
	v.n = n
}

// padInts pads an integer array value v with x to length to; other values are
// returned as they are.
func padInts(v any, to int, x int) any {
	switch s := v.(type) {
	case []int32:
		return padded(s, to, x)
	case []uint32:
		return padded(s, to, x)
	case []int64:
		return padded(s, to, x)
	case []uint8:
		return padded(s, to, x)
	}
	return v
}

// padded appends x to s until it holds to values.
func padded[T int32 | uint32 | int64 | uint8 | float32](s []T, to, x int) []T {
	for len(s) < to {
		s = append(s, T(x))
	}
	return s
}

// loadSynthVocab reads o.Vocab (a GGUF, a tokenizer.json or a folder holding one) or,
// when it is empty, generates a byte-level BPE vocabulary of o.NVocab tokens.
func loadVocab(o Options) (*vocab, error) {
	if o.Vocab == "" {
		return generatedVocab(o.NVocab, o.Arch)
	}
	path := o.Vocab
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "tokenizer.json")
	}
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("synth: vocab: %w", err)
	}
	head := make([]byte, 4)
	fh.Read(head)
	fh.Close()
	if string(head) == gguf.Magic {
		return ggufVocab(path)
	}
	return hfVocab(path)
}

// ggufVocab copies every tokenizer.* key of a GGUF file.
func ggufVocab(path string) (*vocab, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("synth: vocab: %w", err)
	}
	defer f.Close()
	v := &vocab{}
	for _, kv := range f.KVs {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			v.kvs = append(v.kvs, kv)
		}
	}
	toks, err := f.GetStrings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, fmt.Errorf("synth: vocab %s: %w", path, err)
	}
	v.n = len(toks)
	// Own copies of the arrays pad may grow (the File's are shared).
	for i := range v.kvs {
		switch s := v.kvs[i].Value.V.(type) {
		case []string:
			v.kvs[i].Value.V = append([]string(nil), s...)
		case []float32:
			v.kvs[i].Value.V = append([]float32(nil), s...)
		case []int32:
			v.kvs[i].Value.V = append([]int32(nil), s...)
		}
	}
	return v, nil
}

// hfVocab converts a byte-level BPE tokenizer.json (and tokenizer_config.json beside
// it, if present) to tokenizer.ggml.* keys the way llama.cpp's converter does, with the
// reader core/tokenizer's FromHF uses.
func hfVocab(path string) (*vocab, error) {
	kvs, err := tokenizer.HFMetadata(path)
	if err != nil {
		return nil, fmt.Errorf("synth: vocab: %w", err)
	}
	v := &vocab{kvs: kvs}
	for _, kv := range kvs {
		if kv.Key == "tokenizer.ggml.tokens" {
			v.n = len(kv.Value.V.([]string))
		}
	}
	return v, nil
}

// byteSymbols is GPT-2's bytes_to_unicode in vocabulary order: the printable bytes as
// themselves, then the others mapped to U+0100 and up. Entry i is the symbol of the
// byte-level token with id i in a GPT-2 style vocabulary.
func byteSymbols() []string {
	var bs []int
	for b := '!'; b <= '~'; b++ {
		bs = append(bs, int(b))
	}
	for b := 0xA1; b <= 0xAC; b++ {
		bs = append(bs, b)
	}
	for b := 0xAE; b <= 0xFF; b++ {
		bs = append(bs, b)
	}
	printable := map[int]bool{}
	for _, b := range bs {
		printable[b] = true
	}
	syms := make([]string, 0, 256)
	for _, b := range bs {
		syms = append(syms, string(rune(b)))
	}
	n := 0
	for b := range 256 {
		if !printable[b] {
			syms = append(syms, string(rune(256+n)))
			n++
		}
	}
	return syms
}

const chatMLTemplate = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// generatedVocab builds a self-consistent byte-level BPE vocabulary of n tokens: the 256
// byte symbols, <|endoftext|> (bos = eos), <|im_start|> and <|im_end|> (a ChatML
// template uses them), then merged tokens, each the concatenation of two earlier tokens
// with its merge rule. It depends only on n (not on --seed), so models of one n_vocab
// share it.
func generatedVocab(n int, arch string) (*vocab, error) {
	const specials = 3
	if n < 256+specials {
		return nil, fmt.Errorf("synth: --n-vocab %d is too small for the generated vocabulary (need ≥ %d)", n, 256+specials)
	}
	tokens := append(byteSymbols(), "<|endoftext|>", "<|im_start|>", "<|im_end|>")
	types := make([]int32, n)
	for i := range types {
		types[i] = tokNormal
	}
	types[256], types[257], types[258] = tokControl, tokControl, tokControl
	seen := make(map[string]bool, n)
	for _, t := range tokens {
		seen[t] = true
	}
	// Pieces start from lower-case letters and the space symbol Ġ, so merged tokens
	// look like words; every merged token joins the pool.
	pool := []string{"Ġ"}
	for c := 'a'; c <= 'z'; c++ {
		pool = append(pool, string(c))
	}
	rng := rand.New(rand.NewPCG(0x5eed, uint64(n)))
	merges := make([]string, 0, n-len(tokens))
	for len(tokens) < n {
		// a: any piece; b: one of the first (short) pieces, never starting with Ġ, so
		// tokens stay word-like and short.
		a := pool[rng.IntN(len(pool))]
		b := pool[1+rng.IntN(min(len(pool), 400)-1)]
		if len(a)+len(b) > 16 {
			a = pool[rng.IntN(min(len(pool), 400))]
		}
		t := a + b
		if strings.HasPrefix(b, "Ġ") || seen[t] {
			continue
		}
		seen[t] = true
		tokens = append(tokens, t)
		merges = append(merges, a+" "+b)
		pool = append(pool, t)
	}
	pre := "qwen2"
	if arch == "llama" {
		pre = "llama-bpe"
	}
	v := &vocab{n: n}
	v.set("tokenizer.ggml.model", "gpt2")
	v.set("tokenizer.ggml.pre", pre)
	v.set("tokenizer.ggml.tokens", tokens)
	v.set("tokenizer.ggml.token_type", types)
	v.set("tokenizer.ggml.merges", merges)
	v.set("tokenizer.ggml.bos_token_id", uint32(256))
	v.set("tokenizer.ggml.eos_token_id", uint32(256))
	v.set("tokenizer.ggml.padding_token_id", uint32(256))
	v.set("tokenizer.ggml.add_bos_token", false)
	v.set("tokenizer.chat_template", chatMLTemplate)
	return v, nil
}
