package model

import (
	"errors"
	"fmt"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/kv"
)

// Seq is one sequence's part of a batched forward: its new tokens and its cache.
type Seq struct {
	IDs   []int32
	Cache *kv.Cache
}

// seqRows is where a sequence's rows sit in a batched pass and the scratch its
// attention runs in: its rows gathered from the batch, its positions.
type seqRows struct {
	off, n  int
	kv      backend.KV
	pos     backend.Buffer // I32 (cap)
	q, att  backend.Buffer // (cap, qdim)
	k, v    backend.Buffer // (cap, kvdim)
	cap     int
	hostPos []int32
	bufs    []backend.Buffer
}

// batchOut holds the last row of every sequence and its logits, for a last-rows
// batched forward.
type batchOut struct {
	cap     int
	x       backend.Buffer // (cap, embd)
	logits  backend.Buffer // (cap, vocab)
	bufsOut []backend.Buffer
}

// ForwardBatch runs several sequences' tokens as one forward: the rows of seqs[0],
// then seqs[1]'s, … share every matmul (the weights are read once for all of them),
// and each sequence's rows are rotated, stored in and attend over its own cache at its
// own positions. Each sequence's tokens are appended to its cache.
//
// With all, the logits hold every row in that order (sum of len(IDs) rows); otherwise
// row j is the last row of seqs[j]. Row identity makes each sequence's rows the same
// bits as its own Forward (batch invariance) wherever the backend keeps identity for
// the batch's row count (Caps.IdentityRows). On an error found before anything runs
// (an id outside the vocabulary, a full or repeated cache) no cache changes.
func (m *Model) ForwardBatch(seqs []Seq, all bool) (Logits, error) {
	if len(seqs) == 0 {
		return Logits{}, errors.New("model: batched forward of no sequences")
	}
	nt := 0
	seen := map[*kv.Cache]bool{}
	for j, q := range seqs {
		if seen[q.Cache] {
			return Logits{}, fmt.Errorf("model: batched forward: sequence %d repeats a cache", j)
		}
		seen[q.Cache] = true
		if err := m.Check(q.IDs, q.Cache); err != nil {
			return Logits{}, fmt.Errorf("batched forward: sequence %d: %w", j, err)
		}
		nt += len(q.IDs)
	}
	if len(seqs) == 1 {
		return m.Forward(seqs[0].IDs, seqs[0].Cache, all)
	}
	s, err := m.pass(nt, all)
	if err != nil {
		return Logits{}, err
	}
	rows, err := m.seqScratch(seqs)
	if err != nil {
		return Logits{}, err
	}
	ids := make([]int32, 0, nt)
	off := 0
	for j, q := range seqs {
		r := rows[j]
		r.off, r.n, r.kv = off, len(q.IDs), q.Cache.Device()
		pos0 := q.Cache.Len()
		for i := range r.n {
			r.hostPos[i] = int32(pos0 + i)
		}
		m.b.WriteI32(r.pos, 0, r.hostPos[:r.n])
		ids = append(ids, q.IDs...)
		off += r.n
	}
	m.b.WriteI32(s.ids, 0, ids)
	s.nt, s.all, s.kv, s.seqs = nt, all, nil, rows
	defer func() { s.seqs = nil }()
	var out *batchOut
	if !all {
		if out, err = m.lastRows(len(seqs)); err != nil {
			return Logits{}, err
		}
		s.last = out
		defer func() { s.last = nil }()
	}
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
	if all {
		return Logits{Buf: s.outAll, Rows: nt, Cols: m.Params.Vocab}, nil
	}
	return Logits{Buf: out.logits, Rows: len(seqs), Cols: m.Params.Vocab}, nil
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
		r.pos = alloc(c, true)
		r.q, r.att = alloc(c*p.QDim(), false), alloc(c*p.QDim(), false)
		r.k, r.v = alloc(c*p.KVDim(), false), alloc(c*p.KVDim(), false)
		if err != nil {
			return nil, fmt.Errorf("model %s: attention scratch for %d rows: %w", m.Name, c, err)
		}
	}
	return m.seqs[:len(seqs)], nil
}

// lastRows returns the buffers for n sequences' last rows and their logits.
func (m *Model) lastRows(n int) (*batchOut, error) {
	if m.last != nil && m.last.cap >= n {
		return m.last, nil
	}
	if m.last != nil {
		for _, b := range m.last.bufsOut {
			m.b.Free(b)
		}
		m.last = nil
	}
	c := max(n, 8)
	x, err := m.b.NewF32(c * m.Params.Embd)
	if err != nil {
		return nil, fmt.Errorf("model %s: last rows of %d sequences: %w", m.Name, c, err)
	}
	l, err := m.b.NewF32(c * m.Params.Vocab)
	if err != nil {
		m.b.Free(x)
		return nil, fmt.Errorf("model %s: logits of %d sequences: %w", m.Name, c, err)
	}
	m.last = &batchOut{cap: c, x: x, logits: l, bufsOut: []backend.Buffer{x, l}}
	return m.last, nil
}

// attend rotates the rows' queries and keys, stores keys and values in the cache and
// computes attention into s.att: for one sequence with the ops over all rows at once
// (narrowing to the last row where only its logits are wanted); for a batch of
// sequences, per sequence on its rows gathered from the batch, scattered back after.
func (s *pass) attend(b backend.Backend, p *Params, l int, r rows) rows {
	if s.seqs == nil {
		b.RoPEStoreKV(s.q, s.k, s.v, s.kv, l, s.pos, s.nt, p.Rope, p.Attn) // cache (layer, pos, kv_dim) ← k, v
		r = s.narrow(b, p, l, r)                                           // n = nt, or 1 in the last layer of a last-row forward
		b.Attention(s.att, r.q, s.kv, l, r.pos, r.n, p.Attn)               // att (n, heads*head_dim)
		return r
	}
	qd, kd := p.QDim(), p.KVDim()
	ma, multi := b.(backend.MultiAttention)
	if multi {
		s.multi = s.multi[:0]
	}
	for _, q := range s.seqs {
		b.CopyRows(q.q, 0, s.q, q.off, q.n, qd) // this sequence's rows (n, qdim)
		b.CopyRows(q.k, 0, s.k, q.off, q.n, kd)
		b.CopyRows(q.v, 0, s.v, q.off, q.n, kd)
		if multi {
			s.multi = append(s.multi, backend.SeqAttention{Dst: q.att, Q: q.q, K: q.k, V: q.v, KV: q.kv, Pos: q.pos, NT: q.n})
			continue
		}
		b.RoPEStoreKV(q.q, q.k, q.v, q.kv, l, q.pos, q.n, p.Rope, p.Attn) // its cache ← k, v
		b.Attention(q.att, q.q, q.kv, l, q.pos, q.n, p.Attn)              // att (n, heads*head_dim)
		b.CopyRows(s.att, q.off, q.att, 0, q.n, qd)                       // back into the batch's rows
	}
	if multi {
		// All sequences' rotations and stores in one op, then all their attention in
		// one: their few rows each are too little work to share the backend's threads
		// one sequence at a time.
		ma.RoPEStoreKVSeqs(s.multi, l, p.Rope, p.Attn)
		ma.AttentionSeqs(s.multi, l, p.Attn)
		for _, q := range s.seqs {
			b.CopyRows(s.att, q.off, q.att, 0, q.n, qd)
		}
	}
	return r
}
