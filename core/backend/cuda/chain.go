package cuda

import (
	"fmt"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/cuda/driver"
)

var _ backend.DraftChainer = (*Backend)(nil)

// A picks buffer (I32) is word 0 = -1, the "no picked column" rowstats_merge reads,
// then one record per step: rowstats_merge's output for one row and k = 1 (id, value,
// max, log-sum-exp, picked logit). The pick is RowStats' own two kernels, so a chain's
// tokens and confidences are the per-step path's bits by construction.
const pickWords = 5

// NewPicks allocates the picks of a chain of up to d steps.
func (b *Backend) NewPicks(d int) (backend.Buffer, error) {
	if d < 1 {
		return nil, fmt.Errorf("cuda: NewPicks(%d): want at least one step", d)
	}
	p, err := b.NewI32(1 + pickWords*d)
	if err != nil {
		return nil, err
	}
	b.WriteI32(p, 0, []int32{-1})
	return p, nil
}

// DraftPick enqueues rowstats_part and rowstats_merge for the row (k = 1) into pick
// step's record, then a 4-byte device copy of the id into next[0]: three launches,
// no host wait.
func (b *Backend) DraftPick(logits backend.Buffer, n int, next, picks backend.Buffer, step int) {
	if b.closed {
		panic("BUG: cuda: backend used after Close")
	}
	if step < 0 {
		panic(fmt.Sprintf("BUG: cuda: DraftPick: step %d", step))
	}
	l := f32(logits, n, "DraftPick logits")
	nx := i32(next, 1, "DraftPick next")
	pk := i32(picks, 1+pickWords*(step+1), "DraftPick picks")
	defer b.enter()()
	parts, chunk := rowStatsParts(n)
	// A scratch of its own: the part records of one row (id, value, max, sum, NaN flag
	// per part); the steps of a chain reuse it in stream order.
	part := b.scratchFor("draftpick", int64(parts)*5*4)
	if part == 0 {
		return
	}
	out := pk.at(1 + pickWords*step)
	b.launchRowStats(l, 1, n, 1, chunk, parts, part, out, pk.at(0))
	b.fail(b.stream.CopyDtoD(nx.p, out, 4))
	nx.wrote()
}

// CopyI32 enqueues a device-to-device copy.
func (b *Backend) CopyI32(dst backend.Buffer, dstOff int, src backend.Buffer, srcOff, n int) {
	if b.closed {
		panic("BUG: cuda: backend used after Close")
	}
	if dstOff < 0 || srcOff < 0 || n < 0 || dst == src {
		panic(fmt.Sprintf("BUG: cuda: CopyI32(%d, %d, %d) or into its source", dstOff, srcOff, n))
	}
	d := i32(dst, dstOff+n, "CopyI32 dst")
	s := i32(src, srcOff+n, "CopyI32 src")
	if n == 0 {
		return
	}
	defer b.enter()()
	b.fail(b.stream.CopyDtoD(d.at(dstOff), s.at(srcOff), 4*n))
	d.wrote()
}

// ReadPicks copies the records back through the pinned host buffer (one wait for the
// chain, the copy and the error word), or synchronously without one.
func (b *Backend) ReadPicks(picks backend.Buffer, d int, ids []int32, vals, lse []float32) error {
	if b.closed {
		return errClosed
	}
	pk := i32(picks, 1+pickWords*d, "ReadPicks picks")
	if len(ids) < d || len(vals) < d || len(lse) < d {
		panic(fmt.Sprintf("BUG: cuda: ReadPicks: %d picks into ids/vals/lse of %d/%d/%d", d, len(ids), len(vals), len(lse)))
	}
	defer b.enter()()
	n := 4 * pickWords * d
	var host []byte
	if b.growHost(hostData + n); b.host != nil && b.host.Len() >= hostData+n {
		b.fail(b.stream.CopyDtoH(b.host.Ptr(hostData), pk.at(1), n))
		if err := b.takeErr(); err != nil {
			return err
		}
		host = b.host.Bytes()[hostData : hostData+n]
	} else {
		if err := b.takeErr(); err != nil {
			return err
		}
		host = make([]byte, n)
		if err := driver.CopyDtoH(host, pk.at(1)); err != nil {
			return err
		}
	}
	var maxv, picked [1]float32
	for i := range d {
		rec := host[4*pickWords*i : 4*pickWords*(i+1)]
		unpackRowStats(rec, 1, 1, ids[i:i+1], vals[i:i+1], maxv[:], lse[i:i+1], picked[:])
	}
	return nil
}
