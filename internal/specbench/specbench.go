// Package specbench runs minfer specbench on an open stack: the table's rows (depths,
// depth policies, drafters), the prompts (built-in, corpus windows, one per line,
// copy-heavy), the interleaved measurement (core/engine/bench.Spec) with each row's
// request, the verify-cost curve, and the result as a table or JSON.
package specbench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/minfer/minfer/core/config"
	"github.com/minfer/minfer/core/engine"
	"github.com/minfer/minfer/core/engine/bench"
	"github.com/minfer/minfer/core/tokenizer"
	"github.com/minfer/minfer/internal/stack"
)

// PromptOptions say where the prompts come from (see specbench's usage).
type PromptOptions struct {
	Corpus []string // --prompts: corpus files (a .jsonl one is read as Lines)
	Lines  []string // --prompt-lines: one prompt per line
	Copies []string // --copy-prompts: corpus files of copy-heavy prompts
	// Count windows of Tokens tokens are drawn from each corpus file; a copy-heavy
	// prompt repeats its first CopyTokens tokens.
	Count, Tokens, CopyTokens int
}

// Prompts tokenizes the prompts o names: the built-in prompts when it names none.
func Prompts(tok *tokenizer.Tokenizer, o PromptOptions) ([][]int32, error) {
	var corpus []string
	lines := o.Lines
	for _, p := range o.Corpus { // a .jsonl file holds one prompt per line
		if strings.HasSuffix(p, ".jsonl") {
			lines = append(lines, p)
		} else {
			corpus = append(corpus, p)
		}
	}
	ids, err := corpusPrompts(tok, corpus, o.Count, o.Tokens, 0)
	if err != nil {
		return nil, err
	}
	if len(lines) > 0 {
		if len(corpus) == 0 {
			ids = nil // not the built-in prompts
		}
		for _, file := range lines {
			more, err := linePrompts(tok, file)
			if err != nil {
				return nil, err
			}
			ids = append(ids, more...)
		}
	}
	if len(o.Copies) > 0 {
		copied, err := corpusPrompts(tok, o.Copies, o.Count, o.Tokens, o.CopyTokens)
		if err != nil {
			return nil, err
		}
		if len(o.Corpus) == 0 && len(lines) == 0 {
			ids = nil // not the built-in prompts: only the copy-heavy ones
		}
		ids = append(ids, copied...)
	}
	return ids, nil
}

// Options describe one specbench run.
type Options struct {
	Rows      []bench.Row
	Prompts   [][]int32
	N, Reps   int // tokens per prompt, repetitions
	Warmup    time.Duration
	CurveRows int // largest nt of the verify-cost curve (0: no curve)
	// Progress, when set, gets a redrawn progress line (a terminal).
	Progress io.Writer
}

// Run measures every row on st under cfg (greedy; each row's request takes cfg with the
// row's depth, policy and drafters) and fills r's rows and curve.
func Run(ctx context.Context, st *stack.Stack, cfg *config.Config, o Options, r *Result) error {
	var progress func(rep int, row bench.Row)
	if o.Progress != nil {
		progress = func(rep int, row bench.Row) {
			fmt.Fprintf(o.Progress, "\rrepetition %d/%d, depth %s   ", rep+1, o.Reps, row.Label)
		}
	}
	request := func(ctx context.Context, row bench.Row, prompt []int32) (engine.Request, func(), error) {
		c := *cfg
		c.Spec.Depth = row.Depth
		if row.Policy != "" {
			c.Spec.Policy = row.Policy
		}
		switch row.Drafter {
		case "":
		case "-":
			c.Spec.Drafter = ""
		default:
			c.Spec.Drafter = row.Drafter
		}
		req, err := st.Request(ctx, &c, prompt)
		req.NPredict, req.NoDraftModel = o.N, row.NoDraftModel
		return req, st.CloseRequest, err
	}
	var err error
	r.Depths, err = bench.Spec(ctx, bench.SpecOptions{Session: st.Sess, Rows: o.Rows, Prompts: o.Prompts, Reps: o.Reps,
		Warmup: o.Warmup, Request: request, Progress: progress})
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "\r%s\r", strings.Repeat(" ", 40))
	}
	if err != nil {
		return err
	}
	if o.CurveRows > 0 {
		if r.VerifyMs, r.DraftStepMs, err = bench.VerifyCurve(st.Target, st.Draft, o.CurveRows); err != nil {
			return err
		}
		if r.DraftChainStepMs, err = bench.DraftChainStep(st.Draft); err != nil {
			return err
		}
	}
	return nil
}
