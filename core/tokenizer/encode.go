package tokenizer

import (
	"container/heap"
	"context"
	"fmt"
	"strings"
)

// fragment is a piece of the input: raw text (tok == noToken) or one special token.
type fragment struct {
	text string
	tok  int32
}

// partition splits text at every occurrence of the special tokens that apply (all of
// them when parseSpecial, else only user-defined ones), longest token first, exactly as
// llama.cpp's tokenizer_st_partition, including its lstrip/rstrip attributes.
func (t *Tokenizer) partition(ctx context.Context, text string, parseSpecial bool) ([]fragment, error) {
	frags := []fragment{{text: text, tok: noToken}}
	var next []fragment
	for _, id := range t.special {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		tok := t.tokens[id]
		if !parseSpecial && tok.attr&(attrControl|attrUnknown) != 0 {
			continue
		}
		next = next[:0]
		for _, f := range frags {
			if f.tok != noToken || !strings.Contains(f.text, tok.text) {
				next = append(next, f)
				continue
			}
			rest := f.text
			for {
				i := strings.Index(rest, tok.text)
				if i < 0 {
					if rest != "" {
						next = append(next, fragment{text: rest, tok: noToken})
					}
					break
				}
				left := rest[:i]
				if tok.attr&attrLStrip != 0 {
					left = strings.TrimRight(left, " \t\n\v\f\r")
				}
				if left != "" {
					next = append(next, fragment{text: left, tok: noToken})
				}
				next = append(next, fragment{tok: id})
				rest = rest[i+len(tok.text):]
				if tok.attr&attrRStrip != 0 {
					rest = strings.TrimLeft(rest, " \t\n\v\f\r")
				}
			}
		}
		frags, next = next, frags
	}
	return frags, nil
}

// Encode tokenizes text as llama.cpp's llama_tokenize(text, addSpecial, parseSpecial):
// addSpecial adds BOS (and EOS) where the vocabulary asks for them; parseSpecial lets
// control-token text in the input (e.g. "<|im_start|>") become that token instead of
// being tokenized as plain text. User-defined tokens are always matched. Invalid UTF-8
// is handled as llama.cpp does: byte tokens for SPM, U+FFFD for byte-level BPE, dropped
// by WordPiece.
// The error is non-nil only when the vocabulary cannot represent the input (no BOS
// token although it asks for one, or an SPM vocabulary without byte tokens).
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return t.encode(context.Background(), text, addSpecial, parseSpecial, true)
}

// EncodeContext is Encode stopped when ctx ends (a server request that goes away);
// it then returns ctx's error. A prompt of megabytes takes seconds to tokenize.
func (t *Tokenizer) EncodeContext(ctx context.Context, text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return t.encode(ctx, text, addSpecial, parseSpecial, true)
}

// encodeCheckEvery is how many words (BPE) or merges (SPM) pass between looks at the
// context.
const encodeCheckEvery = 4096

// encode is Encode; wordCache=false turns off the per-call word cache (benchmarks).
func (t *Tokenizer) encode(ctx context.Context, text string, addSpecial, parseSpecial, wordCache bool) ([]int32, error) {
	var frags []fragment
	if text != "" {
		var err error
		if frags, err = t.partition(ctx, text, parseSpecial); err != nil {
			return nil, err
		}
	}
	return t.encodeFrags(ctx, frags, len(text), addSpecial, wordCache)
}

// encodeMarked encodes a chat prompt whose message contents carry mark inside their
// control-token texts (Prompt): the marks keep partition from matching those, and
// are removed from the text fragments before they are encoded as plain text.
func (t *Tokenizer) encodeMarked(ctx context.Context, marked string, mark rune, addSpecial bool) ([]int32, error) {
	frags, err := t.partition(ctx, marked, true)
	if err != nil {
		return nil, err
	}
	ms := string(mark)
	kept := frags[:0]
	for _, f := range frags {
		if f.tok == noToken {
			if f.text = strings.ReplaceAll(f.text, ms, ""); f.text == "" {
				continue
			}
		}
		kept = append(kept, f)
	}
	return t.encodeFrags(ctx, kept, len(marked), addSpecial, true)
}

// encodeFrags encodes partitioned text (n bytes in all).
func (t *Tokenizer) encodeFrags(ctx context.Context, frags []fragment, n int, addSpecial, wordCache bool) ([]int32, error) {
	out := make([]int32, 0, n/3+2)
	if addSpecial && (t.addBOS || t.kind == kindWPM) { // llama.cpp: WPM always adds [CLS]
		if t.bos == noToken {
			return nil, fmt.Errorf("tokenizer: vocabulary asks for BOS but has no BOS token")
		}
		out = append(out, t.bos)
	}
	var err error
	switch t.kind {
	case kindSPM:
		prevSpecial := true
		for _, f := range frags {
			if f.tok != noToken {
				out = append(out, f.tok)
				prevSpecial = true
				continue
			}
			s := f.text
			if t.addSpacePrefix && prevSpecial {
				s = " " + s
			}
			out, err = t.encodeSPM(ctx, strings.ReplaceAll(s, " ", "\u2581"), out)
			if err != nil {
				return nil, err
			}
			prevSpecial = false
		}
	case kindBPE:
		var st bpeState
		var ct cpText
		var bufs [2][]span
		words := 0
		for _, f := range frags {
			if f.tok != noToken {
				out = append(out, f.tok)
				continue
			}
			s := sanitizeUTF8(f.text)
			ct.reset(s)
			var cerr error
			err = t.pre.split(&ct, &bufs, func(lo, hi int) {
				if words++; words%encodeCheckEvery == 0 && cerr == nil {
					cerr = ctx.Err()
				}
				if cerr != nil {
					return
				}
				if wordCache {
					out = t.encodeWordCached(&st, s[lo:hi], out)
				} else {
					out = t.encodeWord(&st, s[lo:hi], out)
				}
			})
			if err != nil {
				return nil, fmt.Errorf("tokenizer: pre-tokenizer: %w", err)
			}
			if cerr != nil {
				return nil, cerr
			}
		}
	case kindWPM:
		for _, f := range frags {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if f.tok != noToken {
				out = append(out, f.tok)
			} else {
				out = t.encodeWPM(f.text, out)
			}
		}
	}
	if t.kind == kindWPM {
		if addSpecial { // llama.cpp: WPM always ends with [SEP]
			if t.sep == noToken {
				return nil, fmt.Errorf("tokenizer: WordPiece vocabulary has no SEP token")
			}
			out = append(out, t.sep)
		}
		return out, nil
	}
	if addSpecial && t.addEOS {
		if t.eos == noToken {
			return nil, fmt.Errorf("tokenizer: vocabulary asks for EOS but has no EOS token")
		}
		out = append(out, t.eos)
	}
	return out, nil
}

// SPM: llama.cpp's llm_tokenizer_spm_session — start from UTF-8 characters and merge
// the adjacent pair whose concatenation is the highest-scoring token (leftmost on ties)
// until none is left; characters that never formed a token become byte tokens.

type spmSym struct {
	lo, hi     int32 // byte range in the text
	prev, next int32
}

type spmBigram struct {
	left, right int32
	score       float32
	size        int32
}

type spmQueue []spmBigram

func (q spmQueue) Len() int { return len(q) }
func (q spmQueue) Less(a, b int) bool {
	return q[a].score > q[b].score || (q[a].score == q[b].score && q[a].left < q[b].left)
}
func (q spmQueue) Swap(a, b int) { q[a], q[b] = q[b], q[a] }
func (q *spmQueue) Push(x any)   { *q = append(*q, x.(spmBigram)) }
func (q *spmQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

func (t *Tokenizer) encodeSPM(ctx context.Context, text string, out []int32) ([]int32, error) {
	var syms []spmSym
	for off := 0; off < len(text); {
		n := min(utf8SeqLen(text[off]), len(text)-off)
		syms = append(syms, spmSym{lo: int32(off), hi: int32(off + n), prev: int32(len(syms)) - 1, next: int32(len(syms)) + 1})
		off += n
	}
	if len(syms) == 0 {
		return out, nil
	}
	syms[len(syms)-1].next = -1
	q := &spmQueue{}
	tryAdd := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		s := text[syms[l].lo:syms[r].hi]
		id, ok := t.toID[s]
		if !ok {
			return
		}
		heap.Push(q, spmBigram{left: l, right: r, score: t.tokens[id].score, size: int32(len(s))})
	}
	for i := 1; i < len(syms); i++ {
		tryAdd(int32(i-1), int32(i))
	}
	for n := 0; q.Len() > 0; n++ {
		if n%encodeCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		b := heap.Pop(q).(spmBigram)
		l, r := &syms[b.left], &syms[b.right]
		if l.hi == l.lo || r.hi == r.lo || (l.hi-l.lo)+(r.hi-r.lo) != b.size {
			continue
		}
		l.hi = r.hi
		r.hi = r.lo
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		tryAdd(l.prev, b.left)
		tryAdd(b.left, l.next)
	}
	for i := int32(0); i != -1; i = syms[i].next {
		s := text[syms[i].lo:syms[i].hi]
		if id, ok := t.toID[s]; ok {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(s); j++ {
			id := t.byteTok[s[j]]
			if id == noToken {
				return nil, fmt.Errorf("tokenizer: byte 0x%02X has no token (no <0x%02X> in the vocabulary)", s[j], s[j])
			}
			out = append(out, id)
		}
	}
	return out, nil
}
