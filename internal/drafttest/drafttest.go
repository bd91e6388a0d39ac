// Package drafttest is the drafter benchmarks' workload, one for the built-in drafters
// run natively (plugins/builtin) and through WebAssembly (plugins/wasm), so that the two
// measure the same calls on the same tokens.
package drafttest

import (
	"context"
	"math/rand/v2"

	"github.com/minfer/minfer/sdk"
)

// Prompt is the tokens a drafter is told first; each round after tells it Step more
// and asks for MaxDepth.
const (
	Prompt   = 512
	Step     = 3
	MaxDepth = 8
	Vocab    = 4096
)

// CopyHeavy is Prompt + 512 rounds' tokens, three in four of them after the first 300
// a copy of the one 300 back.
func CopyHeavy() []int32 { return CopyHeavyN(Prompt + Step*512) }

// CopyHeavyN is CopyHeavy's sequence at length n (a prefix of it, or longer).
func CopyHeavyN(n int) []int32 {
	g := rand.New(rand.NewPCG(1, 2))
	seq := make([]int32, n)
	for i := range seq {
		if i > 300 && g.IntN(4) > 0 {
			seq[i] = seq[i-300]
		} else {
			seq[i] = int32(g.IntN(4000))
		}
	}
	return seq
}

// Copied is as long as CopyHeavy, every token after the first 300 a copy of the one
// 300 back (the text of the copy-heavy prompts).
func Copied() []int32 {
	g := rand.New(rand.NewPCG(3, 4))
	seq := make([]int32, Prompt+Step*512)
	for i := range seq {
		seq[i] = int32(g.IntN(4000))
		if i >= 300 {
			seq[i] = seq[i-300]
		}
	}
	return seq
}

// Rounds tells d seq's first Prompt tokens, then Step at a time, asking for MaxDepth
// each call, and returns the calls made (the prompt's included).
func Rounds(ctx context.Context, d sdk.Drafter, seq []int32) (int, error) {
	q := sdk.DraftRequest{Appended: seq[:Prompt], MaxDepth: MaxDepth, Vocab: Vocab}
	rounds := 0
	for pos := Prompt; ; pos += Step {
		if _, err := d.Draft(ctx, &q); err != nil {
			return rounds, err
		}
		rounds++
		if pos+Step > len(seq) {
			return rounds, nil
		}
		q.Appended = seq[pos : pos+Step]
	}
}
