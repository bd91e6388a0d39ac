package jinja

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits bound one render of a template. A chat template is code from a downloaded
// file: without bounds a recursive macro overflows the Go stack (fatal, not
// recoverable), range(1e9) or repeated string doubling exhausts memory, and nested
// loops run for as long as they like. A zero field takes its DefaultLimits value.
type Limits struct {
	// MaxSteps caps evaluation steps: every statement, expression, loop iteration,
	// and the size of every list or string handed to a filter, method or operator
	// (a string counts one step per 256 bytes).
	MaxSteps int64
	// MaxDepth caps how deeply evaluation nests (macro calls, nested expressions and
	// blocks); it keeps recursion far from the Go stack's limit.
	MaxDepth int
	// MaxOutput caps the bytes of the rendered text (and of each captured block).
	MaxOutput int
	// MaxAlloc caps the bytes of all the strings and lists the template creates over
	// the whole render (concatenations, filter results, slices, literals).
	MaxAlloc int64
	// Timeout caps the wall time of the render.
	Timeout time.Duration
}

// DefaultLimits are generous for real chat templates (the Qwen3 template with tools
// over 100 messages of 1 KB takes under 1% of each) and small enough that a hostile
// one ends within about a second of CPU and a few hundred MB.
var DefaultLimits = Limits{
	MaxSteps:  5_000_000,
	MaxDepth:  500,
	MaxOutput: 32 << 20,
	MaxAlloc:  256 << 20,
	Timeout:   10 * time.Second,
}

// Hard caps that hold whatever the Limits: builtins check them before they allocate,
// and the recursive value walks (printing, JSON, equality) check them as they go.
const (
	maxValueBytes = 32 << 20 // one string, or the printed form of one list or dict
	maxListItems  = 1 << 20  // one list made by range, repetition, split or batch
	maxValueNest  = 200      // nesting of lists and dicts inside one another
	maxValueVisit = 1 << 20  // values visited by one equality test
	maxParseDepth = 200      // nesting of expressions and of blocks in the source
)

// LimitError reports a render stopped by a limit (or by its context). Limit names
// the limit, in the words of the Limits field or the hard cap.
type LimitError struct {
	Limit string
	Max   int64
	Err   error // the context's error, for a cancelled render
}

func (e *LimitError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("render stopped: %v", e.Err)
	}
	return fmt.Sprintf("render stopped: %s exceeds %d", e.Limit, e.Max)
}

func (e *LimitError) Unwrap() error { return e.Err }

// budget is one render's account, shared by every evaluator of the render (macro
// bodies, blocks). A limit that is hit panics with a *LimitError, which render
// recovers: the check sits deep in builtins and value walks that have no error path.
type budget struct {
	ctx      context.Context
	deadline time.Time
	lim      Limits
	steps    int64
	alloc    int64
	depth    int
}

func newBudget(ctx context.Context, lim Limits) *budget {
	d := DefaultLimits
	if lim.MaxSteps > 0 {
		d.MaxSteps = lim.MaxSteps
	}
	if lim.MaxDepth > 0 {
		d.MaxDepth = lim.MaxDepth
	}
	if lim.MaxOutput > 0 {
		d.MaxOutput = lim.MaxOutput
	}
	if lim.MaxAlloc > 0 {
		d.MaxAlloc = lim.MaxAlloc
	}
	if lim.Timeout > 0 {
		d.Timeout = lim.Timeout
	}
	return &budget{ctx: ctx, lim: d, deadline: time.Now().Add(d.Timeout)}
}

// stepCheckEvery is how many steps pass between looks at the context and the clock.
const stepCheckEvery = 1024

// step charges n steps; every stepCheckEvery of them it looks at the context and the
// deadline.
func (b *budget) step(n int64) {
	before := b.steps
	b.steps += n
	if b.steps > b.lim.MaxSteps {
		panic(&LimitError{Limit: "steps", Max: b.lim.MaxSteps})
	}
	if before/stepCheckEvery != b.steps/stepCheckEvery {
		b.checkTime()
	}
}

func (b *budget) checkTime() {
	if err := b.ctx.Err(); err != nil {
		panic(&LimitError{Err: err})
	}
	if time.Now().After(b.deadline) {
		panic(&LimitError{Limit: "time (ms)", Max: b.lim.Timeout.Milliseconds()})
	}
}

func (b *budget) enter() {
	b.depth++
	if b.depth > b.lim.MaxDepth {
		panic(&LimitError{Limit: "nesting depth", Max: int64(b.lim.MaxDepth)})
	}
}

func (b *budget) leave() { b.depth-- }

// charge accounts for a value the template created.
func (b *budget) charge(v Value) {
	var n int64
	switch v.kind {
	case KindString:
		n = int64(len(v.AsString()))
	case KindList:
		n = 24 * int64(len(v.AsList().Items))
	case KindDict:
		n = 64 * int64(len(v.AsDict().Keys))
	default:
		return
	}
	b.alloc += n
	if b.alloc > b.lim.MaxAlloc {
		panic(&LimitError{Limit: "allocated bytes", Max: b.lim.MaxAlloc})
	}
}

// cost is the step charge for handing v to an operation that may walk it.
func cost(v Value) int64 {
	switch v.kind {
	case KindString:
		return int64(len(v.AsString())) >> 8
	case KindList:
		return int64(len(v.AsList().Items))
	case KindDict:
		return int64(len(v.AsDict().Keys))
	}
	return 0
}

func (b *budget) chargeArgs(args []Value, kwargs map[string]Value) {
	var n int64 = 1
	for _, a := range args {
		n += cost(a)
	}
	for _, a := range kwargs {
		n += cost(a)
	}
	b.step(n)
}

// checkOutput stops a render whose text would pass MaxOutput.
func (b *budget) checkOutput(n int) {
	if n > b.lim.MaxOutput {
		panic(&LimitError{Limit: "output bytes", Max: int64(b.lim.MaxOutput)})
	}
}

// capBytes stops a builtin before it makes a string of n bytes.
func capBytes(n int64) {
	if n > maxValueBytes || n < 0 {
		panic(&LimitError{Limit: "bytes in one value", Max: maxValueBytes})
	}
}

// capItems stops a builtin before it makes a list of n items.
func capItems(n int64) {
	if n > maxListItems || n < 0 {
		panic(&LimitError{Limit: "items in one list", Max: maxListItems})
	}
}

// capNest stops a walk of values nested deeper than maxValueNest (a list that holds
// itself is infinitely deep).
func capNest(depth int) {
	if depth > maxValueNest {
		panic(&LimitError{Limit: "nesting of lists and dicts", Max: maxValueNest})
	}
}

// capReplace stops strings.Replace(s, old, new, count) before it makes a string
// larger than maxValueBytes.
func capReplace(s, old, new string, count int) {
	if len(new) <= len(old) {
		return
	}
	n := int64(strings.Count(s, old))
	if old == "" {
		n = int64(utf8.RuneCountInString(s)) + 1
	}
	if count >= 0 && int64(count) < n {
		n = int64(count)
	}
	if n > 0 && int64(len(new)-len(old)) > (maxValueBytes-int64(len(s)))/n {
		capBytes(maxValueBytes + 1)
	}
}
