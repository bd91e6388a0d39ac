package check

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/plugins/wasm"
	"github.com/minfer/minfer/sdk"
)

// copySequence is a sequence of n tokens over vocab whose second half mostly repeats
// its first (windows copied with a few edits): the shape of code editing and quoting,
// where a drafter has something to find.
func copySequence(g *rand.Rand, n, vocab int) []int32 {
	seq := make([]int32, 0, n)
	for len(seq) < n/2 {
		seq = append(seq, int32(g.IntN(vocab)))
	}
	for len(seq) < n {
		start := g.IntN(len(seq) - 16)
		for _, t := range seq[start : start+16+g.IntN(32)] {
			if g.IntN(20) == 0 {
				t = int32(g.IntN(vocab))
			}
			seq = append(seq, t)
		}
	}
	return seq[:n]
}

// drafterRun plays greedy rounds against script as the engine does: the drafter is told
// the prompt (script[:prompt]) and then, each round, what the round emitted (the
// accepted prefix of its proposal and the target's next token, here the script's).
// It returns every answer, the tokens drafted and accepted, and the mean call time.
func drafterRun(c *checker, d sdk.Drafter, script []int32, prompt, vocab int, depth func(round int) int) (answers [][]int32, drafted, accepted int, per time.Duration, err error) {
	pos, told := prompt, 0
	var took time.Duration
	for round := 0; pos < len(script); round++ {
		q := &sdk.DraftRequest{Appended: script[told:pos], MaxDepth: depth(round), Vocab: vocab}
		t0 := time.Now()
		res, err := d.Draft(c.ctx, q)
		took += time.Since(t0)
		if err != nil {
			return nil, 0, 0, 0, fmt.Errorf("round %d: %w", round, err)
		}
		answers = append(answers, slices.Clone(res.Tokens))
		told = pos
		n := 0
		for n < len(res.Tokens) && pos+n < len(script) && res.Tokens[n] == script[pos+n] {
			n++
		}
		drafted += len(res.Tokens)
		accepted += n
		pos += n + 1
	}
	return answers, drafted, accepted, took / time.Duration(max(len(answers), 1)), nil
}

func (c *checker) drafter() {
	open := func() (*wasm.Drafter, error) { return c.m.Drafter(c.ctx, c.name, c.params, wasm.CallOptions{}) }
	d, err := open()
	c.add("init", err, "")
	if err != nil {
		return
	}
	defer d.Close()
	const vocab, n, prompt = 512, 1024, 256
	g := rand.New(rand.NewPCG(5, 6))
	script := copySequence(g, n, vocab)
	depth := func(round int) int { return 1 + (round*7)%8 }
	first, drafted, accepted, per, err := drafterRun(c, d, script, prompt, vocab, depth)
	note := ""
	if err == nil {
		rounds := len(first)
		note = fmt.Sprintf("%d rounds, %d drafted, %d accepted (%.2f), %.2f tokens/round, %v per call",
			rounds, drafted, accepted, float64(accepted)/float64(max(drafted, 1)), float64(n-prompt)/float64(rounds), per.Round(time.Microsecond))
		if drafted == 0 {
			note += "; warning: it proposed nothing on a sequence that repeats itself"
		}
	}
	c.add("greedy rounds over a copy-heavy sequence", err, note)
	if err != nil {
		return
	}

	// A fresh instance told the same tokens answers the same: traces replay, and a
	// request's drafts do not depend on an earlier one on the same instance.
	d2, err := open()
	if err == nil {
		var again [][]int32
		if again, _, _, _, err = drafterRun(c, d2, script, prompt, vocab, depth); err == nil {
			note = ""
			for i := range first {
				if !slices.Equal(first[i], again[i]) {
					note = fmt.Sprintf("warning: round %d proposed %v, then %v in a fresh instance (not deterministic)", i, first[i], again[i])
					break
				}
			}
		}
		d2.Close()
	}
	c.add("determinism", err, note)

	// A long prompt arrives in one call, under at least the deadline minfer.toml gives
	// a plugin call by default (a shorter --timeout is the round's).
	d3, err := c.m.Drafter(c.ctx, c.name, c.params, wasm.CallOptions{Timeout: max(c.m.Timeout(), drafterPromptDeadline)})
	if err == nil {
		err = drafterEdges(c, d3)
		d3.Close()
	}
	c.add("edge-case requests", err, "")
}

// drafterPromptDeadline is the per-call deadline of a declared plugin unless its
// table sets one (the first call tells the whole prompt).
const drafterPromptDeadline = config.DefaultWasmTimeout

// drafterEdges sends valid but unusual requests: a one-token vocabulary, nothing
// appended, depth 1 and the deepest depth, ids at the top of a large vocabulary, and a
// prompt of 16384 tokens at once.
func drafterEdges(c *checker, d sdk.Drafter) error {
	long := make([]int32, 16384)
	for i := range long {
		long[i] = int32(i % 1000)
	}
	for i, q := range []sdk.DraftRequest{
		{Appended: []int32{0}, MaxDepth: 1, Vocab: 1},
		{Appended: []int32{0, 0, 0, 0}, MaxDepth: sdk.MaxDepthLimit, Vocab: 1},
		{Appended: nil, MaxDepth: 3, Vocab: 1},
		{Appended: []int32{151935, 7, 151935, 7, 151935}, MaxDepth: 16, Vocab: 151936},
		{Appended: long, MaxDepth: 8, Vocab: 151936},
		{Appended: nil, MaxDepth: sdk.MaxDepthLimit, Vocab: 151936},
	} {
		if _, err := d.Draft(c.ctx, &q); err != nil {
			return fmt.Errorf("edge request %d: %w", i, err)
		}
	}
	return nil
}
