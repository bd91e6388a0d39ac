package server

import (
	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/core/tokenizer"
)

// TokenizerVocab is the engine.Vocab of a core/tokenizer Tokenizer: its
// end-of-generation set and its streaming decoder. It lives here, where the engine and
// the tokenizer meet (the engine does not import the tokenizer), for the server and
// the CLI alike.
func TokenizerVocab(t *tokenizer.Tokenizer) engine.Vocab { return tokVocab{t} }

type tokVocab struct{ *tokenizer.Tokenizer }

func (v tokVocab) NewStream() engine.TextStream { return tokStream{v.NewDecoder()} }

type tokStream struct{ *tokenizer.StreamDecoder }

// Next ignores the decoder's error: the engine only passes ids inside the vocabulary.
func (s tokStream) Next(id int32) string { t, _ := s.Add(id); return t }
