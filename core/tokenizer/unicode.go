package tokenizer

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// Codepoint category flags, as llama.cpp's unicode_cpt_flags (scripts/gen-unicode-data.py):
// one general-category bit per codepoint plus a separate White_Space bit.
const (
	flagUndefined   uint8 = 1 << 0 // Cn (and anything past U+10FFFF)
	flagNumber      uint8 = 1 << 1 // \p{N}
	flagLetter      uint8 = 1 << 2 // \p{L}
	flagSeparator   uint8 = 1 << 3 // \p{Z}
	flagMark        uint8 = 1 << 4 // \p{M}
	flagPunctuation uint8 = 1 << 5 // \p{P}
	flagSymbol      uint8 = 1 << 6 // \p{S}
	flagControl     uint8 = 1 << 7 // \p{C} except Cn
)

const maxCodepoint = 0x110000

var (
	cptFlagsOnce sync.Once
	cptFlags     []uint8 // indexed by codepoint, maxCodepoint entries
	cptSpace     []bool  // White_Space, same index
)

// whitespaceCpts is the White_Space property list llama.cpp hard-codes.
var whitespaceCpts = []rune{0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680,
	0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A,
	0x2028, 0x2029, 0x202F, 0x205F, 0x3000}

func initCptFlags() {
	f := make([]uint8, maxCodepoint)
	for i := range f {
		f[i] = flagUndefined
	}
	set := func(tab *unicode.RangeTable, flag uint8) {
		for _, r := range tab.R16 {
			for c := uint32(r.Lo); c <= uint32(r.Hi); c += uint32(r.Stride) {
				f[c] = flag
			}
		}
		for _, r := range tab.R32 {
			for c := r.Lo; c <= r.Hi; c += r.Stride {
				f[c] = flag
			}
		}
	}
	set(unicode.C, flagControl) // Cc Cf Co Cs; Go's C has no Cn
	set(unicode.L, flagLetter)
	set(unicode.M, flagMark)
	set(unicode.N, flagNumber)
	set(unicode.P, flagPunctuation)
	set(unicode.S, flagSymbol)
	set(unicode.Z, flagSeparator)
	sp := make([]bool, maxCodepoint)
	for _, c := range whitespaceCpts {
		sp[c] = true
	}
	cptFlags, cptSpace = f, sp
}

func loadCptFlags() {
	cptFlagsOnce.Do(initCptFlags)
}

// cptClass returns the category flags and the whitespace bit of c.
func cptClass(c rune) (uint8, bool) {
	if c < 0 || c >= maxCodepoint {
		return flagUndefined, false
	}
	return cptFlags[c], cptSpace[c]
}

// decodeCpt decodes one codepoint the way llama.cpp's unicode_cpt_from_utf8 does: it
// checks continuation bytes and length only (no overlong or surrogate checks). ok is
// false for an invalid sequence, which llama.cpp replaces by U+FFFD consuming one byte.
func decodeCpt(s string, i int) (c rune, size int, ok bool) {
	b0 := s[i]
	switch {
	case b0 < 0x80:
		return rune(b0), 1, true
	case b0&0x40 == 0:
		return 0, 1, false
	case b0&0x20 == 0:
		if i+1 >= len(s) || s[i+1]&0xC0 != 0x80 {
			return 0, 1, false
		}
		return rune(b0&0x1F)<<6 | rune(s[i+1]&0x3F), 2, true
	case b0&0x10 == 0:
		if i+2 >= len(s) || s[i+1]&0xC0 != 0x80 || s[i+2]&0xC0 != 0x80 {
			return 0, 1, false
		}
		return rune(b0&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), 3, true
	case b0&0x08 == 0:
		if i+3 >= len(s) || s[i+1]&0xC0 != 0x80 || s[i+2]&0xC0 != 0x80 || s[i+3]&0xC0 != 0x80 {
			return 0, 1, false
		}
		return rune(b0&0x07)<<18 | rune(s[i+1]&0x3F)<<12 | rune(s[i+2]&0x3F)<<6 | rune(s[i+3]&0x3F), 4, true
	}
	return 0, 1, false
}

// sanitizeUTF8 returns s unchanged when it is valid UTF-8. Otherwise it rewrites s the
// way llama.cpp's BPE path sees it (text → codepoints → UTF-8): every byte that does not
// start a well-formed sequence becomes U+FFFD, and sequences Go rejects but llama.cpp
// accepts (overlong forms, surrogates) are re-encoded from their decoded value.
func sanitizeUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out := make([]byte, 0, len(s)+16)
	for i := 0; i < len(s); {
		c, n, ok := decodeCpt(s, i)
		i += n
		if !ok || c >= maxCodepoint {
			c = utf8.RuneError
		}
		out = appendCpt(out, c)
	}
	return string(out)
}

// appendCpt appends c encoded as llama.cpp's unicode_cpt_to_utf8 does (surrogates are
// encoded as three bytes, not replaced).
func appendCpt(b []byte, c rune) []byte {
	switch {
	case c <= 0x7F:
		return append(b, byte(c))
	case c <= 0x7FF:
		return append(b, 0xC0|byte(c>>6), 0x80|byte(c&0x3F))
	case c <= 0xFFFF:
		return append(b, 0xE0|byte(c>>12), 0x80|byte(c>>6&0x3F), 0x80|byte(c&0x3F))
	}
	return append(b, 0xF0|byte(c>>18), 0x80|byte(c>>12&0x3F), 0x80|byte(c>>6&0x3F), 0x80|byte(c&0x3F))
}

// utf8SeqLen is llama.cpp's unicode_len_utf8: the sequence length a lead byte claims.
func utf8SeqLen(b byte) int {
	return [16]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}[b>>4]
}

// GPT-2 byte-level encoding: each byte maps to one printable codepoint.
var (
	byteToRune [256]rune
	runeToByte map[rune]byte
)

func init() {
	runeToByte = make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = rune(256 + n)
			n++
		}
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// byteEncode appends the byte-level encoding of raw to dst.
func byteEncode(dst []byte, raw string) []byte {
	for i := 0; i < len(raw); i++ {
		dst = utf8.AppendRune(dst, byteToRune[raw[i]])
	}
	return dst
}
