package tokenizer

import (
	"encoding/json"
	"fmt"

	"github.com/minfer/minfer/core/gguf"
)

// HFMetadata returns the tokenizer.* GGUF metadata that llama.cpp's converter
// (convert_hf_to_gguf.py) writes for a byte-level BPE tokenizer.json and the
// tokenizer_config.json beside it: model "gpt2", the pre-tokenizer's name, tokens,
// token types, merges ("a b"), the special token ids the config names, add_bos/add_eos
// and the chat template. It reads the files with the reader FromHF uses, so the two
// agree on every token and type. A pre-tokenizer that llama.cpp knows by no name
// (anything but the qwen2, llama-bpe and gpt-2 splits) is an error: a GGUF cannot
// describe it.
func HFMetadata(tokenizerJSONPath string) ([]gguf.KV, error) {
	s, post, err := readHFFile(tokenizerJSONPath)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", tokenizerJSONPath, err)
	}
	if s.pre == "" {
		return nil, fmt.Errorf("tokenizer: %s: the pre-tokenizer's split is not one llama.cpp names (qwen2, llama-bpe, gpt-2)", tokenizerJSONPath)
	}
	types := make([]int32, len(s.types))
	for i, t := range s.types {
		types[i] = int32(t)
	}
	merges := make([]string, len(s.merges))
	for i, m := range s.merges {
		merges[i] = m[0] + " " + m[1]
	}
	var kvs []gguf.KV
	set := func(key string, v any) {
		x, err := gguf.NewValue(v)
		if err != nil {
			panic("BUG: tokenizer metadata " + key + ": " + err.Error())
		}
		kvs = append(kvs, gguf.KV{Key: key, Value: x})
	}
	set(keyModel, "gpt2")
	set(keyPre, s.pre)
	set(keyTokens, s.tokens)
	set(keyTokenType, types)
	set(keyMerges, merges)
	bos, hasBOS := s.special["bos"]
	if !hasBOS && s.pre == "qwen2" {
		// Qwen's tokenizer_config names no bos_token; its config.json names
		// <|endoftext|>, which real Qwen GGUFs carry as bos_token_id.
		for i, w := range s.tokens {
			if w == "<|endoftext|>" {
				bos, hasBOS = int64(i), true
				break
			}
		}
	}
	if hasBOS {
		set(ggufSpecialKeys["bos"], uint32(bos))
	}
	for _, k := range []string{"eos", "unk", "pad"} {
		if id, ok := s.special[k]; ok {
			set(ggufSpecialKeys[k], uint32(id))
		}
	}
	addBOS := s.addBOS
	if addBOS == nil && hasBOS && (postAddsFirst(post, s.tokens[bos]) || s.pre == "llama-bpe") {
		// The post-processor puts BOS first (or, for Llama 3, llama.cpp does by default
		// and its converted GGUFs say so): recorded as llama.cpp's converter does.
		t := true
		addBOS = &t
	}
	if addBOS != nil {
		set(keyAddBOS, *addBOS)
	}
	if s.addEOS != nil {
		set(keyAddEOS, *s.addEOS)
	}
	if s.chatTemplate != "" {
		set(keyChatTemplate, s.chatTemplate)
	}
	return kvs, nil
}

// postAddsFirst reports whether a tokenizer.json post-processor puts the special token
// tok before every single sequence (Llama 3's <|begin_of_text|>).
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
