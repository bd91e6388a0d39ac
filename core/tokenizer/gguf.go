package tokenizer

import (
	"errors"
	"fmt"

	"github.com/minfer/minfer/core/gguf"
)

// GGUF metadata keys read by FromGGUF (llama.cpp's LLM_KV_TOKENIZER_*).
const (
	keyModel        = "tokenizer.ggml.model"
	keyPre          = "tokenizer.ggml.pre"
	keyTokens       = "tokenizer.ggml.tokens"
	keyScores       = "tokenizer.ggml.scores"
	keyTokenType    = "tokenizer.ggml.token_type"
	keyMerges       = "tokenizer.ggml.merges"
	keyAddBOS       = "tokenizer.ggml.add_bos_token"
	keyAddEOS       = "tokenizer.ggml.add_eos_token"
	keyAddPrefix    = "tokenizer.ggml.add_space_prefix"
	keyChatTemplate = "tokenizer.chat_template"
	keyName         = "general.name"
)

var ggufSpecialKeys = map[string]string{
	"bos": "tokenizer.ggml.bos_token_id", "eos": "tokenizer.ggml.eos_token_id",
	"eot": "tokenizer.ggml.eot_token_id", "eom": "tokenizer.ggml.eom_token_id",
	"unk": "tokenizer.ggml.unknown_token_id", "sep": "tokenizer.ggml.seperator_token_id",
	"pad": "tokenizer.ggml.padding_token_id", "mask": "tokenizer.ggml.mask_token_id",
	"fim_pre": "tokenizer.ggml.fim_pre_token_id", "fim_suf": "tokenizer.ggml.fim_suf_token_id",
	"fim_mid": "tokenizer.ggml.fim_mid_token_id", "fim_pad": "tokenizer.ggml.fim_pad_token_id",
	"fim_rep": "tokenizer.ggml.fim_rep_token_id", "fim_sep": "tokenizer.ggml.fim_sep_token_id",
	"prefix": "tokenizer.ggml.prefix_token_id", "suffix": "tokenizer.ggml.suffix_token_id",
	"middle": "tokenizer.ggml.middle_token_id",
}

// FromGGUF builds the tokenizer described by f's tokenizer.ggml.* metadata, as llama.cpp
// loads it: "llama" (SentencePiece) or "gpt2" (byte-level BPE with the pre-tokenizer
// named by tokenizer.ggml.pre). Special token ids at or beyond the vocabulary size are
// ignored (llama.cpp warns and keeps its default). An error names the missing or
// malformed key. f may be closed afterwards: nothing refers to its memory.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	s, err := readGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := newTokenizer(s)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return t, nil
}

func readGGUF(f *gguf.File) (*vocabSpec, error) {
	s := &vocabSpec{special: map[string]int64{}}
	var err error
	if s.model, err = f.GetString(keyModel); err != nil {
		return nil, err
	}
	switch s.model {
	case "llama", "gpt2", "bert":
	case "no_vocab", "none":
		return nil, fmt.Errorf("%s = %q: the model has no vocabulary", keyModel, s.model)
	default:
		return nil, fmt.Errorf("%s = %q is not supported (want llama, gpt2 or bert)", keyModel, s.model)
	}
	optString := func(key string, dst *string) error {
		v, err := f.GetString(key)
		if errors.Is(err, gguf.ErrNotFound) {
			return nil
		}
		*dst = v
		return err
	}
	optBool := func(key string, dst **bool) error {
		v, err := f.GetBool(key)
		if errors.Is(err, gguf.ErrNotFound) {
			return nil
		}
		*dst = &v
		return err
	}
	s.chatTemplateName = keyChatTemplate
	for _, e := range []error{
		optString(keyPre, &s.pre), optString(keyName, &s.name), optString(keyChatTemplate, &s.chatTemplate),
		optBool(keyAddBOS, &s.addBOS), optBool(keyAddEOS, &s.addEOS), optBool(keyAddPrefix, &s.prefix),
	} {
		if e != nil {
			return nil, e
		}
	}
	if s.tokens, err = f.GetStrings(keyTokens); err != nil {
		return nil, err
	}
	if f.Has(keyScores) {
		if s.scores, err = f.GetFloats(keyScores); err != nil {
			return nil, err
		}
	}
	if f.Has(keyTokenType) {
		if s.types, err = f.GetInts(keyTokenType); err != nil {
			return nil, err
		}
	}
	if s.model == "gpt2" {
		merges, err := f.GetStrings(keyMerges)
		if err != nil {
			return nil, err
		}
		s.merges = make([][2]string, len(merges))
		for i, m := range merges {
			a, b, _ := splitMerge(m) // llama.cpp keeps a malformed merge as ("", "")
			s.merges[i] = [2]string{a, b}
		}
	}
	for name, key := range ggufSpecialKeys {
		if !f.Has(key) {
			continue
		}
		v, err := f.GetInt(key)
		if err != nil {
			return nil, err
		}
		s.special[name] = v
	}
	return s, nil
}
