package tokenizer

import (
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// WordPiece (tokenizer.ggml.model "bert"), as llama.cpp's llm_tokenizer_wpm_session:
// the text is split into words at whitespace, punctuation, ASCII symbols and CJK
// characters (after mapping each codepoint to the first codepoint of its NFD form and
// lowercasing it), and each word, prefixed with ▁, is covered greedily by the longest
// tokens; a word that cannot be covered becomes the unknown token.

func (t *Tokenizer) encodeWPM(text string, out []int32) []int32 {
	for _, w := range wpmWords(text) {
		word := "\u2581" + w
		start := len(out)
		for i := 0; i < len(word); i++ {
			match := false
			for j := min(len(word), i+t.maxTokenLen+1); j > i; j-- {
				if id, ok := t.toID[word[i:j]]; ok {
					out = append(out, id)
					match = true
					i = j - 1
					break
				}
			}
			if !match {
				out = out[:start]
				break
			}
		}
		if len(out) == start && t.unk != noToken {
			out = append(out, t.unk)
		}
	}
	return out
}

// wpmWords is llama.cpp's llm_tokenizer_wpm_session::preprocess.
func wpmWords(text string) []string {
	var words []string
	var cur []byte
	flush := func() {
		if len(cur) > 0 {
			words = append(words, string(cur))
			cur = cur[:0]
		}
	}
	for i := 0; i < len(text); {
		c, n, ok := decodeCpt(text, i)
		i += n
		if !ok {
			c = 0xFFFD
		}
		c = nfdFirst(c)
		f, space := cptClass(c)
		if space {
			flush()
			continue
		}
		if c == 0 || c == 0xFFFD || f == flagControl {
			continue
		}
		lc := unicode.ToLower(c)
		if f == flagPunctuation || (c < 0x7F && f == flagSymbol) || isChineseChar(c) {
			flush()
			words = append(words, string(appendCpt(nil, lc)))
			continue
		}
		cur = appendCpt(cur, lc)
	}
	flush()
	return words
}

// nfdFirst maps c to the first codepoint of its canonical decomposition.
func nfdFirst(c rune) rune {
	if c < 0xC0 || c >= maxCodepoint || (c >= 0xD800 && c < 0xE000) {
		return c
	}
	s := norm.NFD.String(string(c))
	for _, r := range s {
		return r
	}
	return c
}

func isChineseChar(c rune) bool {
	return (c >= 0x04E00 && c <= 0x09FFF) || (c >= 0x03400 && c <= 0x04DBF) ||
		(c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
		(c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
		(c >= 0x0F900 && c <= 0x0FAFF) || (c >= 0x2F800 && c <= 0x2FA1F)
}
