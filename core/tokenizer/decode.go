package tokenizer

import "fmt"

// Decode turns ids into text as llama.cpp's llama_detokenize(remove_special=false,
// unparse_special=true): the pieces of every token (control tokens as their text), with
// the leading space an SPM vocabulary adds removed from the first piece, and, for the
// BPE vocabularies whose pre-tokenizer asks for it (gpt-2, llama3, falcon, …),
// llama.cpp's clean-up of " ?", " !", " .", " ,", " ' ", " 's", " 'm", " 're", " 've".
// The result may hold invalid UTF-8 when the ids split a character. For generated text
// streamed piece by piece use NewDecoder instead (llama-server concatenates pieces
// without this clean-up). An id out of range is an error.
func (t *Tokenizer) Decode(ids []int32) (string, error) {
	var buf []byte
	removeSpace := t.addSpacePrefix
	for i, id := range ids {
		if id < 0 || int(id) >= len(t.pieces) {
			return "", fmt.Errorf("tokenizer: token id %d at position %d out of range [0, %d)", id, i, len(t.pieces))
		}
		p := t.pieces[id]
		if removeSpace && len(p) > 0 && p[0] == ' ' {
			p = p[1:]
		}
		removeSpace = false
		buf = append(buf, p...)
	}
	if t.cleanSpaces {
		buf = cleanSpaces(buf)
	}
	return string(buf), nil
}

// cleanSpaces is the three passes of llama.cpp's detokenize clean_spaces.
func cleanSpaces(text []byte) []byte {
	// " ?", " !", " .", " ,": drop the space.
	n := len(text)
	if n == 0 {
		return text
	}
	total := 1
	for i := 1; i < n; i++ {
		x := text[i]
		if text[i-1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') {
			total--
		}
		text[total] = x
		total++
	}
	// " ' " → "'".
	n, total = total, 1
	for i := 1; i < n; i++ {
		x := text[i]
		if x == '\'' && i+1 < n && text[i-1] == ' ' && text[i+1] == ' ' {
			total-- // drop the space before and skip the one after
			text[total] = x
			total++
			i++
			continue
		}
		text[total] = x
		total++
	}
	// " 's", " 'm", " 're", " 've": drop the space.
	n, total = total, 1
	for i := 1; i < n; i++ {
		x := text[i]
		if text[i-1] == ' ' && x == '\'' && i+1 < n {
			x1 := text[i+1]
			if x1 == 's' || x1 == 'm' {
				total--
			} else if i+2 < n {
				x2 := text[i+2]
				if (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e') {
					total--
				}
			}
		}
		text[total] = x
		total++
	}
	return text[:total]
}

// StreamDecoder turns generated ids into text incrementally: it emits text as soon as it
// forms complete UTF-8 and holds back the bytes of a character split across tokens. It
// concatenates pieces as llama-server does (no SPM leading-space removal, no clean-up).
// A StreamDecoder is not safe for concurrent use.
type StreamDecoder struct {
	t       *Tokenizer
	pending []byte
}

// NewDecoder returns a StreamDecoder for t.
func (t *Tokenizer) NewDecoder() *StreamDecoder { return &StreamDecoder{t: t} }

// Add appends the piece of id and returns the text that became complete (possibly "").
// Bytes that can never become valid UTF-8 are passed through unchanged as soon as that
// is certain. An id out of range is an error and changes nothing.
func (d *StreamDecoder) Add(id int32) (string, error) {
	if id < 0 || int(id) >= len(d.t.pieces) {
		return "", fmt.Errorf("tokenizer: token id %d out of range [0, %d)", id, len(d.t.pieces))
	}
	d.pending = append(d.pending, d.t.pieces[id]...)
	n := completePrefix(d.pending)
	if n == 0 {
		return "", nil
	}
	s := string(d.pending[:n])
	d.pending = append(d.pending[:0], d.pending[n:]...)
	return s, nil
}

// Flush returns whatever is held back (an incomplete character's bytes) and resets.
func (d *StreamDecoder) Flush() string {
	s := string(d.pending)
	d.pending = d.pending[:0]
	return s
}

// completePrefix is the length of the longest prefix of b that does not end inside a
// UTF-8 sequence that later bytes could still complete.
func completePrefix(b []byte) int {
	// Only the last 3 bytes can belong to an unfinished sequence.
	for k := 1; k <= 3 && k <= len(b); k++ {
		i := len(b) - k
		c := b[i]
		if c&0xC0 == 0x80 {
			continue // continuation byte: look further back for its lead byte
		}
		if c >= 0xC0 && c < 0xF8 && k < utf8SeqLen(c) {
			return i // a lead byte still waiting for continuation bytes
		}
		return len(b)
	}
	return len(b)
}
