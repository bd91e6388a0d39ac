package tokenizer

import (
	"fmt"
	"strings"

	"github.com/dlclark/regexp2/v2"
)

// Pre-tokenization splits a raw text fragment into words before BPE, exactly as
// llama.cpp's unicode_regex_split does: a list of stages, each refining the current
// pieces; a regex stage emits its matches and the gaps between them as pieces. The
// hot patterns (gpt-2, llama3, qwen2) run as hand-written scanners that llama.cpp also
// uses (gpt-2, llama3) or that are proven equal to the regex on the test vectors and a
// fuzz test (qwen2); everything else runs through regexp2 over the same "collapsed"
// text llama.cpp feeds to std::regex.

// cpText is one fragment decoded into codepoints; offs[i] is the byte offset of cps[i]
// and offs[len(cps)] == len(s).
type cpText struct {
	s    string
	cps  []rune
	offs []int32

	collapsed []rune // lazily built views for regex stages
	wide      []rune
}

func (t *cpText) reset(s string) {
	t.s = s
	t.cps = t.cps[:0]
	t.offs = t.offs[:0]
	t.collapsed, t.wide = t.collapsed[:0], t.wide[:0]
	for i := 0; i < len(s); {
		c, n, _ := decodeCpt(s, i) // s is sanitized: always ok
		t.cps = append(t.cps, c)
		t.offs = append(t.offs, int32(i))
		i += n
	}
	t.offs = append(t.offs, int32(len(s)))
}

// span is a half-open range of codepoint indices.
type span struct{ lo, hi int32 }

// stage refines pieces: for each input span it appends the sub-spans to out.
type stage interface {
	split(t *cpText, in []span, out []span) ([]span, error)
}

// preTokenizer is the ordered list of stages for one vocabulary.
type preTokenizer struct {
	name   string
	stages []stage
}

// Regex sources, as llama.cpp writes them (llm_tokenizer_bpe's constructor).
const (
	reGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	reLlama3 = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	reQwen2  = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

	// The same two as they appear in Hugging Face tokenizer.json files.
	hfLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	hfQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// preRegexes maps a pre-tokenizer type to llama.cpp's regex list.
var preRegexes = map[string][]string{
	"default": {`[\p{P}\$\+<=>\^~\|]+`, reGPT2, `\p{N}+`, `[0-9][0-9][0-9]`},
	"llama3":  {reLlama3},
	"qwen2":   {reQwen2},
	"gpt2":    {reGPT2},
	"deepseek-llm": {"[\r\n]",
		`\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝ\u1F5F-\u1F7Dᾀ-ᾴᾶ-ᾼ\u1FBEῂ-ῄῆ-ῌ\u1FD0-\u1FD3\u1FD6-\u1FDBῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\u2126ℨ\u212A-\u212Dℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+`,
		`\s?[!-/:-~！-／：-～‘-‟　-。]+`,
		`\s+$`,
		`[一-龥ࠀ-一가-퟿]+`,
		`\p{N}+`,
	},
	"deepseek-coder": {"[\r\n]", `\s?\p{L}+`, `\s?\p{P}+`, `[一-龥ࠀ-一가-퟿]+`, `\p{N}`},
	"falcon":         {`[\p{P}\$\+<=>\^~\|\x60]+`, reGPT2, `[0-9][0-9][0-9]`},
	"starcoder":      {`\p{N}`, reGPT2},
	"deepseek-v3": {`\p{N}{1,3}`, `[一-龥぀-ゟ゠-ヿ]+`,
		"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
	"tekken": {`[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"poro":   {` ?[^(\s|.,!?…。，、।۔،)]+`},
	"viking": {` ?[^(\s|.,!?…。，、।۔،)]+`, `\p{N}`},
}

// preTypes maps tokenizer.ggml.pre to (regex list, clean_spaces, ignore_merges,
// add_bos override) as llama.cpp's llama_vocab::impl::load does.
type preType struct {
	regexes      string // key in preRegexes
	cleanSpaces  bool
	ignoreMerges bool
	addBOS       bool // forces add_bos = true (before tokenizer.ggml.add_bos_token)
}

var preTypes = map[string]preType{
	"default":        {"default", true, false, false},
	"llama3":         {"llama3", true, true, true},
	"llama-v3":       {"llama3", true, true, true},
	"llama-bpe":      {"llama3", true, true, true},
	"falcon3":        {"llama3", true, true, true},
	"deepseek-llm":   {"deepseek-llm", false, false, false},
	"deepseek-coder": {"deepseek-coder", false, false, false},
	"falcon":         {"falcon", true, false, false},
	"mpt":            {"gpt2", true, false, false},
	"starcoder":      {"starcoder", true, false, false},
	"gpt-2":          {"gpt2", true, false, false},
	"phi-2":          {"gpt2", true, false, false},
	"jina-es":        {"gpt2", true, false, false},
	"jina-de":        {"gpt2", true, false, false},
	"gigachat":       {"gpt2", true, false, false},
	"jina-v1-en":     {"gpt2", true, false, false},
	"jina-v2-es":     {"gpt2", true, false, false},
	"jina-v2-de":     {"gpt2", true, false, false},
	"jina-v2-code":   {"gpt2", true, false, false},
	"roberta-bpe":    {"gpt2", true, false, false},
	"refact":         {"starcoder", true, false, false},
	"command-r":      {"starcoder", false, false, false},
	"qwen2":          {"qwen2", false, false, false},
	"stablelm2":      {"qwen2", true, false, false},
	"olmo":           {"gpt2", true, false, false},
	"dbrx":           {"llama3", true, false, false},
	"smaug-bpe":      {"llama3", true, false, false},
	"poro-chat":      {"poro", false, false, false},
	"viking":         {"viking", false, false, false},
	"jais":           {"gpt2", true, false, false},
	"smollm":         {"starcoder", false, false, false},
	"codeshell":      {"starcoder", true, false, false},
	"bloom":          {"poro", true, false, false},
	"gpt3-finnish":   {"poro", true, false, false},
	"exaone":         {"starcoder", true, false, false},
	"minerva-7b":     {"starcoder", true, false, false},
	"megrez":         {"qwen2", true, false, false},
	"deepseek-v3":    {"deepseek-v3", false, false, false},
	"tekken":         {"tekken", false, true, true},
	"chatglm-bpe":    {"llama3", true, false, false},
}

// newPreTokenizer compiles a regex list into stages.
func newPreTokenizer(name string, regexes []string) (*preTokenizer, error) {
	p := &preTokenizer{name: name}
	for _, re := range regexes {
		st, err := newStage(re)
		if err != nil {
			return nil, fmt.Errorf("pre-tokenizer %q: regex %q: %w", name, re, err)
		}
		p.stages = append(p.stages, st)
	}
	return p, nil
}

// hfRegexPrefix marks a regex from a tokenizer.json that is none of llama.cpp's: it runs
// with full Unicode semantics (hfRegexStage) rather than over collapsed text.
const hfRegexPrefix = "\x00hf\x00"

func newStage(re string) (stage, error) {
	if src, ok := strings.CutPrefix(re, hfRegexPrefix); ok {
		return newHFRegexStage(src)
	}
	switch re {
	case reGPT2:
		return gpt2Stage{}, nil
	case reLlama3, hfLlama3:
		return llama3Stage{maxDigits: 3}, nil
	case reQwen2, hfQwen2:
		return llama3Stage{maxDigits: 1}, nil
	}
	return newRegexStage(re)
}

// split pre-tokenizes one sanitized fragment, calling emit for each word (a byte range
// of t.s) in order.
func (p *preTokenizer) split(t *cpText, bufs *[2][]span, emit func(lo, hi int)) error {
	cur := append((*bufs)[0][:0], span{0, int32(len(t.cps))})
	next := (*bufs)[1][:0]
	for _, st := range p.stages {
		var err error
		next, err = st.split(t, cur, next[:0])
		if err != nil {
			return err
		}
		cur, next = next, cur
	}
	for _, sp := range cur {
		if sp.hi > sp.lo {
			emit(int(t.offs[sp.lo]), int(t.offs[sp.hi]))
		}
	}
	(*bufs)[0], (*bufs)[1] = cur, next
	return nil
}

// regexStage runs a regex the way llama.cpp's unicode_regex_split_stl does: over the
// "collapsed" text (every non-ASCII codepoint replaced by one stand-in per category)
// when the pattern uses \p{..}, else over the codepoints with non-ASCII whitespace
// replaced by \v. Both are ECMAScript std::regex in llama.cpp; regexp2's backtracking
// matcher has the same leftmost-first semantics for these patterns.
type regexStage struct {
	re        *regexp2.Regexp
	collapsed bool
}

// Stand-ins for non-ASCII codepoints in collapsed text (llama.cpp uses bytes 0xD0-0xD5;
// private-use codepoints play that role here).
const (
	colOther  = 0xE0D0
	colNumber = 0xE0D1
	colLetter = 0xE0D2
	colPunct  = 0xE0D3
	colMark   = 0xE0D4
	colSymbol = 0xE0D5
)

// ASCII members of each class in collapsed text, exactly llama.cpp's k_ucat_map.
var collapsedClass = map[string]string{
	`\p{N}`:  `\uE0D10-9`,
	`\p{L}`:  `\uE0D2A-Za-z`,
	`\p{Lu}`: `\uE0D2A-Za-z`,
	`\p{Ll}`: `\uE0D2A-Za-z`,
	`\p{Lt}`: `\uE0D2A-Za-z`,
	`\p{Lm}`: `\uE0D2A-Za-z`,
	`\p{Lo}`: `\uE0D2A-Za-z`,
	`\p{P}`:  `\uE0D3!-#%-*,-/:-;?-@\[-\]_\{\}`,
	`\p{M}`:  `\uE0D4`,
	`\p{S}`:  `\uE0D5\$\+<->\^\x60\|`,
}

const asciiSpace = `\t\n\v\f\r `

func newRegexStage(src string) (*regexStage, error) {
	collapsed := false
	for k := range collapsedClass {
		if strings.Contains(src, k) {
			collapsed = true
		}
	}
	var b strings.Builder
	inside := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\\' && i+1 < len(src):
			rest := src[i:]
			if collapsed && strings.HasPrefix(rest, `\p{`) {
				if end := strings.IndexByte(rest, '}'); end > 0 {
					if cls, ok := collapsedClass[rest[:end+1]]; ok {
						if inside {
							b.WriteString(cls)
						} else {
							b.WriteString("[" + cls + "]")
						}
						i += end
						continue
					}
				}
			}
			switch src[i+1] {
			case 's':
				if inside {
					b.WriteString(asciiSpace)
				} else {
					b.WriteString("[" + asciiSpace + "]")
				}
			case 'S':
				if inside {
					return nil, fmt.Errorf(`\S inside a class is not supported`)
				}
				b.WriteString("[^" + asciiSpace + "]")
			default:
				b.WriteByte(c)
				b.WriteByte(src[i+1])
			}
			i++
		case c == '[' && !inside:
			inside = true
			b.WriteByte(c)
			if i+1 < len(src) && src[i+1] == '^' { // keep a leading ^ next to [
				b.WriteByte('^')
				i++
			}
		case c == ']' && inside:
			inside = false
			b.WriteByte(c)
		case c == '$' && !inside:
			b.WriteString(`\z`) // ECMAScript $ without multiline: end of input only
		default:
			b.WriteByte(c)
		}
	}
	re, err := regexp2.Compile(b.String(), regexp2.RegexOptions(0))
	if err != nil {
		return nil, err
	}
	return &regexStage{re: re, collapsed: collapsed}, nil
}

func (s *regexStage) view(t *cpText) []rune {
	if s.collapsed {
		if len(t.collapsed) != len(t.cps) {
			t.collapsed = t.collapsed[:0]
			for _, c := range t.cps {
				t.collapsed = append(t.collapsed, collapseCpt(c))
			}
		}
		return t.collapsed
	}
	if len(t.wide) != len(t.cps) {
		t.wide = t.wide[:0]
		for _, c := range t.cps {
			if c > 0x7F {
				if _, sp := cptClass(c); sp {
					c = '\v'
				}
			}
			t.wide = append(t.wide, c)
		}
	}
	return t.wide
}

func collapseCpt(c rune) rune {
	if c < 0x80 {
		return c
	}
	f, sp := cptClass(c)
	switch {
	case sp:
		return '\v'
	case f == flagNumber:
		return colNumber
	case f == flagLetter:
		return colLetter
	case f == flagPunctuation:
		return colPunct
	case f == flagMark:
		return colMark
	case f == flagSymbol:
		return colSymbol
	}
	return colOther
}

func (s *regexStage) split(t *cpText, in []span, out []span) ([]span, error) {
	return s.splitOn(s.view(t), in, out)
}

// hfRegexStage runs a tokenizer.json Split regex with full Unicode semantics (used only
// for patterns that are not one of llama.cpp's known ones).
type hfRegexStage struct{ re *regexp2.Regexp }

func newHFRegexStage(src string) (*hfRegexStage, error) {
	re, err := regexp2.Compile(src, regexp2.RegexOptions(0))
	if err != nil {
		return nil, err
	}
	return &hfRegexStage{re: re}, nil
}

func (s *hfRegexStage) split(t *cpText, in []span, out []span) ([]span, error) {
	return (&regexStage{re: s.re}).splitOn(t.cps, in, out)
}

func (s *regexStage) splitOn(text []rune, in []span, out []span) ([]span, error) {
	for _, sp := range in {
		ms, err := s.re.FindAllRunesIndex(text[sp.lo:sp.hi], -1)
		if err != nil {
			return nil, err
		}
		prev := int32(0)
		for _, m := range ms {
			lo, hi := int32(m[0]), int32(m[1])
			if lo > prev {
				out = append(out, span{sp.lo + prev, sp.lo + lo})
			}
			out = append(out, span{sp.lo + lo, sp.lo + hi})
			prev = hi
		}
		if n := sp.hi - sp.lo; prev < n {
			out = append(out, span{sp.lo + prev, sp.hi})
		}
	}
	return out, nil
}
