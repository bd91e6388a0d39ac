package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FromHF builds a byte-level BPE tokenizer from a Hugging Face tokenizer.json and the
// tokenizer_config.json beside it (optional: BOS/EOS, add_bos_token, chat_template).
//
// The result tokenizes as llama.cpp would with a GGUF converted from these files
// (convert_hf_to_gguf.py): the Split regex of the Qwen2 and Llama 3 families selects
// llama.cpp's qwen2 / llama-bpe pre-tokenizers, any other regex runs with full Unicode
// semantics; added tokens marked special (or looking like <|…|>) are control tokens,
// the others user-defined; the normalizer (e.g. Qwen's NFC) is not applied, as in
// llama.cpp. Only byte-level BPE models are supported; other models are an error that
// says so.
func FromHF(tokenizerJSONPath string) (*Tokenizer, error) {
	s, err := readHF(tokenizerJSONPath)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", tokenizerJSONPath, err)
	}
	t, err := newTokenizer(s)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", tokenizerJSONPath, err)
	}
	return t, nil
}

// maxHFTokens bounds a tokenizer.json's vocabulary (the largest released ones hold
// about 262K tokens).
const maxHFTokens = 1 << 23

type hfAddedToken struct {
	ID      int64  `json:"id"`
	Content string `json:"content"`
	Special bool   `json:"special"`
}

type hfPreTok struct {
	Type          string     `json:"type"`
	Pretokenizers []hfPreTok `json:"pretokenizers"`
	Pattern       struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior string `json:"behavior"`
	Invert   bool   `json:"invert"`
	UseRegex *bool  `json:"use_regex"`
}

type hfFile struct {
	AddedTokens   []hfAddedToken  `json:"added_tokens"`
	PreTokenizer  *hfPreTok       `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Model         struct {
		Type         string      `json:"type"`
		Vocab        hfVocab     `json:"vocab"`
		Merges       hfMergeList `json:"merges"`
		IgnoreMerges bool        `json:"ignore_merges"`
		ByteFallback bool        `json:"byte_fallback"`
	} `json:"model"`
}

type hfConfig struct {
	AddBOS       *bool           `json:"add_bos_token"`
	AddEOS       *bool           `json:"add_eos_token"`
	BOS          json.RawMessage `json:"bos_token"`
	EOS          json.RawMessage `json:"eos_token"`
	Pad          json.RawMessage `json:"pad_token"`
	Unk          json.RawMessage `json:"unk_token"`
	ChatTemplate json.RawMessage `json:"chat_template"`
}

func readHF(path string) (*vocabSpec, error) {
	s, _, err := readHFFile(path)
	return s, err
}

// readHFFile reads tokenizer.json (and tokenizer_config.json beside it) into a
// vocabSpec; it also returns the raw post_processor section, which only the GGUF
// conversion (HFMetadata) needs.
func readHFFile(path string) (*vocabSpec, json.RawMessage, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var f hfFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, nil, fmt.Errorf("parse: %w", err)
	}
	s, err := hfSpec(&f, path)
	return s, f.PostProcessor, err
}

func hfSpec(f *hfFile, path string) (*vocabSpec, error) {
	if f.Model.Type != "BPE" {
		return nil, fmt.Errorf("model type %q is not supported (only byte-level BPE)", f.Model.Type)
	}
	if len(f.Model.Vocab) == 0 {
		return nil, errors.New("model.vocab is empty")
	}
	s := &vocabSpec{model: "gpt2", special: map[string]int64{}, noDefaultIDs: true}
	if err := hfPreTokenizer(f.PreTokenizer, s); err != nil {
		return nil, err
	}
	s.merges = f.Model.Merges

	n := int64(0)
	for _, id := range f.Model.Vocab {
		if id < 0 || id >= 1<<31-1 {
			return nil, fmt.Errorf("vocab id %d out of range", id)
		}
		n = max(n, id+1)
	}
	for _, a := range f.AddedTokens {
		if a.ID < 0 || a.ID >= 1<<31-1 {
			return nil, fmt.Errorf("added token %q: id %d out of range", a.Content, a.ID)
		}
		n = max(n, a.ID+1)
	}
	if n > maxHFTokens {
		// The table is allocated at the largest id: a hostile id must not size it.
		return nil, fmt.Errorf("token id %d is beyond the largest vocabulary read (%d tokens)", n-1, maxHFTokens)
	}
	s.tokens = make([]string, n)
	s.types = make([]int64, n)
	for i := range s.tokens {
		s.tokens[i] = fmt.Sprintf("[PAD%d]", i)
		s.types[i] = typeUnused
	}
	for w, id := range f.Model.Vocab {
		s.tokens[id], s.types[id] = w, typeNormal
	}
	for _, a := range f.AddedTokens {
		s.tokens[a.ID] = a.Content
		if a.Special || looksSpecial(a.Content) {
			s.types[a.ID] = typeControl
		} else {
			s.types[a.ID] = typeUserDefined
		}
	}
	s.ignoreMerges = f.Model.IgnoreMerges

	if err := readHFConfig(filepath.Join(filepath.Dir(path), "tokenizer_config.json"), s); err != nil {
		return nil, err
	}
	return s, nil
}

// hfPreTokenizer maps the pre_tokenizer section to llama.cpp's pre-tokenizer types.
func hfPreTokenizer(p *hfPreTok, s *vocabSpec) error {
	if p == nil {
		return errors.New("no pre_tokenizer: only byte-level BPE tokenizers are supported")
	}
	var list []hfPreTok
	if p.Type == "Sequence" {
		list = p.Pretokenizers
	} else {
		list = []hfPreTok{*p}
	}
	byteLevel := false
	var regexes []string
	for _, q := range list {
		switch q.Type {
		case "ByteLevel":
			byteLevel = true
			if q.UseRegex == nil || *q.UseRegex {
				regexes = append(regexes, reGPT2)
			}
		case "Split":
			if q.Invert || (q.Behavior != "Isolated" && q.Behavior != "") {
				return fmt.Errorf("Split pre-tokenizer with behavior %q invert %v is not supported", q.Behavior, q.Invert)
			}
			switch {
			case q.Pattern.Regex != nil:
				regexes = append(regexes, *q.Pattern.Regex)
			case q.Pattern.String != nil:
				regexes = append(regexes, regexpQuote(*q.Pattern.String))
			default:
				return errors.New("Split pre-tokenizer without a pattern")
			}
		case "Digits", "Punctuation", "Whitespace", "WhitespaceSplit", "Metaspace":
			return fmt.Errorf("pre-tokenizer %q is not supported", q.Type)
		default:
			return fmt.Errorf("unknown pre-tokenizer %q", q.Type)
		}
	}
	if !byteLevel {
		return errors.New("no ByteLevel pre-tokenizer: only byte-level BPE tokenizers are supported")
	}
	switch {
	case len(regexes) == 1 && regexes[0] == hfQwen2:
		s.pre = "qwen2"
	case len(regexes) == 1 && regexes[0] == hfLlama3:
		s.pre = "llama-bpe"
	case len(regexes) == 1 && regexes[0] == reGPT2:
		s.pre = "gpt-2"
	default:
		s.regexes = make([]string, len(regexes))
		for i, r := range regexes {
			s.regexes[i] = hfRegexPrefix + r
		}
	}
	return nil
}

func regexpQuote(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$#&-~ `, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// splitMerge splits "a b" at the first space after the first byte (llama.cpp's rule).
func splitMerge(m string) (string, string, bool) {
	if len(m) < 2 {
		return "", "", false
	}
	i := strings.IndexByte(m[1:], ' ')
	if i < 0 {
		return "", "", false
	}
	return m[:i+1], m[i+2:], true
}

// looksSpecial is convert_hf_to_gguf.py's does_token_look_special.
func looksSpecial(s string) bool {
	switch s {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return (strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>")) ||
		(strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>")) ||
		(strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">"))
}

func readHFConfig(path string, s *vocabSpec) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var c hfConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	ids := map[string]int64{}
	for i, w := range s.tokens {
		if _, ok := ids[w]; !ok {
			ids[w] = int64(i)
		}
	}
	for key, raw := range map[string]json.RawMessage{"bos": c.BOS, "eos": c.EOS, "pad": c.Pad, "unk": c.Unk} {
		text, err := tokenField(raw)
		if err != nil {
			return fmt.Errorf("%s: %s_token: %w", path, key, err)
		}
		if text == "" {
			continue
		}
		id, ok := ids[text]
		if !ok {
			return fmt.Errorf("%s: %s_token %q is not in the vocabulary", path, key, text)
		}
		s.special[key] = id
	}
	s.addBOS, s.addEOS = c.AddBOS, c.AddEOS
	tpl, err := chatTemplateField(c.ChatTemplate)
	if err != nil {
		return fmt.Errorf("%s: chat_template: %w", path, err)
	}
	s.chatTemplateName = "chat_template of " + path
	if tpl == "" {
		jpath := filepath.Join(filepath.Dir(path), "chat_template.jinja")
		if jb, err := os.ReadFile(jpath); err == nil {
			tpl = string(jb)
			s.chatTemplateName = jpath
		}
	}
	s.chatTemplate = tpl
	return nil
}

// tokenField reads a token given as "text", {"content": "text", …} or null.
func tokenField(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var str string
	if err := json.Unmarshal(raw, &str); err == nil {
		return str, nil
	}
	var obj struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", err
	}
	return obj.Content, nil
}

// chatTemplateField reads chat_template as a string or as a list of {name, template},
// choosing "default".
func chatTemplateField(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var str string
	if err := json.Unmarshal(raw, &str); err == nil {
		return str, nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", err
	}
	for _, e := range list {
		if e.Name == "default" {
			return e.Template, nil
		}
	}
	if len(list) > 0 {
		return list[0].Template, nil
	}
	return "", nil
}
