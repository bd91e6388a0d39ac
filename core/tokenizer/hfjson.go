package tokenizer

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Fast decoding of the two large parts of a tokenizer.json (model.vocab and
// model.merges, hundreds of thousands of entries): encoding/json's reflection-based map
// decoding takes most of the load time, so these scan the raw JSON directly and fall
// back to encoding/json only for strings with escapes.

// hfVocab is model.vocab: token text → id.
type hfVocab map[string]int64

func (v *hfVocab) UnmarshalJSON(b []byte) error {
	p := jsonScan{b: b}
	m := make(hfVocab, len(b)/16)
	if err := p.object(func(key string) error {
		n, err := p.integer()
		if err != nil {
			return fmt.Errorf("vocab %q: %w", key, err)
		}
		m[key] = n
		return nil
	}); err != nil {
		return fmt.Errorf("model.vocab: %w", err)
	}
	*v = m
	return nil
}

// hfMergeList is model.merges as "a b" strings or [a, b] pairs.
type hfMergeList [][2]string

func (l *hfMergeList) UnmarshalJSON(b []byte) error {
	p := jsonScan{b: b}
	p.space()
	if p.peek() == 'n' {
		return p.literal("null")
	}
	var out [][2]string
	err := p.array(func(i int) error {
		p.space()
		if p.peek() == '[' {
			var pair [2]string
			n := 0
			if err := p.array(func(j int) error {
				s, err := p.str()
				if err != nil {
					return err
				}
				if j < 2 {
					pair[j] = s
				}
				n++
				return nil
			}); err != nil {
				return err
			}
			if n != 2 {
				return fmt.Errorf("merge %d has %d parts, want 2", i, n)
			}
			out = append(out, pair)
			return nil
		}
		s, err := p.str()
		if err != nil {
			return err
		}
		a, b, ok := splitMerge(s)
		if !ok {
			return fmt.Errorf("merge %d %q: no space separator", i, s)
		}
		out = append(out, [2]string{a, b})
		return nil
	})
	if err != nil {
		return fmt.Errorf("model.merges: %w", err)
	}
	*l = out
	return nil
}

// jsonScan is a minimal scanner over one JSON value that encoding/json has already
// checked for syntax (it calls UnmarshalJSON only on valid JSON); it still reports
// unexpected shapes (a string where a number belongs, …) as errors.
type jsonScan struct {
	b []byte
	i int
}

func (p *jsonScan) space() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *jsonScan) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *jsonScan) expect(c byte) error {
	p.space()
	if p.peek() != c {
		return fmt.Errorf("offset %d: want %q", p.i, c)
	}
	p.i++
	return nil
}

func (p *jsonScan) literal(s string) error {
	if p.i+len(s) > len(p.b) || string(p.b[p.i:p.i+len(s)]) != s {
		return fmt.Errorf("offset %d: want %s", p.i, s)
	}
	p.i += len(s)
	return nil
}

func (p *jsonScan) str() (string, error) {
	if err := p.expect('"'); err != nil {
		return "", err
	}
	start, escaped := p.i, false
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case '\\':
			escaped = true
			p.i += 2
			continue
		case '"':
			raw := p.b[start:p.i]
			p.i++
			if !escaped {
				return string(raw), nil
			}
			var s string
			if err := json.Unmarshal(p.b[start-1:p.i], &s); err != nil {
				return "", err
			}
			return s, nil
		}
		p.i++
	}
	return "", fmt.Errorf("unterminated string at offset %d", start)
}

func (p *jsonScan) integer() (int64, error) {
	p.space()
	start := p.i
	for p.i < len(p.b) && (p.b[p.i] == '-' || (p.b[p.i] >= '0' && p.b[p.i] <= '9')) {
		p.i++
	}
	return strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
}

func (p *jsonScan) object(each func(key string) error) error {
	if err := p.expect('{'); err != nil {
		return err
	}
	p.space()
	if p.peek() == '}' {
		p.i++
		return nil
	}
	for {
		k, err := p.str()
		if err != nil {
			return err
		}
		if err := p.expect(':'); err != nil {
			return err
		}
		if err := each(k); err != nil {
			return err
		}
		p.space()
		switch p.peek() {
		case ',':
			p.i++
		case '}':
			p.i++
			return nil
		default:
			return fmt.Errorf("offset %d: want , or }", p.i)
		}
	}
}

func (p *jsonScan) array(each func(i int) error) error {
	if err := p.expect('['); err != nil {
		return err
	}
	p.space()
	if p.peek() == ']' {
		p.i++
		return nil
	}
	for i := 0; ; i++ {
		if err := each(i); err != nil {
			return err
		}
		p.space()
		switch p.peek() {
		case ',':
			p.i++
		case ']':
			p.i++
			return nil
		default:
			return fmt.Errorf("offset %d: want , or ]", p.i)
		}
	}
}
