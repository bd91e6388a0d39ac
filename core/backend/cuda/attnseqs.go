package cuda

import (
	"unsafe"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/cuda/driver"
)

var _ backend.MultiAttention = (*Backend)(nil)

// seqDesc is one sequence's share of a *_seqs launch: kernels/seqs.cuh SeqDesc, byte
// for byte.
type seqDesc struct {
	q, k, v, dst, pos      driver.DevicePtr
	kc, vc, kd, vd         driver.DevicePtr // layer 0
	layerVals, layerScales int64
	first, nt, ctx         int32
	chunk, nsplit, dstRow  int32
	_                      [4]int32
}

var _ [128]byte = [unsafe.Sizeof(seqDesc{})]byte{}

// maxLaunchSeqs is the most sequences one *_seqs launch takes (its table is 8 KiB);
// a batch of more runs as several launches.
const maxLaunchSeqs = 64

// seqTableSlots is how many distinct tables stay uploaded: a step of a batch uses
// three (the rotation's, the attention's, the last layer's narrowed attention), so a
// batch whose sequences stay the same uploads nothing after its first step.
const seqTableSlots = 8

// seqTables are the device copies of recent launch tables, each keyed by its bytes.
type seqTables struct {
	base driver.DevicePtr // seqTableSlots areas of maxLaunchSeqs descriptors
	keys [seqTableSlots]string
	used [seqTableSlots]uint64
	tick uint64
}

// seqTable returns the device address of a table holding descs, uploading it (on the
// stream, behind the work that read the slot's previous table) unless a slot holds it
// already; 0 on failure (recorded).
func (b *Backend) seqTable(descs []seqDesc) driver.DevicePtr {
	if c := b.seqG.capture; c != nil {
		return c.table(b, descs)
	}
	t := &b.seqTabs
	const slot = maxLaunchSeqs * int(unsafe.Sizeof(seqDesc{}))
	if t.base == 0 {
		p, err := b.alloc("sequence tables", int64(seqTableSlots*slot))
		if err != nil {
			b.fail(err)
			return 0
		}
		t.base = p
	}
	n := len(descs) * int(unsafe.Sizeof(seqDesc{}))
	key := unsafe.String((*byte)(unsafe.Pointer(&descs[0])), n)
	t.tick++
	lru := 0
	for i, k := range t.keys {
		if k == key {
			t.used[i] = t.tick
			return t.base + driver.DevicePtr(i*slot)
		}
		if t.used[i] < t.used[lru] {
			lru = i
		}
	}
	p := t.base + driver.DevicePtr(lru*slot)
	if err := b.stream.CopyHtoD(p, unsafe.Pointer(&descs[0]), n); err != nil {
		b.fail(err)
		return 0
	}
	t.keys[lru], t.used[lru] = string([]byte(key)), t.tick
	return p
}

// seqArgs checks one sequence's share of a *_seqs call (as RoPEStoreKV or Attention
// would check it alone, a bad one recorded) and describes its rows.
func (b *Backend) seqArgs(op string, sq backend.SeqAttention, layer int, a backend.Attn, rope bool) (*KV, seqDesc, bool) {
	checkNT(sq.NT, op)
	kv := kvOf(sq.KV, op)
	if err := checkAttn(kv, layer, a); err != nil {
		b.failf("%s: %v", op, err)
		return nil, seqDesc{}, false
	}
	qd, kd := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	end := sq.Row + sq.NT
	q := f32(sq.Q, end*qd, op+" q")
	d := seqDesc{q: q.at(sq.Row * qd), pos: i32(sq.Pos, end, op+" pos").at(sq.Row),
		kc: kv.k, vc: kv.v, kd: kv.kd, vd: kv.vd, layerVals: kv.layerVals, layerScales: kv.layerScales,
		nt: int32(sq.NT), ctx: int32(kv.spec.Ctx)}
	if rope {
		k, v := f32(sq.K, end*kd, op+" k"), f32(sq.V, end*kd, op+" v")
		d.k, d.v = k.at(sq.Row*kd), v.at(sq.Row*kd)
	} else {
		dst := f32(sq.Dst, (sq.DstRow+sq.NT)*qd, op+" dst")
		d.dst, d.dstRow = dst.at(sq.DstRow*qd), int32(sq.DstRow)
	}
	return kv, d, true
}

// RoPEStoreKVSeqs is RoPEStoreKV for several sequences' rows, each with its own cache
// and positions (backend.MultiAttention): one rope_store_seqs launch (up to
// maxLaunchSeqs sequences) computing every row as rope_store does.
func (b *Backend) RoPEStoreKVSeqs(seqs []backend.SeqAttention, layer int, r backend.RoPE, a backend.Attn) {
	if len(seqs) == 0 {
		return
	}
	if msg := checkRoPE(r, a); msg != "" {
		b.failf("RoPEStoreKVSeqs: %s", msg)
		return
	}
	descs := make([]seqDesc, 0, len(seqs))
	for _, sq := range seqs {
		_, d, ok := b.seqArgs("RoPEStoreKVSeqs", sq, layer, a, true)
		if !ok {
			return
		}
		descs = append(descs, d)
	}
	defer b.enter()()
	if b.capturing && b.seqG.capture == nil {
		b.failf("RoPEStoreKVSeqs inside a graph capture but RunSeqs' (its table is uploaded per call)")
		return
	}
	for _, sq := range seqs { // rotated in place
		f32(sq.Q, 0, "RoPEStoreKVSeqs q").wrote()
		f32(sq.K, 0, "RoPEStoreKVSeqs k").wrote()
	}
	ff, neox, ok := b.ropeArgs(r)
	if !ok {
		return
	}
	for len(descs) > 0 {
		part := descs[:min(len(descs), maxLaunchSeqs)]
		descs = descs[len(part):]
		rows := number(part)
		tab := b.seqTable(part)
		if tab == 0 {
			return
		}
		b.launch("rope_store_seqs", driver.Dim3{X: rows, Y: a.Heads + a.KVHeads}, driver.Dim3{X: max(32, ceilDiv(r.Dims/2, 32)*32)}, 0,
			driver.P(tab), driver.I(len(part)), driver.I(layer), driver.P(ff), driver.I(a.Heads), driver.I(a.KVHeads),
			driver.I(a.HeadDim), driver.I(r.Dims), driver.I(neox), driver.F(r.Base), driver.F(r.FreqScale), driver.P(b.errWord))
	}
}

// number sets each descriptor's first launch row and returns the launch's rows.
func number(descs []seqDesc) int {
	rows := 0
	for i := range descs {
		descs[i].first = int32(rows)
		rows += int(descs[i].nt)
	}
	return rows
}

// AttentionSeqs is Attention for several sequences' rows, each with its own cache and
// positions (backend.MultiAttention), with Attention's kernel choice per sequence: a
// sequence of the flash kernel's rows (prefill) gets its own launch, all others share
// one attn_part_seqs and one attn_combine_seqs launch per cache type (up to
// maxLaunchSeqs sequences), each row with its own sequence's splits — the bits of
// Attention. When the outputs fill one buffer's first rows in order, the combine
// writes their 8-bit shadow too, as Attention's does.
func (b *Backend) AttentionSeqs(seqs []backend.SeqAttention, layer int, a backend.Attn) {
	if len(seqs) == 0 {
		return
	}
	hd := a.HeadDim
	var f16s, q8s []seqDesc
	type flashSeq struct {
		kv *KV
		d  seqDesc
	}
	var flashes []flashSeq
	tiled, rows := true, 0 // the outputs are rows 0 … rows-1 of one buffer, in order
	for _, sq := range seqs {
		kv, d, ok := b.seqArgs("AttentionSeqs", sq, layer, a, false)
		if !ok {
			return
		}
		tiled = tiled && sq.Dst == seqs[0].Dst && sq.DstRow == rows
		rows += sq.NT
		if b.flash(kv, sq.NT, hd) {
			flashes = append(flashes, flashSeq{kv, d})
			continue
		}
		chunk, nsplit, _ := b.attnParams(kv, sq.NT)
		d.chunk, d.nsplit = int32(chunk), int32(nsplit)
		if kv.spec.Type == backend.KVF16 {
			f16s = append(f16s, d)
		} else {
			q8s = append(q8s, d)
		}
	}
	dst := f32(seqs[0].Dst, 0, "AttentionSeqs dst")
	defer b.enter()()
	if b.capturing && b.seqG.capture == nil {
		b.failf("AttentionSeqs inside a graph capture but RunSeqs' (its table is uploaded per call)")
		return
	}
	if c := b.seqG.capture; c != nil && len(flashes) > 0 {
		c.refuse("a flash-attention launch names its cache in its arguments")
	}
	for _, sq := range seqs {
		f32(sq.Dst, 0, "AttentionSeqs dst").wrote()
	}
	for _, f := range flashes {
		b.attnFlash(f.d.dst, f.d.q, f.d.pos, f.kv, layer, int(f.d.nt), a)
	}
	var sq8, sd8 driver.DevicePtr
	shadow := tiled && len(flashes) == 0 && hd%32 == 0
	if shadow {
		if sq8, sd8 = b.shadow(dst); sq8 == 0 {
			return
		}
	}
	for _, group := range []struct {
		cache string // the kernels' suffix: the cache type
		descs []seqDesc
	}{{"f16", f16s}, {"q8", q8s}} {
		descs := group.descs
		for len(descs) > 0 {
			part := descs[:min(len(descs), maxLaunchSeqs)]
			descs = descs[len(part):]
			if !b.attnSeqsLaunch(group.cache, part, layer, a, sq8, sd8) {
				return
			}
		}
	}
	if shadow {
		b.setShadow(dst, rows*a.Heads*hd)
	}
}

// attnSeqsLaunch runs one attn_part_seqs (or, by attnGroup, attn_part_seqs_grp) and
// attn_combine_seqs launch over descs, on caches of type cache ("f16" or "q8").
func (b *Backend) attnSeqsLaunch(cache string, descs []seqDesc, layer int, a backend.Attn, sq8, sd8 driver.DevicePtr) bool {
	hd := a.HeadDim
	rows := number(descs)
	ps, maxChunk := 0, 0
	for _, d := range descs { // the largest chunk of a row of d: attnParams' maxChunk
		ps, maxChunk = max(ps, int(d.nsplit)), max(maxChunk, attnChunk(int(d.ctx), int(d.nsplit), int(d.chunk)))
	}
	tab := b.seqTable(descs)
	part := b.scratchFor("attn", int64(rows)*int64(a.Heads)*int64(ps)*int64(hd+2)*4)
	if tab == 0 || part == 0 {
		return false
	}
	args := []driver.Arg{driver.P(tab), driver.I(len(descs)), driver.I(layer), driver.P(part), driver.I(a.Heads), driver.I(a.KVHeads),
		driver.I(hd), driver.I(ps), driver.F(a.Scale), driver.P(b.errWord)}
	if b.combineFused(rows, a) {
		kernel, grid, shared := b.attnPartShape("attn_part_seqs", a, rows, ps, maxChunk, true)
		b.launch(kernel+"_"+cache, grid, driver.Dim3{X: 128}, shared, append(args, driver.P(b.attnCnt), driver.P(sq8), driver.P(sd8))...)
		return true
	}
	kernel, grid, shared := b.attnPartShape("attn_part_seqs", a, rows, ps, maxChunk, false)
	b.launch(kernel+"_"+cache, grid, driver.Dim3{X: 128}, shared, args...)
	b.launch("attn_combine_seqs", driver.Dim3{X: a.Heads, Y: rows}, driver.Dim3{X: rowThreads(min(hd, 256))}, attnCombineShared(1, ps),
		driver.P(tab), driver.I(len(descs)), driver.P(part), driver.I(a.Heads), driver.I(hd), driver.I(ps),
		driver.P(sq8), driver.P(sd8))
	return true
}
