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

// seqRows is where a sequence's rows sit in a batched pass and the scratch its
// attention runs in: its rows gathered from the batch, its positions.
type seqRows struct {
	off, n  int
	out     int // rows of it that go on past the last layer's attention (Out.RowsOut)
	outOff  int // where they sit among those rows
	kv      backend.KV
	pos     backend.Buffer // I32 (cap)
	posl    backend.Buffer // I32 (1) its last row's position
	q, att  backend.Buffer // (cap, qdim)
	ql      backend.Buffer // (1, qdim) its last row's query
	k, v    backend.Buffer // (cap, kvdim)
	cap     int
	hostPos []int32
	bufs    []backend.Buffer
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
	rows, err := m.seqScratch(seqs)
	if err != nil {
		return Logits{}, err
	}
	// With no row asked for, the last sequence's last row still runs to the end (the
	// layer's ops take at least one row); its logits are not reported.
	reported := nOut
	ids := make([]int32, 0, nt)
	off, outOff := 0, 0
	for j, q := range seqs {
		r := rows[j]
		r.off, r.n, r.kv = off, len(q.IDs), q.Cache.Device()
		r.out, r.outOff = q.Out.RowsOut(r.n), outOff
		if nOut == 0 && j == len(seqs)-1 {
			r.out, nOut = 1, 1
		}
		pos0 := q.Cache.Len()
		for i := range r.n {
			r.hostPos[i] = int32(pos0 + i)
		}
		m.b.WriteI32(r.pos, 0, r.hostPos[:r.n])
		if r.out == 1 && r.n > 1 {
			m.b.WriteI32(r.posl, 0, r.hostPos[r.n-1:r.n])
		}
		ids = append(ids, q.IDs...)
		off += r.n
		outOff += r.out
	}
	if nOut < nt {
		if err := m.outRows(s); err != nil {
			return Logits{}, err
		}
	}
	m.b.WriteI32(s.ids, 0, ids)
	s.nt, s.all, s.kv, s.seqs, s.nOut, s.last = nt, false, nil, rows, nOut, out
	defer func() { s.seqs, s.last = nil, nil }()
	run := func() { m.arch.forward(m.b, &m.Params, &m.W, s) }
	if m.graphs != nil {
		err = m.graphs.Run("", run) // a batch's shape changes every step: no capture
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

// seqScratch returns per-sequence attention scratch for seqs (slot j serves seqs[j]),
// growing a slot's buffers when its sequence has more rows than they hold.
func (m *Model) seqScratch(seqs []Seq) ([]*seqRows, error) {
	p := &m.Params
	for len(m.seqs) < len(seqs) {
		m.seqs = append(m.seqs, &seqRows{})
	}
	for j, q := range seqs {
		r := m.seqs[j]
		if r.cap >= len(q.IDs) {
			continue
		}
		for _, b := range r.bufs {
			m.b.Free(b)
		}
		c := max(len(q.IDs), 1)
		*r = seqRows{cap: c, hostPos: make([]int32, c)}
		var err error
		alloc := func(n int, i32 bool) backend.Buffer {
			if err != nil {
				return nil
			}
			var buf backend.Buffer
			if i32 {
				buf, err = m.b.NewI32(n)
			} else {
				buf, err = m.b.NewF32(n)
			}
			if err == nil {
				r.bufs = append(r.bufs, buf)
			}
			return buf
		}
		r.pos, r.posl = alloc(c, true), alloc(1, true)
		r.q, r.att = alloc(c*p.QDim(), false), alloc(c*p.QDim(), false)
		r.ql = alloc(p.QDim(), false)
		r.k, r.v = alloc(c*p.KVDim(), false), alloc(c*p.KVDim(), false)
		if err != nil {
			return nil, fmt.Errorf("model %s: attention scratch for %d rows: %w", m.Name, c, err)
		}
	}
	return m.seqs[:len(seqs)], nil
}

// attend rotates the rows' queries and keys, stores keys and values in the cache and
// computes attention into s.att: for one sequence with the ops over all rows at once
// (narrowing to the last row where only its logits are wanted); for a batch of
// sequences, per sequence on its rows gathered from the batch, scattered back after —
// in the last layer only the rows that get logits (see outputs).
func (s *pass) attend(b backend.Backend, p *Params, l int, r rows) rows {
	if s.seqs == nil {
		b.RoPEStoreKV(s.q, s.k, s.v, s.kv, l, s.pos, s.nt, p.Rope, p.Attn) // cache (layer, pos, kv_dim) ← k, v
		r = s.narrow(b, p, l, r)                                           // n = nt, or 1 in the last layer of a last-row forward
		b.Attention(s.att, r.q, s.kv, l, r.pos, r.n, p.Attn)               // att (n, heads*head_dim)
		return r
	}
	qd, kd := p.QDim(), p.KVDim()
	ma, multi := b.(backend.MultiAttention)
	s.multi = s.multi[:0]
	for _, q := range s.seqs {
		b.CopyRows(q.q, 0, s.q, q.off, q.n, qd) // this sequence's rows (n, qdim)
		b.CopyRows(q.k, 0, s.k, q.off, q.n, kd)
		b.CopyRows(q.v, 0, s.v, q.off, q.n, kd)
		s.multi = append(s.multi, backend.SeqAttention{Dst: q.att, Q: q.q, K: q.k, V: q.v, KV: q.kv, Pos: q.pos, NT: q.n})
	}
	// All sequences' rotations and stores in one op, then all their attention in one:
	// their few rows each are too little work to share the backend's threads one
	// sequence at a time.
	if multi {
		ma.RoPEStoreKVSeqs(s.multi, l, p.Rope, p.Attn)
	} else {
		for _, a := range s.multi {
			b.RoPEStoreKV(a.Q, a.K, a.V, a.KV, l, a.Pos, a.NT, p.Rope, p.Attn) // its cache ← k, v
		}
	}
	narrow := l == p.Layers-1 && s.nOut < s.nt
	if narrow {
		s.multi = s.outputs(b, p, s.multi)
	}
	if multi {
		ma.AttentionSeqs(s.multi, l, p.Attn)
	} else {
		for _, a := range s.multi {
			b.Attention(a.Dst, a.Q, a.KV, l, a.Pos, a.NT, p.Attn) // att (n, heads*head_dim)
		}
	}
	if !narrow {
		for _, q := range s.seqs {
			b.CopyRows(s.att, q.off, q.att, 0, q.n, qd) // back into the batch's rows
		}
		return r
	}
	for _, q := range s.seqs {
		if q.out > 0 {
			b.CopyRows(s.att, q.outOff, q.att, 0, q.out, qd)                // att (nOut, qdim)
			b.CopyRows(s.xo, q.outOff, s.x, q.off+q.n-q.out, q.out, p.Embd) // its residual rows (nOut, embd)
		}
	}
	return rows{n: s.nOut, x: s.xo, narrow: true}
}

// outputs narrows the last layer's attention to the rows that get logits, after every
// row's keys and values are stored: a sequence's every row, its last (query and
// position moved to a row of their own) or none.
func (s *pass) outputs(b backend.Backend, p *Params, all []backend.SeqAttention) []backend.SeqAttention {
	out := all[:0]
	for j, q := range s.seqs {
		a := all[j]
		switch {
		case q.out == 0:
			continue
		case q.out < q.n:
			b.CopyRows(q.ql, 0, q.q, q.n-1, 1, p.QDim()) // its last row's rotated query (1, qdim)
			a.Q, a.Pos, a.NT = q.ql, q.posl, 1
		}
		out = append(out, a)
	}
	return out
}
