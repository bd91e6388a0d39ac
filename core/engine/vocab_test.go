package engine

import "github.com/minfer/minfer/core/tokenizer"

// testVocab is the Vocab of a real tokenizer for the tests that decode real models
// (server.TokenizerVocab, the adapter the CLI and server use, imports this package).
func testVocab(t *tokenizer.Tokenizer) Vocab { return tvocab{t} }

type tvocab struct{ *tokenizer.Tokenizer }

func (v tvocab) NewStream() TextStream { return tstream{v.NewDecoder()} }

type tstream struct{ *tokenizer.StreamDecoder }

func (s tstream) Next(id int32) string { t, _ := s.Add(id); return t }
