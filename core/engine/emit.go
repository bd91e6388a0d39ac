package engine

import "strings"

// Vocab is what the engine needs of a tokenizer: end-of-generation ids and a streaming
// detokenizer. server.TokenizerVocab adapts core/tokenizer to it (the engine stands left
// of the tokenizer in DESIGN.md's data flow and does not import it).
type Vocab interface {
	IsEOG(id int32) bool
	// NewStream returns a fresh streaming decoder for one reply.
	NewStream() TextStream
}

// TextStream turns generated ids into text incrementally: Next returns the text that
// became complete with id (possibly "", when id ends inside a UTF-8 sequence); Flush
// returns what is left at the end.
type TextStream interface {
	Next(id int32) string
	Flush() string
}

// emitter applies the stop rules to the generated tokens one at a time, exactly as
// plain decoding would, and streams the text that can no longer be part of a stop
// string.
type emitter struct {
	vocab   Vocab
	stream  TextStream
	stops   []string
	onText  func(string) error
	text    strings.Builder // everything emitted
	pending string          // held back: a suffix that may start a stop string
	tokens  []int32
	reason  StopReason
	// ignoreEOG treats end-of-generation tokens as ordinary ones (Request.IgnoreEOG).
	ignoreEOG bool
}

// StopReason says why a generation ended.
type StopReason string

const (
	StopEOG    StopReason = "eog"    // an end-of-generation token
	StopString StopReason = "stop"   // a stop string appeared (it is not part of the text)
	StopLength StopReason = "length" // the token budget (-n) ran out
	StopCtx    StopReason = "ctx"    // the context is full
)

// push handles one generated token. It returns true when the generation ends with it
// (the token is then not emitted if it is an EOG; a stop string cuts the text before
// the string).
func (e *emitter) push(id int32) (bool, error) {
	if !e.ignoreEOG && e.vocab.IsEOG(id) {
		e.reason = StopEOG
		return true, nil
	}
	e.tokens = append(e.tokens, id)
	text := e.pending + e.stream.Next(id)
	e.pending = ""
	if cut := firstStop(text, e.stops); cut >= 0 {
		e.reason = StopString
		return true, e.out(text[:cut])
	}
	hold := heldSuffix(text, e.stops)
	e.pending = text[len(text)-hold:]
	return false, e.out(text[:len(text)-hold])
}

// finish flushes the held text when the generation ended for another reason than a
// stop string.
func (e *emitter) finish() error {
	if e.reason == StopString {
		return nil
	}
	text := e.pending + e.stream.Flush()
	e.pending = ""
	if cut := firstStop(text, e.stops); cut >= 0 {
		e.reason = StopString
		text = text[:cut]
	}
	return e.out(text)
}

func (e *emitter) out(s string) error {
	if s == "" {
		return nil
	}
	e.text.WriteString(s)
	if e.onText != nil {
		return e.onText(s)
	}
	return nil
}

// firstStop returns the index of the earliest occurrence of any stop string in text,
// or -1.
func firstStop(text string, stops []string) int {
	best := -1
	for _, s := range stops {
		if i := strings.Index(text, s); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best
}

// heldSuffix is the length of the longest suffix of text that is a proper prefix of a
// stop string (text that must wait for the next token before it can be shown).
func heldSuffix(text string, stops []string) int {
	hold := 0
	for _, s := range stops {
		for n := min(len(s)-1, len(text)); n > hold; n-- {
			if strings.HasSuffix(text, s[:n]) {
				hold = n
				break
			}
		}
	}
	return hold
}
