package synth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/minfer/minfer/core/gguf"
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
			kv.Value.V = padInts(kv.Value.V, v.n, n, tokUnused)
		case "tokenizer.ggml.scores":
			if s, ok := kv.Value.V.([]float32); ok {
				for len(s) < n {
					s = append(s, -1000)
				}
				kv.Value.V = s
			}
		}
	}
	v.n = n
}

func padInts(v any, from, to int, x int) any {
	switch s := v.(type) {
	case []int32:
		for len(s) < to {
			s = append(s, int32(x))
		}
		return s
	case []uint32:
		for len(s) < to {
			s = append(s, uint32(x))
		}
		return s
	case []int64:
		for len(s) < to {
			s = append(s, int64(x))
		}
		return s
	case []uint8:
		for len(s) < to {
			s = append(s, uint8(x))
		}
		return s
	}
	return v
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

// hfTokenizer is the part of a Hugging Face tokenizer.json that synth converts.
type hfTokenizer struct {
	Model struct {
		Type   string          `json:"type"`
		Vocab  map[string]int  `json:"vocab"`
		Merges json.RawMessage `json:"merges"`
	} `json:"model"`
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
}

// Pre-tokenizer split regexes llama.cpp knows by name (tokenizer.ggml.pre).
const (
	regexQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	regexLlama = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// hfVocab converts a byte-level BPE tokenizer.json (and tokenizer_config.json beside
// it, if present) to tokenizer.ggml.* keys the way llama.cpp's converter does.
func hfVocab(path string) (*vocab, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("synth: vocab: %w", err)
	}
	var tj hfTokenizer
	if err := json.Unmarshal(data, &tj); err != nil {
		return nil, fmt.Errorf("synth: vocab %s: not a GGUF and not a tokenizer.json: %w", path, err)
	}
	if tj.Model.Type != "BPE" || len(tj.Model.Vocab) == 0 {
		return nil, fmt.Errorf("synth: vocab %s: model type %q with %d tokens; only byte-level BPE is supported", path, tj.Model.Type, len(tj.Model.Vocab))
	}
	pre, err := detectPre(tj.PreTokenizer)
	if err != nil {
		return nil, fmt.Errorf("synth: vocab %s: %w", path, err)
	}
	n := 0
	for _, id := range tj.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range tj.AddedTokens {
		n = max(n, a.ID+1)
	}
	if n > 1<<22 {
		return nil, fmt.Errorf("synth: vocab %s: token id %d too large", path, n-1)
	}
	tokens := make([]string, n)
	types := make([]int32, n)
	set := make([]bool, n)
	for tok, id := range tj.Model.Vocab {
		if id < 0 || set[id] {
			return nil, fmt.Errorf("synth: vocab %s: bad or duplicate id %d (%q)", path, id, tok)
		}
		tokens[id], types[id], set[id] = tok, tokNormal, true
	}
	for _, a := range tj.AddedTokens {
		if a.ID < 0 {
			return nil, fmt.Errorf("synth: vocab %s: added token %q has id %d", path, a.Content, a.ID)
		}
		tokens[a.ID], set[a.ID] = a.Content, true
		types[a.ID] = tokUserDefined
		if a.Special || (strings.HasPrefix(a.Content, "<|") && strings.HasSuffix(a.Content, "|>")) {
			types[a.ID] = tokControl
		}
	}
	for id := range tokens {
		if !set[id] {
			tokens[id], types[id] = fmt.Sprintf("[PAD%d]", id), tokUnused
		}
	}
	merges, err := parseMerges(tj.Model.Merges)
	if err != nil {
		return nil, fmt.Errorf("synth: vocab %s: %w", path, err)
	}
	v := &vocab{n: n}
	v.set("tokenizer.ggml.model", "gpt2")
	v.set("tokenizer.ggml.pre", pre)
	v.set("tokenizer.ggml.tokens", tokens)
	v.set("tokenizer.ggml.token_type", types)
	v.set("tokenizer.ggml.merges", merges)
	if err := v.applyConfig(filepath.Join(filepath.Dir(path), "tokenizer_config.json"), tokens, pre, tj.PostProcessor); err != nil {
		return nil, fmt.Errorf("synth: vocab: %w", err)
	}
	return v, nil
}

func parseMerges(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return []string{}, nil
	}
	var s []string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("merges are neither strings nor pairs: %w", err)
	}
	s = make([]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("merge %d has %d parts, want 2", i, len(p))
		}
		s[i] = p[0] + " " + p[1]
	}
	return s, nil
}

// detectPre names the pre-tokenizer for tokenizer.ggml.pre from its split regex.
func detectPre(raw json.RawMessage) (string, error) {
	var regexes []string
	byteLevelRegex := false
	var walk func(m map[string]any)
	walk = func(m map[string]any) {
		switch m["type"] {
		case "Sequence":
			list, _ := m["pretokenizers"].([]any)
			for _, x := range list {
				if mm, ok := x.(map[string]any); ok {
					walk(mm)
				}
			}
		case "Split":
			if p, ok := m["pattern"].(map[string]any); ok {
				if r, ok := p["Regex"].(string); ok {
					regexes = append(regexes, r)
				}
			}
		case "ByteLevel":
			if u, ok := m["use_regex"].(bool); ok && u {
				byteLevelRegex = true
			}
		}
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return "", fmt.Errorf("no pre_tokenizer")
	}
	walk(m)
	switch {
	case len(regexes) == 1 && regexes[0] == regexQwen2:
		return "qwen2", nil
	case len(regexes) == 1 && regexes[0] == regexLlama:
		return "llama-bpe", nil
	case len(regexes) == 0 && byteLevelRegex:
		return "gpt-2", nil
	case len(regexes) > 0:
		return "", fmt.Errorf("unrecognised pre-tokenizer regex %q (know qwen2, llama-bpe, gpt-2)", regexes[0])
	}
	return "", fmt.Errorf("unrecognised pre-tokenizer %s", bytes.TrimSpace(raw))
}

// applyConfig reads bos/eos/pad tokens, add_bos/add_eos and the chat template from
// tokenizer_config.json, when the file exists.
func (v *vocab) applyConfig(path string, tokens []string, pre string, post json.RawMessage) error {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	ids := make(map[string]int, len(tokens))
	for id, t := range tokens {
		ids[t] = id
	}
	tokenOf := func(key string) (int, bool) {
		raw, ok := cfg[key]
		if !ok {
			return 0, false
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			var obj struct {
				Content string `json:"content"`
			}
			if json.Unmarshal(raw, &obj) != nil || obj.Content == "" {
				return 0, false
			}
			s = obj.Content
		}
		id, ok := ids[s]
		return id, ok
	}
	bos, hasBos := tokenOf("bos_token")
	if !hasBos && pre == "qwen2" {
		// Qwen's tokenizer_config has no bos_token; its config.json names
		// <|endoftext|>, which real Qwen GGUFs carry as bos_token_id.
		bos, hasBos = ids["<|endoftext|>"]
	}
	if hasBos {
		v.set("tokenizer.ggml.bos_token_id", uint32(bos))
	}
	if id, ok := tokenOf("eos_token"); ok {
		v.set("tokenizer.ggml.eos_token_id", uint32(id))
	}
	if id, ok := tokenOf("unk_token"); ok {
		v.set("tokenizer.ggml.unknown_token_id", uint32(id))
	}
	if id, ok := tokenOf("pad_token"); ok {
		v.set("tokenizer.ggml.padding_token_id", uint32(id))
	}
	addBos, addEos := boolKey(cfg, "add_bos_token"), boolKey(cfg, "add_eos_token")
	if addBos == nil && hasBos && (postAddsFirst(post, tokens[bos]) || pre == "llama-bpe") {
		// The post-processor adds BOS (or, for Llama 3, llama.cpp does by default and
		// its converted GGUFs say so): record it as llama.cpp's converter does.
		t := true
		addBos = &t
	}
	if addBos != nil {
		v.set("tokenizer.ggml.add_bos_token", *addBos)
	}
	if addEos != nil {
		v.set("tokenizer.ggml.add_eos_token", *addEos)
	}
	if tmpl := chatTemplate(cfg["chat_template"]); tmpl != "" {
		v.set("tokenizer.chat_template", tmpl)
	}
	return nil
}

func boolKey(cfg map[string]json.RawMessage, key string) *bool {
	var b bool
	if raw, ok := cfg[key]; ok && json.Unmarshal(raw, &b) == nil {
		return &b
	}
	return nil
}

// postAddsFirst reports whether the tokenizer.json post-processor puts the special
// token tok before every single sequence (Llama 3's <|begin_of_text|>).
func postAddsFirst(raw json.RawMessage, tok string) bool {
	var pp struct {
		Type       string                           `json:"type"`
		Processors []json.RawMessage                `json:"processors"`
		Single     []map[string]struct{ ID string } `json:"single"`
	}
	if json.Unmarshal(raw, &pp) != nil {
		return false
	}
	if pp.Type == "Sequence" {
		for _, p := range pp.Processors {
			if postAddsFirst(p, tok) {
				return true
			}
		}
		return false
	}
	if pp.Type != "TemplateProcessing" || len(pp.Single) == 0 {
		return false
	}
	st, ok := pp.Single[0]["SpecialToken"]
	return ok && st.ID == tok
}

// chatTemplate reads chat_template: a string, or a list of {name, template} from which
// the one named "default" (else the first) is taken.
func chatTemplate(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []struct{ Name, Template string }
	if json.Unmarshal(raw, &list) != nil || len(list) == 0 {
		return ""
	}
	for _, t := range list {
		if t.Name == "default" {
			return t.Template
		}
	}
	return list[0].Template
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
