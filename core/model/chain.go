package model

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/kv"
)

// Chain is what DraftChain computed, one entry per step: the step's greedy token, its
// logit and its row's log-sum-exp (RowStats with k = 1: IDs[0], Vals[0], LSE[0] of
// that step's last row). Its slices are reused by the next DraftChain into it.
type Chain struct {
	IDs       []int32
	Vals, LSE []float32
}

// chainState is the model's picks record on the backend and the table of a chain's
// step positions, for chains of up to cap steps.
type chainState struct {
	picks, pos backend.Buffer
	hostPos    []int32
	cap        int
}

func (cs *chainState) free(b backend.Backend) {
	if cs.picks != nil {
		b.Free(cs.picks)
		b.Free(cs.pos)
	}
	*cs = chainState{}
}

// HasDraftChain reports whether the backend runs DraftChain's steps back to back,
// each step's token picked and fed where the logits live (backend.DraftChainer).
func (m *Model) HasDraftChain() bool {
	_, ok := m.b.(backend.DraftChainer)
	return ok
}

// ErrNoDraftChain is returned by DraftChain on a backend without backend.DraftChainer.
var ErrNoDraftChain = errors.New("model: the backend does not run draft chains")

// DraftChain runs d ≥ 1 greedy draft steps at the next positions of c and returns
// their picks in ch: first ids (the tokens the cache lacks, ending with the
// sequence's newest; at most graphRows of them on a backend with graphs, or the
// forward is not captured), then d-1 one-token forwards, each of the token the step
// before picked. It gives exactly the tokens and bits of d forwards with a RowStats
// (k = 1) of each step's last row read between them, but the host neither reads nor
// writes a token between steps: it enqueues the d forwards and picks and waits once.
// c is appended with len(ids)+d-1 entries (the last pick is not run: the round's
// verify decides whether it stays). On error c's length is unchanged.
func (m *Model) DraftChain(ids []int32, c *kv.Cache, d int, ch *Chain) error {
	dc, ok := m.b.(backend.DraftChainer)
	if !ok {
		return ErrNoDraftChain
	}
	if d < 1 {
		return fmt.Errorf("BUG: model %s: draft chain of %d steps", m.Name, d)
	}
	if err := m.Check(ids, c); err != nil {
		return err
	}
	if err := c.Check(len(ids) + d - 1); err != nil {
		return fmt.Errorf("model %s: draft chain of %d steps after %d tokens: %w", m.Name, d, len(ids), err)
	}
	cs, err := m.chainRecord(dc, d)
	if err != nil {
		return err
	}
	one, err := m.pass(1, false) // the steps' scratch: its ids buffer is what a pick feeds
	if err != nil {
		return err
	}
	pos0 := c.Len()
	// Step s ≥ 1 runs at position pos0+len(ids)+s-1: the table goes up now, while the
	// stream is idle, and each step's entry reaches its buffers by a device copy.
	for s := 1; s < d; s++ {
		cs.hostPos[s-1] = int32(pos0 + len(ids) + s - 1)
	}
	if d > 1 {
		m.b.WriteI32(cs.pos, 0, cs.hostPos[:d-1])
	}
	fail := func(err error) error { return errors.Join(err, c.Truncate(pos0)) }
	l, err := m.run(ids, len(ids), c, false, false)
	if err != nil {
		return fail(err)
	}
	for step := range d {
		dc.DraftPick(l.Buf, m.Params.Vocab, one.ids, cs.picks, step)
		if step == d-1 {
			break
		}
		dc.CopyI32(one.pos, 0, cs.pos, step, 1)
		dc.CopyI32(one.posl, 0, cs.pos, step, 1)
		if l, err = m.run(nil, 1, c, false, false); err != nil {
			return fail(err)
		}
	}
	ch.IDs, ch.Vals, ch.LSE = grow(ch.IDs, d), grow(ch.Vals, d), grow(ch.LSE, d)
	if err := dc.ReadPicks(cs.picks, d, ch.IDs, ch.Vals, ch.LSE); err != nil {
		return fail(fmt.Errorf("model %s: draft chain of %d steps at %d: %w", m.Name, d, pos0, err))
	}
	return nil
}

// chainRecord returns the picks record and position table for d steps, (re)allocated
// in powers of two.
func (m *Model) chainRecord(dc backend.DraftChainer, d int) (*chainState, error) {
	if m.chain.picks != nil && m.chain.cap >= d {
		return &m.chain, nil
	}
	n := max(8, 1<<bits.Len(uint(d-1)))
	p, err := dc.NewPicks(n)
	if err != nil {
		return nil, fmt.Errorf("model %s: draft chain record of %d steps: %w", m.Name, n, err)
	}
	pos, err := m.b.NewI32(n)
	if err != nil {
		m.b.Free(p)
		return nil, fmt.Errorf("model %s: draft chain positions of %d steps: %w", m.Name, n, err)
	}
	m.chain.free(m.b)
	m.chain = chainState{picks: p, pos: pos, hostPos: make([]int32, n), cap: n}
	return &m.chain, nil
}
