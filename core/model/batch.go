package model

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/kv"
)

// Out says which of a sequence's rows in a batched forward get logits.
type Out uint8

const (
	// OutLast: only the last row (a decode step, or the prompt chunk that ends a prompt).
	OutLast Out = iota
	// OutAll: every row (the verify rows of a speculative round).
	OutAll
	// OutNone: no row (a prompt chunk in the middle of its prompt): its rows only fill
	// the cache.
	OutNone
)

// RowsOut is how many logits rows a sequence of n rows gets.
func (o Out) RowsOut(n int) int {
	switch o {
	case OutAll:
		return n
	case OutNone:
		return 0
	}
	return 1
}

// Seq is one sequence's part of a batched forward: its new tokens, its cache, and which
// of its rows get logits.
type Seq struct {
	IDs   []int32
	Cache *kv.Cache
	Out   Out
}

// seqRows is where a sequence's rows sit in a batched pass.
type seqRows struct {
	off, n int
	out    int // rows of it that go on past the last layer's attention (Out.RowsOut)
	outOff int // where they sit among those rows
	kv     backend.KV
}

// ForwardBatch runs several sequences' tokens as one forward: the rows of seqs[0],
// then seqs[1]'s, … share every matmul (the weights are read once for all of them),
// and each sequence's rows are rotated, stored in and attend over its own cache at its
// own positions. Each sequence's tokens are appended to its cache.
//
// The logits hold, in sequence order, the rows each sequence's Out asks for: all of
// its rows (OutAll), its last (OutLast) or none (OutNone). Only those rows go on past
// the last layer's attention — its output projection, feed-forward, the output norm
// and the classifier (llama.cpp's inp_out_ids) — so a prompt chunk in a batch costs
// no classifier rows. Rows is 0 when no sequence asks for any. Row identity makes each
// sequence's rows the same bits as its own Forward (batch invariance) wherever the
// backend keeps identity for the batch's row count (Caps.IdentityRows). On an error
// found before anything runs (an id outside the vocabulary, a full or repeated cache)
// no cache changes.
func (m *Model) ForwardBatch(seqs []Seq) (Logits, error) {
	if len(seqs) == 0 {
		return Logits{}, errors.New("model: batched forward of no sequences")
	}
	nt, nOut := 0, 0
	seen := map[*kv.Cache]bool{}
	for j, q := range seqs {
		if seen[q.Cache] {
			return Logits{}, fmt.Errorf("model: batched forward: sequence %d repeats a cache", j)
		}
		seen[q.Cache] = true
		if err := m.Check(q.IDs, q.Cache); err != nil {
			return Logits{}, fmt.Errorf("batched forward: sequence %d: %w", j, err)
		}
		if q.Out > OutNone {
			return Logits{}, fmt.Errorf("BUG: model: batched forward: sequence %d: output kind %d", j, q.Out)
		}
		nt += len(q.IDs)
		nOut += q.Out.RowsOut(len(q.IDs))
	}
	ma, multi := m.b.(backend.MultiAttention)
	if len(seqs) > 1 && !multi {
		return Logits{}, fmt.Errorf("model %s: the %s backend cannot run several sequences in one forward (no backend.MultiAttention)", m.Name, m.b.Name())
	}
	if len(seqs) > 1 {
		for j, q := range seqs {
			if err := q.Cache.Prepare(len(q.IDs)); err != nil {
				return Logits{}, fmt.Errorf("batched forward: sequence %d: %w", j, err)
			}
		}
	}
	if len(seqs) == 1 {
		q := seqs[0]
		l, err := m.Forward(q.IDs, q.Cache, q.Out == OutAll)
		if q.Out == OutNone {
			l.Rows = 0
		}
		return l, err
	}
	s, err := m.pass(nt, false)
	if err != nil {
		return Logits{}, err
	}
	out, err := m.batchLogits(max(nOut, 1))
	if err != nil {
		return Logits{}, err
	}
	// With no row asked for, the last sequence's last row still runs to the end (the
	// layer's ops take at least one row); its logits are not reported.
	reported := nOut
	rows := m.seqs[:0]
	ids := make([]int32, 0, nt)
	off, outOff := 0, 0
	for j, q := range seqs {
		r := seqRows{off: off, n: len(q.IDs), kv: q.Cache.Device()}
		r.out, r.outOff = q.Out.RowsOut(r.n), outOff
		if nOut == 0 && j == len(seqs)-1 {
			r.out, nOut = 1, 1
		}
		pos0 := q.Cache.Len()
		for i := range r.n {
			s.hostPos[off+i] = int32(pos0 + i)
		}
		rows = append(rows, r)
		ids = append(ids, q.IDs...)
		off += r.n
		outOff += r.out
	}
	m.seqs = rows
	m.b.WriteI32(s.pos, 0, s.hostPos[:nt])
	if nOut < nt {
		if err := m.outRows(s); err != nil {
			return Logits{}, err
		}
	}
	m.b.WriteI32(s.ids, 0, ids)
	s.nt, s.all, s.kv, s.seqs, s.nOut, s.last, s.ma = nt, false, nil, rows, nOut, out, ma
	defer func() { s.seqs, s.last, s.ma = nil, nil, nil }()
	run := func() { m.arch.forward(m.b, &m.Params, &m.W, s) }
	if sg, ok := m.b.(backend.SeqGraphs); ok && m.graphs != nil {
		// A decoding batch keeps its shape from step to step while its sequences
		// change: one graph per shape, replayed on the step's caches.
		key, kvs := "", make([]backend.KV, len(rows))
		if nt <= graphRows {
			key = m.batchKey(seqs, s.cap, out.cap)
		}
		for j, r := range rows {
			kvs[j] = r.kv
		}
		err = sg.RunSeqs(key, kvs, run)
	} else if m.graphs != nil {
		err = m.graphs.Run("", run) // no graph replays on other caches: no capture
	} else {
		run()
	}
	if err == nil {
		err = m.b.Sync()
	}
	if err != nil {
		return Logits{}, fmt.Errorf("model %s: batched forward of %d sequences, %d tokens: %w", m.Name, len(seqs), nt, err)
	}
	for _, q := range seqs {
		if err := q.Cache.Append(len(q.IDs)); err != nil {
			return Logits{}, err
		}
	}
	return Logits{Buf: out.logits, Rows: reported, Cols: m.Params.Vocab}, nil
}

// batchKey names a batched forward's shape for backend.SeqGraphs: the model, its
// scratch and logits capacities, and each sequence's rows, output kind and cache shape.
func (m *Model) batchKey(seqs []Seq, scratch, logits int) string {
	k := make([]byte, 0, 32+12*len(seqs))
	k = fmt.Appendf(k, "%s#%d/seqs/c%d/l%d", m.Name, m.serial, scratch, logits)
	for _, q := range seqs {
		sp := q.Cache.Spec()
		k = fmt.Appendf(k, "/%d.%d.%d.%d", len(q.IDs), q.Out, sp.Ctx, sp.Type)
	}
	return string(k)
}

// batchOut holds a batched forward's logits rows.
type batchOut struct {
	cap    int
	logits backend.Buffer // (cap, vocab)
}

// batchLogits returns a buffer for n rows of logits, grown to a power of two.
func (m *Model) batchLogits(n int) (*batchOut, error) {
	if m.last != nil && m.last.cap >= n {
		return m.last, nil
	}
	if m.last != nil {
		m.b.Free(m.last.logits)
		m.last = nil
	}
	c := max(1<<bits.Len(uint(n-1)), 8)
	l, err := m.b.NewF32(c * m.Params.Vocab)
	if err != nil {
		return nil, fmt.Errorf("model %s: logits of %d rows: %w", m.Name, c, err)
	}
	m.last = &batchOut{cap: c, logits: l}
	return m.last, nil
}

// outRows makes s's buffer for the rows that go on past the last layer's attention.
func (m *Model) outRows(s *pass) error {
	if s.xo != nil {
		return nil
	}
	buf, err := m.b.NewF32(s.cap * m.Params.Embd)
	if err != nil {
		return fmt.Errorf("model %s: output rows for %d rows: %w", m.Name, s.cap, err)
	}
	s.xo = buf
	s.bufs = append(s.bufs, buf)
	return nil
}

// attend rotates the rows' queries and keys, stores keys and values in the cache and
// computes attention into s.att: for one sequence with the ops over all rows at once
// (narrowing to the last row where only its logits are wanted); for a batch of
// sequences with one MultiAttention op each over all of them, every sequence's rows in
// place in the batch's buffers — in the last layer only the rows that get logits (see
// outputs).
func (s *pass) attend(b backend.Backend, p *Params, l int, r rows) rows {
	if s.seqs == nil {
		b.RoPEStoreKV(s.q, s.k, s.v, s.kv, l, s.pos, s.nt, p.Rope, p.Attn) // cache (layer, pos, kv_dim) ← k, v
		r = s.narrow(b, p, l, r)                                           // n = nt, or 1 in the last layer of a last-row forward
		b.Attention(s.att, r.q, s.kv, l, r.pos, r.n, p.Attn)               // att (n, heads*head_dim)
		return r
	}
	s.multi = s.multi[:0]
	for _, q := range s.seqs {
		s.multi = append(s.multi, backend.SeqAttention{Dst: s.att, Q: s.q, K: s.k, V: s.v, KV: q.kv, Pos: s.pos, NT: q.n, Row: q.off, DstRow: q.off})
	}
	s.ma.RoPEStoreKVSeqs(s.multi, l, p.Rope, p.Attn) // each cache (layer, pos, kv_dim) ← its rows' k, v
	if l < p.Layers-1 || s.nOut == s.nt {
		s.ma.AttentionSeqs(s.multi, l, p.Attn) // att (nt, heads*head_dim)
		return r
	}
	s.ma.AttentionSeqs(s.outputs(), l, p.Attn) // att (nOut, heads*head_dim)
	// The residual rows of the rows that go on (nOut, embd), runs of consecutive rows
	// (a batch of decoding sequences) in one copy.
	run, src, dst := 0, 0, 0
	for _, q := range s.seqs {
		if q.out == 0 {
			continue
		}
		from := q.off + q.n - q.out
		if run > 0 && from == src+run && q.outOff == dst+run {
			run += q.out
			continue
		}
		if run > 0 {
			b.CopyRows(s.xo, dst, s.x, src, run, p.Embd)
		}
		run, src, dst = q.out, from, q.outOff
	}
	if run > 0 {
		b.CopyRows(s.xo, dst, s.x, src, run, p.Embd)
	}
	return rows{n: s.nOut, x: s.xo, narrow: true}
}

// outputs narrows the last layer's attention to the rows that get logits, after every
// row's keys and values are stored: a sequence's every row, its last or none, each
// written to its place among the nOut output rows.
func (s *pass) outputs() []backend.SeqAttention {
	out := s.multi[:0]
	for j, q := range s.seqs {
		a := s.multi[j]
		if q.out == 0 {
			continue
		}
		a.Row, a.NT, a.DstRow = q.off+q.n-q.out, q.out, q.outOff
		out = append(out, a)
	}
	return out
}
