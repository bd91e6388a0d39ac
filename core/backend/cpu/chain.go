package cpu

import (
	"fmt"
	"math"

	"github.com/minfer/minfer/core/backend"
)

var _ backend.DraftChainer = (*Backend)(nil)

// pickWords is a pick's record in a picks buffer: id, value bits, log-sum-exp bits.
const pickWords = 3

// NewPicks allocates the picks of a chain of up to d steps.
func (b *Backend) NewPicks(d int) (backend.Buffer, error) {
	if d < 1 {
		return nil, fmt.Errorf("cpu: NewPicks(%d): want at least one step", d)
	}
	return b.NewI32(pickWords * d)
}

// noPick is DraftPick's pick list: no column's logit is wanted.
var noPick = []int32{-1}

// DraftPick computes the greedy pick of the row at once, through RowStats (the same
// bits by construction), and writes its id into next[0].
func (b *Backend) DraftPick(logits backend.Buffer, n int, next, picks backend.Buffer, step int) {
	nx := i32(next, 1, "DraftPick next")
	pk := i32(picks, pickWords*(step+1), "DraftPick picks")
	if step < 0 {
		panic(fmt.Sprintf("BUG: cpu: DraftPick: step %d", step))
	}
	var id [1]int32
	var val, maxv, lse, picked [1]float32
	if err := b.RowStats(logits, 1, n, 1, noPick, id[:], val[:], maxv[:], lse[:], picked[:]); err != nil {
		b.fail(err)
		return
	}
	rec := pk[pickWords*step:]
	rec[0], rec[1], rec[2] = id[0], int32(math.Float32bits(val[0])), int32(math.Float32bits(lse[0]))
	nx[0] = id[0]
}

// CopyI32 copies at once.
func (b *Backend) CopyI32(dst backend.Buffer, dstOff int, src backend.Buffer, srcOff, n int) {
	if dstOff < 0 || srcOff < 0 || n < 0 || dst == src {
		panic(fmt.Sprintf("BUG: cpu: CopyI32(%d, %d, %d) or into its source", dstOff, srcOff, n))
	}
	copy(i32(dst, dstOff+n, "CopyI32 dst")[dstOff:], i32(src, srcOff+n, "CopyI32 src")[srcOff:])
}

// ReadPicks copies picks 0…d-1 to the host and returns the first pending error.
func (b *Backend) ReadPicks(picks backend.Buffer, d int, ids []int32, vals, lse []float32) error {
	if b.closed {
		return errClosed
	}
	pk := i32(picks, pickWords*d, "ReadPicks picks")
	if len(ids) < d || len(vals) < d || len(lse) < d {
		panic(fmt.Sprintf("BUG: cpu: ReadPicks: %d picks into ids/vals/lse of %d/%d/%d", d, len(ids), len(vals), len(lse)))
	}
	if err := b.takeErr(); err != nil {
		return err
	}
	for i := range d {
		rec := pk[pickWords*i:]
		ids[i], vals[i], lse[i] = rec[0], math.Float32frombits(uint32(rec[1])), math.Float32frombits(uint32(rec[2]))
	}
	return nil
}
