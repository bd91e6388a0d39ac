package tokenizer

// Hand-written pre-tokenizer scanners, ports of llama.cpp's
// unicode_regex_split_custom_gpt2 and unicode_regex_split_custom_llama3. The llama3
// scanner with maxDigits 1 is the qwen2 regex (its only difference is \p{N} instead of
// \p{N}{1,3}); TestScannersMatchRegex checks both against the regex stage.

// scanCtx gives bounds-checked access to one span's codepoints.
type scanCtx struct {
	cps    []rune
	lo, hi int
}

const outOfRange = -1

func (c *scanCtx) cpt(pos int) rune {
	if pos >= c.lo && pos < c.hi {
		return c.cps[pos]
	}
	return outOfRange
}

// cls is a codepoint's flags with the whitespace bit folded in as bit 8; 0 when out of
// range (llama.cpp's empty unicode_cpt_flags).
type cls uint16

const clsSpace cls = 1 << 8

func (c *scanCtx) cls(pos int) cls {
	if pos >= c.lo && pos < c.hi {
		r := c.cps[pos]
		if r < 0 || r >= maxCodepoint {
			return cls(flagUndefined)
		}
		f := cls(cptFlags[r])
		if cptSpace[r] {
			f |= clsSpace
		}
		return f
	}
	return 0
}

func (f cls) letter() bool { return f&cls(flagLetter) != 0 }
func (f cls) number() bool { return f&cls(flagNumber) != 0 }
func (f cls) space() bool  { return f&clsSpace != 0 }

// other reports [^\s\p{L}\p{N}] for an in-range codepoint.
func (f cls) other() bool { return f&(clsSpace|cls(flagLetter|flagNumber)) == 0 && f != 0 }

type gpt2Stage struct{}

func (gpt2Stage) split(t *cpText, in []span, out []span) ([]span, error) {
	for _, sp := range in {
		c := scanCtx{cps: t.cps, lo: int(sp.lo), hi: int(sp.hi)}
		prev := c.lo
		add := func(end int) int {
			n := end - prev
			if n > 0 {
				out = append(out, span{int32(prev), int32(end)})
			}
			prev = end
			return n
		}
		for pos := c.lo; pos < c.hi; {
			cpt := c.cpt(pos)
			f := c.cls(pos)
			if cpt == '\'' && pos+1 < c.hi {
				n := c.cpt(pos + 1)
				if n == 's' || n == 't' || n == 'm' || n == 'd' {
					pos += add(pos + 2)
					continue
				}
				if pos+2 < c.hi {
					nn := c.cpt(pos + 2)
					if (n == 'r' && nn == 'e') || (n == 'v' && nn == 'e') || (n == 'l' && nn == 'l') {
						pos += add(pos + 3)
						continue
					}
				}
			}
			f2 := f
			if cpt == ' ' {
				f2 = c.cls(pos + 1)
			}
			if f2.letter() {
				if cpt == ' ' {
					pos++
				}
				for f2.letter() {
					pos++
					f2 = c.cls(pos)
				}
				add(pos)
				continue
			}
			if f2.number() {
				if cpt == ' ' {
					pos++
				}
				for f2.number() {
					pos++
					f2 = c.cls(pos)
				}
				add(pos)
				continue
			}
			if f2.other() {
				if cpt == ' ' {
					pos++
				}
				for f2.other() {
					pos++
					f2 = c.cls(pos)
				}
				add(pos)
				continue
			}
			ws := 0
			for c.cls(pos + ws).space() {
				ws++
			}
			if ws > 1 && c.cpt(pos+ws) != outOfRange {
				pos += ws - 1
				add(pos)
				continue
			}
			if ws > 0 {
				pos += ws
				add(pos)
				continue
			}
			pos++
			add(pos)
		}
	}
	return out, nil
}

type llama3Stage struct{ maxDigits int }

func lowerASCII(r rune) rune {
	if r >= 'A' && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}

func (s llama3Stage) split(t *cpText, in []span, out []span) ([]span, error) {
	for _, sp := range in {
		c := scanCtx{cps: t.cps, lo: int(sp.lo), hi: int(sp.hi)}
		prev := c.lo
		add := func(end int) int {
			n := end - prev
			if n > 0 {
				out = append(out, span{int32(prev), int32(end)})
			}
			prev = end
			return n
		}
		for pos := c.lo; pos < c.hi; {
			cpt := c.cpt(pos)
			f := c.cls(pos)
			// (?i:'s|'t|'re|'ve|'m|'ll|'d)
			if cpt == '\'' && pos+1 < c.hi {
				n := lowerASCII(c.cpt(pos + 1))
				if n == 's' || n == 't' || n == 'm' || n == 'd' {
					pos += add(pos + 2)
					continue
				}
				if pos+2 < c.hi {
					nn := lowerASCII(c.cpt(pos + 2))
					if (n == 'r' && nn == 'e') || (n == 'v' && nn == 'e') || (n == 'l' && nn == 'l') {
						pos += add(pos + 3)
						continue
					}
				}
			}
			// [^\r\n\p{L}\p{N}]?\p{L}+
			if !(cpt == '\r' || cpt == '\n' || f.number()) {
				if f.letter() || c.cls(pos+1).letter() {
					pos++
					for c.cls(pos).letter() {
						pos++
					}
					add(pos)
					continue
				}
			}
			// \p{N}{1,maxDigits}
			if f.number() {
				ini := pos
				for c.cls(pos).number() {
					pos++
					if pos-ini >= s.maxDigits {
						add(pos)
						ini = pos
					}
				}
				add(pos)
				continue
			}
			// <space>?[^\s\p{L}\p{N}]+[\r\n]*
			f2 := f
			if cpt == ' ' {
				f2 = c.cls(pos + 1)
			}
			if f2&(clsSpace|cls(flagLetter|flagNumber)) == 0 && f != 0 {
				if cpt == ' ' {
					pos++
				}
				for f2.other() {
					pos++
					f2 = c.cls(pos)
				}
				for r := c.cpt(pos); r == '\r' || r == '\n'; r = c.cpt(pos) {
					pos++
				}
				add(pos)
				continue
			}
			ws, lastNL := 0, 0
			for c.cls(pos + ws).space() {
				if r := c.cpt(pos + ws); r == '\r' || r == '\n' {
					lastNL = pos + ws + 1
				}
				ws++
			}
			// \s*[\r\n]+
			if lastNL > 0 {
				pos = lastNL
				add(pos)
				continue
			}
			// \s+(?!\S)
			if ws > 1 && c.cpt(pos+ws) != outOfRange {
				pos += ws - 1
				add(pos)
				continue
			}
			if ws > 0 {
				pos += ws
				add(pos)
				continue
			}
			pos++
			add(pos)
		}
	}
	return out, nil
}
