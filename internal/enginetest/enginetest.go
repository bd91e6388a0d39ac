// Package enginetest holds the fakes the tests of core/engine, core/engine/bench and
// core/server share: native greedy samplers (core may not use plugins) and a
// vocabulary whose text stream names ids. It imports only sdk, so that core/engine's
// own tests (package engine) can use it; the vocabulary therefore takes engine's
// TextStream as a type parameter: enginetest.Vocab[engine.TextStream]{…}.
package enginetest

import (
	"context"
	"fmt"

	"github.com/minfer/minfer/sdk"
)

var (
	_ sdk.Sampler = Greedy{}
	_ sdk.Sampler = FullGreedy{}
)

// Greedy is a native greedy sampler: it asks for each row's argmax (TopK 1), accepts
// the longest draft prefix that matches and emits the next argmax.
type Greedy struct{}

func (Greedy) Needs() sdk.Needs { return sdk.Needs{TopK: 1} }
func (Greedy) Sample(_ context.Context, r *sdk.SampleRound) (sdk.SampleResult, error) {
	for i, d := range r.Draft {
		if r.Rows[i].IDs[0] != d {
			return sdk.SampleResult{Accepted: i, Next: r.Rows[i].IDs[0]}, nil
		}
	}
	return sdk.SampleResult{Accepted: len(r.Draft), Next: r.Rows[len(r.Draft)].IDs[0]}, nil
}

// FullGreedy is Greedy over full rows (TopK 0): it takes each row's argmax itself.
type FullGreedy struct{}

func (FullGreedy) Needs() sdk.Needs { return sdk.Needs{TopK: 0} }
func (FullGreedy) Sample(_ context.Context, r *sdk.SampleRound) (sdk.SampleResult, error) {
	for i, d := range r.Draft {
		if a := argmax(r.Rows[i]); a != d {
			return sdk.SampleResult{Accepted: i, Next: a}, nil
		}
	}
	return sdk.SampleResult{Accepted: len(r.Draft), Next: argmax(r.Rows[len(r.Draft)])}, nil
}

// argmax is the id of row's largest logit, the first of equals.
func argmax(row sdk.SampleRow) int32 {
	b := 0
	for i, x := range row.Logits {
		if x > row.Logits[b] {
			b = i
		}
	}
	return row.IDs[b]
}

// Stream is a text stream where token id reads as Tok[id], else "<id>"; it holds
// nothing back, so Flush is empty.
type Stream struct{ Tok map[int32]string }

func (s *Stream) Next(id int32) string {
	if t, ok := s.Tok[id]; ok {
		return t
	}
	return fmt.Sprintf("<%d>", id)
}
func (s *Stream) Flush() string { return "" }

// Vocab is a vocabulary of fakes: token id reads as Tok[id] (else "<id>", Stream) and
// the ids in EOG end a generation. S is engine.TextStream (which *Stream implements):
// Vocab[engine.TextStream] is an engine.Vocab.
type Vocab[S any] struct {
	Tok map[int32]string
	EOG map[int32]bool
}

func (v Vocab[S]) IsEOG(id int32) bool { return v.EOG[id] }

func (v Vocab[S]) NewStream() S {
	s, ok := any(&Stream{Tok: v.Tok}).(S)
	if !ok {
		panic(fmt.Sprintf("BUG: enginetest: Vocab's stream type %T is not what *Stream implements", s))
	}
	return s
}
