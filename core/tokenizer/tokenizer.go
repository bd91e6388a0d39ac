// Package tokenizer turns text into token ids and back exactly as llama.cpp does, for
// SentencePiece-style ("llama"), byte-level BPE ("gpt2") and WordPiece ("bert")
// vocabularies read from GGUF metadata (FromGGUF), byte-level BPE from a Hugging Face
// tokenizer.json (FromHF), and renders chat templates.
//
// Reference behaviour: every choice follows llama.cpp's llama-vocab.cpp and unicode.cpp,
// and is checked against llama.cpp's own test vectors (shared/testdata/tokenizer) and
// the prompt ids of the golden models. In particular:
//
//   - Encode(text, addSpecial, parseSpecial) is llama_tokenize: special-token text is
//     matched first (control tokens only with parseSpecial, user-defined ones always),
//     then each remaining fragment is tokenized on its own.
//   - Byte-level BPE pre-tokenizes with the regex list that tokenizer.ggml.pre selects
//     (hand-written scanners for gpt-2, llama3 and qwen2; regexp2 over llama.cpp's
//     "collapsed" text for the others), then merges by rank.
//   - A tokenizer.json is read as llama.cpp reads the GGUF converted from it: its
//     normalizer (Qwen's NFC) is not applied, and its Split regex picks the llama.cpp
//     pre-tokenizer of the same pattern.
//   - Invalid UTF-8 input is not an error: SPM emits byte tokens, BPE reads each bad
//     byte as U+FFFD, WordPiece drops it.
//   - Decode is llama_detokenize (SPM leading space removed, some vocabularies clean
//     spaces before punctuation); generated text should go through NewDecoder, which
//     concatenates pieces and holds back split UTF-8 characters, as llama-server does.
//
// A Tokenizer is immutable after construction and safe for concurrent use. Token ids are
// int32 in [0, NVocab()).
package tokenizer

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Token attributes (llama.cpp's llama_token_attr bits).
type attr uint16

const (
	attrUnknown     attr = 1 << 0
	attrUnused      attr = 1 << 1
	attrNormal      attr = 1 << 2
	attrControl     attr = 1 << 3
	attrUserDefined attr = 1 << 4
	attrByte        attr = 1 << 5
	attrLStrip      attr = 1 << 7
	attrRStrip      attr = 1 << 8
)

// GGUF token types (tokenizer.ggml.token_type).
const (
	typeUndefined   = 0
	typeNormal      = 1
	typeUnknown     = 2
	typeControl     = 3
	typeUserDefined = 4
	typeUnused      = 5
	typeByte        = 6
)

func attrFromType(t int64) attr {
	switch t {
	case typeUnknown:
		return attrUnknown
	case typeUnused:
		return attrUnused
	case typeNormal:
		return attrNormal
	case typeControl:
		return attrControl
	case typeUserDefined:
		return attrUserDefined
	case typeByte:
		return attrByte
	}
	return 0
}

type kind int

const (
	kindSPM kind = iota
	kindBPE
	kindWPM
)

const noToken int32 = -1

// vocabSpec is everything a Tokenizer is built from, whatever the source (GGUF or
// tokenizer.json); field meanings follow the tokenizer.ggml.* keys.
type vocabSpec struct {
	model   string // "llama" or "gpt2"
	pre     string // tokenizer.ggml.pre ("" = absent)
	regexes []string
	name    string // general.name
	tokens  []string
	scores  []float32
	types   []int64
	merges  [][2]string

	special                map[string]int64 // "bos", "eos", ...: ids present in the source
	noDefaultIDs           bool             // no llama.cpp default BOS/EOS ids (tokenizer.json)
	ignoreMerges           bool             // take a word that is a token whole (HF ignore_merges)
	addBOS, addEOS, prefix *bool
	chatTemplate           string
	chatTemplateName       string // where chatTemplate came from, for errors
}

type token struct {
	text  string
	score float32
	attr  attr
}

// Tokenizer encodes and decodes text for one vocabulary. Build it with FromGGUF or FromHF.
type Tokenizer struct {
	kind   kind
	tokens []token
	toID   map[string]int32

	bos, eos, eot, eom, unk, sep, pad int32
	addBOS, addEOS                    bool
	addSpacePrefix, cleanSpaces       bool
	ignoreMerges                      bool
	eog                               map[int32]bool

	special []int32  // control/user-defined/unknown tokens, longest text first
	pieces  []string // token_to_piece(id, special=true)

	// SPM
	byteTok [256]int32 // <0xNN> (or the raw byte) token, noToken if absent

	// WPM
	maxTokenLen int

	// BPE
	pre     *preTokenizer
	bpe     *bpeModel
	chatTpl string
	// chatTplName says where chatTpl came from, for errors.
	chatTplName string
	// minTokDiv: n bytes of text make at least n/minTokDiv tokens (0: no bound).
	minTokDiv int
}

var errNoVocab = errors.New("no vocabulary")

func newTokenizer(s *vocabSpec) (*Tokenizer, error) {
	loadCptFlags()
	n := len(s.tokens)
	if n == 0 {
		return nil, errNoVocab
	}
	if n > 1<<31-1 {
		return nil, fmt.Errorf("vocabulary of %d tokens is too large", n)
	}
	if s.scores != nil && len(s.scores) != n {
		return nil, fmt.Errorf("%d scores for %d tokens", len(s.scores), n)
	}
	if s.types != nil && len(s.types) != n {
		return nil, fmt.Errorf("%d token types for %d tokens", len(s.types), n)
	}
	t := &Tokenizer{chatTpl: s.chatTemplate, chatTplName: s.chatTemplateName, eot: noToken, eom: noToken, sep: noToken, pad: noToken}
	var pt preType
	switch s.model {
	case "llama":
		t.kind = kindSPM
		t.bos, t.eos, t.unk = 1, 2, 0
		t.addBOS, t.addSpacePrefix = true, true
	case "gpt2":
		t.kind = kindBPE
		t.bos, t.eos, t.unk = 11, 11, noToken
		pre := s.pre
		if pre == "" {
			pre = "default"
		}
		if s.regexes == nil {
			var ok bool
			pt, ok = preTypes[pre]
			if !ok {
				return nil, fmt.Errorf("unknown pre-tokenizer type %q", pre)
			}
			s.regexes = preRegexes[pt.regexes]
		}
		t.cleanSpaces, t.ignoreMerges, t.addBOS = pt.cleanSpaces, pt.ignoreMerges || s.ignoreMerges, pt.addBOS
		if pre == "chatglm-bpe" {
			t.bos = noToken // llama.cpp: no BOS unless tokenizer.ggml.bos_token_id says so
		}
		p, err := newPreTokenizer(pre, s.regexes)
		if err != nil {
			return nil, err
		}
		t.pre = p
	case "bert":
		t.kind = kindWPM
		t.bos, t.eos, t.unk, t.sep, t.pad = 101, noToken, 100, 102, 0
		t.addBOS, t.cleanSpaces = true, true
	default:
		return nil, fmt.Errorf("unsupported tokenizer model %q (want llama, gpt2 or bert)", s.model)
	}
	if s.prefix != nil {
		t.addSpacePrefix = *s.prefix
	}
	if s.noDefaultIDs {
		t.bos, t.eos, t.unk = noToken, noToken, noToken
	}

	t.tokens = make([]token, n)
	t.toID = make(map[string]int32, n)
	for i, w := range s.tokens {
		if w == "" {
			w = fmt.Sprintf("[EMPTY_%d]", i)
		}
		tok := token{text: w, attr: attrNormal}
		if s.scores != nil {
			tok.score = s.scores[i]
		}
		if s.types != nil {
			tok.attr = attrFromType(s.types[i])
		}
		t.tokens[i] = tok
		if _, dup := t.toID[w]; !dup { // a duplicate text keeps its first id
			t.toID[w] = int32(i)
		}
		t.maxTokenLen = max(t.maxTokenLen, len(w))
	}

	if t.kind == kindBPE {
		m, err := newBPEModel(t.toID, s.merges)
		if err != nil {
			return nil, err
		}
		t.bpe = m
	} else {
		for b := 0; b < 256; b++ {
			t.byteTok[b] = noToken
			if id, ok := t.toID[fmt.Sprintf("<0x%02X>", b)]; ok {
				t.byteTok[b] = id
			} else if id, ok := t.toID[string([]byte{byte(b)})]; ok {
				t.byteTok[b] = id
			}
		}
	}

	t.setSpecialIDs(s)
	t.buildSpecialCache(s)
	t.pieces = make([]string, n)
	for i := range t.tokens {
		t.pieces[i] = t.pieceUncached(int32(i))
	}
	t.setMinTokens()
	return t, nil
}

// setMinTokens sets the divisor of MinTokens: twice the longest piece (a token
// covers at most its piece's bytes of input; sanitising invalid UTF-8 shrinks the
// input by at most a quarter). WordPiece drops characters and a special token with
// lstrip/rstrip absorbs any run of whitespace, so those vocabularies get no bound.
func (t *Tokenizer) setMinTokens() {
	t.minTokDiv = 0
	if t.kind == kindWPM {
		return
	}
	longest := 1
	for i, p := range t.pieces {
		if t.tokens[i].attr&(attrLStrip|attrRStrip) != 0 {
			return
		}
		longest = max(longest, len(p)+1) // +1: SPM's added space prefix
	}
	t.minTokDiv = 2 * longest
}

// MinTokens is a lower bound on the tokens Encode makes of n bytes of text, 0 when
// the vocabulary allows none. A server refuses a prompt far over its context with it
// before spending seconds and hundreds of MB tokenizing it.
func (t *Tokenizer) MinTokens(n int) int {
	if t.minTokDiv == 0 {
		return 0
	}
	return n / t.minTokDiv
}

// setSpecialIDs applies the tokenizer.ggml.*_token_id keys, add_bos/add_eos, and
// llama.cpp's text-based detection of EOT/EOM/FIM tokens and of the end-of-generation set.
func (t *Tokenizer) setSpecialIDs(s *vocabSpec) {
	n := int64(len(t.tokens))
	var fimPre, fimSuf, fimMid, fimPad, fimRep, fimSep, mask int32 = noToken, noToken, noToken, noToken, noToken, noToken, noToken
	slots := []struct {
		key string
		p   *int32
	}{
		{"bos", &t.bos}, {"eos", &t.eos}, {"eot", &t.eot}, {"eom", &t.eom}, {"unk", &t.unk},
		{"sep", &t.sep}, {"pad", &t.pad}, {"mask", &mask},
		{"fim_pre", &fimPre}, {"fim_suf", &fimSuf}, {"fim_mid", &fimMid},
		{"fim_pad", &fimPad}, {"fim_rep", &fimRep}, {"fim_sep", &fimSep},
		{"prefix", &fimPre}, {"suffix", &fimSuf}, {"middle", &fimMid},
	}
	for _, sl := range slots {
		if id, ok := s.special[sl.key]; ok && id >= 0 && id < n {
			*sl.p = int32(id)
		}
	}
	for _, p := range []*int32{&t.bos, &t.eos, &t.unk, &t.sep, &t.pad} {
		if *p >= int32(n) { // a default id (gpt2's 11, SPM's 1/2) that a tiny vocabulary lacks
			*p = noToken
		}
	}
	if s.addBOS != nil {
		t.addBOS = *s.addBOS
	}
	if s.addEOS != nil {
		t.addEOS = *s.addEOS
	}

	// Walk tokens in id order so the choice among several candidates is deterministic
	// (llama.cpp walks a hash map; every candidate ends up in the EOG set either way).
	control := func(id int32) { t.tokens[id].attr = attrControl }
	detect := func(p *int32, texts ...string) {
		if *p != noToken {
			return
		}
		for _, x := range texts {
			if id, ok := t.toID[x]; ok && (*p == noToken || id < *p) {
				*p = id
			}
		}
		if *p != noToken && t.tokens[*p].attr&attrControl == 0 {
			control(*p)
		}
	}
	detect(&t.eot, "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "<｜end▁of▁sentence｜>")
	detect(&t.eom, "<|eom_id|>")
	detect(&fimPre, "<|fim_prefix|>", "<fim-prefix>", "<｜fim▁begin｜>", "<PRE>")
	detect(&fimSuf, "<|fim_suffix|>", "<fim-suffix>", "<｜fim▁hole｜>", "<SUF>")
	detect(&fimMid, "<|fim_middle|>", "<fim-middle>", "<｜fim▁end｜>", "<MID>")
	detect(&fimPad, "<|fim_pad|>", "<fim-pad>", "<PAD>")
	detect(&fimRep, "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>")
	detect(&fimSep, "<|file_sep|>")

	t.eog = map[int32]bool{}
	for _, id := range []int32{fimPad, fimRep, fimSep, t.eos, t.eot, t.eom} {
		if id != noToken {
			t.eog[id] = true
		}
	}
	for _, x := range []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>"} {
		if id, ok := t.toID[x]; ok {
			t.eog[id] = true
			if t.tokens[id].attr&attrControl == 0 {
				control(id)
			}
		}
	}
}

// buildSpecialCache lists the tokens matched as whole units in input text, longest first,
// and applies llama.cpp's per-model lstrip/rstrip attributes.
func (t *Tokenizer) buildSpecialCache(s *vocabSpec) {
	for id, tok := range t.tokens {
		if tok.attr&(attrControl|attrUserDefined|attrUnknown) != 0 {
			t.special = append(t.special, int32(id))
		}
	}
	sort.SliceStable(t.special, func(a, b int) bool {
		return len(t.tokens[t.special[a]].text) > len(t.tokens[t.special[b]].text)
	})
	setAttr := func(text string, a attr, on bool) {
		if id, ok := t.toID[text]; ok {
			if on {
				t.tokens[id].attr |= a
			} else {
				t.tokens[id].attr &^= a
			}
		}
	}
	name := strings.ToLower(s.name)
	switch {
	case strings.Contains(s.pre, "jina-v2-de") || strings.Contains(s.pre, "jina-v2-es") || strings.Contains(s.pre, "jina-v2-code"):
		setAttr("<mask>", attrLStrip, true)
	case strings.Contains(name, "phi-3") || strings.Contains(name, "phi3"):
		for _, id := range t.special {
			t.tokens[id].attr |= attrRStrip
		}
		setAttr("</s>", attrRStrip, true)
		for _, x := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			setAttr(x, attrRStrip, false)
		}
	}
}

// NVocab is the number of tokens.
func (t *Tokenizer) NVocab() int { return len(t.tokens) }

// BOS is the beginning-of-sequence token, -1 if the vocabulary has none.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS is the end-of-sequence token, -1 if the vocabulary has none.
func (t *Tokenizer) EOS() int32 { return t.eos }

// AddBOS reports whether Encode with addSpecial prepends BOS.
func (t *Tokenizer) AddBOS() bool { return t.addBOS && t.bos != noToken }

// IsEOG reports whether id ends generation: EOS, EOT, EOM and the tokens llama.cpp
// recognises by text (<|im_end|>, <|eot_id|>, <|endoftext|>, <end_of_turn>, <|end|>, …).
func (t *Tokenizer) IsEOG(id int32) bool { return t.eog[id] }

// TokenText is the vocabulary entry of id as stored (byte-level or ▁-escaped), "" when
// id is out of range.
func (t *Tokenizer) TokenText(id int32) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id].text
}

// ChatTemplate is the model's Jinja chat template, "" if it has none.
func (t *Tokenizer) ChatTemplate() string { return t.chatTpl }

// Piece is the text of id as llama.cpp's token_to_piece with special=true: byte tokens
// give their byte, byte-level BPE tokens their raw bytes, ▁ becomes a space, control
// tokens their text. The result may be part of a UTF-8 sequence. nil if id is out of
// range. The caller must not modify it.
func (t *Tokenizer) Piece(id int32) []byte {
	if id < 0 || int(id) >= len(t.pieces) {
		return nil
	}
	return []byte(t.pieces[id])
}

func (t *Tokenizer) pieceUncached(id int32) string {
	tok := t.tokens[id]
	if tok.attr&(attrUnknown|attrControl|attrUserDefined) != 0 {
		return tok.text
	}
	switch t.kind {
	case kindSPM, kindWPM:
		if tok.attr&attrNormal != 0 {
			return strings.ReplaceAll(tok.text, "\u2581", " ")
		}
		if tok.attr&attrByte != 0 {
			if b, ok := parseByteToken(tok.text); ok {
				return string([]byte{b})
			}
		}
	case kindBPE:
		if tok.attr&attrNormal != 0 {
			return byteDecode(tok.text)
		}
	}
	return ""
}

// parseByteToken reads "<0xNN>" (llama.cpp takes the two hex digits at offset 3).
func parseByteToken(s string) (byte, bool) {
	if len(s) < 5 {
		return 0, false
	}
	var v byte
	for _, c := range []byte(s[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | (c - '0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | (c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return v, true
}

// byteDecode maps a byte-level BPE token text back to raw bytes (llama_decode_text): a
// codepoint outside the 256-symbol alphabet becomes "[UNK_BYTE_0x…]" like llama.cpp.
func byteDecode(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c, n, ok := decodeCpt(s, i)
		if !ok {
			c = 0xFFFD
		}
		if b, found := runeToByte[c]; found {
			out = append(out, b)
		} else {
			out = append(out, "[UNK_BYTE_0x"...)
			for _, x := range appendCpt(nil, c) {
				out = fmt.Appendf(out, "%02x", x)
			}
			out = append(out, s...)
			out = append(out, ']')
		}
		i += n
	}
	return string(out)
}
