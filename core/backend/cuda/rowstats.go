package cuda

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/cuda/driver"
)

var _ backend.RowStatser = (*Backend)(nil)

// rowStatsChunk is the most values of a row one rowstats_part block covers: ~38 blocks
// per row for a 152k vocabulary, so a single row spreads over many SMs; each of the
// block's 256 threads holds its 16 values in registers (the kernel traps on any other
// shape, see rowstats.cu).
const rowStatsChunk = 4096

// rowStatsParts is how rowstats_part splits a row of n values: parts chunks of chunk
// values (the last may be shorter, none is empty). It depends only on n, so a row's
// results do not depend on nt.
func rowStatsParts(n int) (parts, chunk int) {
	parts = ceilDiv(n, rowStatsChunk)
	chunk = ceilDiv(n, parts)
	return ceilDiv(n, chunk), chunk
}

// RowStats computes each row's k best, max, log-sum-exp and picked logit on the device
// (see backend.RowStatser) and copies them back in one transfer; for k above the tier's
// TopKMaxK it reads the rows and computes everything on the host.
func (b *Backend) RowStats(logits backend.Buffer, nt, n, k int, pick []int32, ids []int32, vals []float32, maxv, lse, picked []float32) error {
	if b.closed {
		return errClosed
	}
	checkNT(nt, "RowStats")
	l := f32(logits, nt*n, "RowStats logits")
	if err := backend.CheckRowStats("cuda", nt, n, k, pick, ids, vals, maxv, lse, picked); err != nil {
		return err
	}
	defer b.enter()()
	if k > b.tier.TopKMaxK {
		if err := b.takeErr(); err != nil {
			return err
		}
		return b.rowStatsHost(l, nt, n, k, pick, ids, vals, maxv, lse, picked)
	}
	parts, chunk := rowStatsParts(n)
	partBytes := int64(nt) * int64(parts) * int64(2*k+3) * 4
	outN := nt * (2*k + 3)
	sc := b.scratchFor("rowstats", partBytes+int64(outN)*4+int64(nt)*4)
	if sc == 0 {
		return b.takeErr()
	}
	part, out := sc, sc+driver.DevicePtr(partBytes)
	pickp := out + driver.DevicePtr(4*outN)
	// Through the pinned host buffer: the picks go up and the results come back by
	// async copies around the two kernels, and takeErr's one wait covers them all.
	need := hostData + 4*outN + 4*nt
	if b.growHost(need); b.host == nil || b.host.Len() < need {
		return b.rowStatsSync(l, nt, n, k, chunk, parts, pick, part, out, pickp, ids, vals, maxv, lse, picked)
	}
	hb := b.host.Bytes()
	copy(hb[hostData+4*outN:need], unsafe.Slice((*byte)(unsafe.Pointer(&pick[0])), 4*nt))
	b.fail(b.stream.CopyHtoD(pickp, b.host.Ptr(hostData+4*outN), 4*nt))
	b.launchRowStats(l, nt, n, k, chunk, parts, part, out, pickp)
	b.fail(b.stream.CopyDtoH(b.host.Ptr(hostData), out, 4*outN))
	if err := b.takeErr(); err != nil {
		return err
	}
	unpackRowStats(hb[hostData:hostData+4*outN], nt, k, ids, vals, maxv, lse, picked)
	return nil
}

func (b *Backend) launchRowStats(l *Buffer, nt, n, k, chunk, parts int, part, out, pickp driver.DevicePtr) {
	b.launch("rowstats_part", driver.Dim3{X: parts, Y: nt}, driver.Dim3{X: 256}, 0,
		driver.P(l.p), driver.I(n), driver.I(k), driver.I(chunk), driver.P(part))
	b.launch("rowstats_merge", driver.Dim3{X: nt}, driver.Dim3{X: 256}, 0,
		driver.P(l.p), driver.I(n), driver.I(k), driver.I(parts), driver.P(part), driver.P(pickp), driver.P(out), driver.I(nt))
}

// rowStatsSync is RowStats without pinned host memory: pageable copies, two waits.
func (b *Backend) rowStatsSync(l *Buffer, nt, n, k, chunk, parts int, pick []int32, part, out, pickp driver.DevicePtr,
	ids []int32, vals []float32, maxv, lse, picked []float32) error {
	outN := nt * (2*k + 3)
	b.fail(b.stream.CopyHtoD(pickp, unsafe.Pointer(&pick[0]), 4*nt))
	b.launchRowStats(l, nt, n, k, chunk, parts, part, out, pickp)
	if err := b.takeErr(); err != nil {
		return err
	}
	host := make([]byte, 4*outN)
	if err := driver.CopyDtoH(host, out); err != nil {
		return err
	}
	unpackRowStats(host, nt, k, ids, vals, maxv, lse, picked)
	return nil
}

// unpackRowStats spreads rowstats_merge's output (ids, vals, max, lse, picked) into the
// caller's slices.
func unpackRowStats(host []byte, nt, k int, ids []int32, vals []float32, maxv, lse, picked []float32) {
	word := func(i int) uint32 { return binary.LittleEndian.Uint32(host[4*i:]) }
	for i := range nt * k {
		ids[i] = int32(word(i))
		vals[i] = math.Float32frombits(word(nt*k + i))
	}
	for r := range nt {
		maxv[r] = math.Float32frombits(word(2*nt*k + r))
		lse[r] = math.Float32frombits(word(2*nt*k + nt + r))
		picked[r] = math.Float32frombits(word(2*nt*k + 2*nt + r))
	}
}

// rowStatsHost is RowStats from the rows copied to the host (k beyond the device's
// selection); the sum runs in float64.
func (b *Backend) rowStatsHost(l *Buffer, nt, n, k int, pick []int32, ids []int32, vals []float32, maxv, lse, picked []float32) error {
	return b.eachHostRow(l, nt, n, func(r int, row []float32, order []int32) {
		for j := range k {
			ids[r*k+j], vals[r*k+j] = order[j], row[order[j]]
		}
		m, l := backend.MaxLSE(row)
		maxv[r], lse[r] = m, float32(l)
		picked[r] = 0
		if pick[r] >= 0 {
			picked[r] = row[pick[r]]
		}
	})
}
