package cuda

import (
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/cuda/driver"
)

func kvOf(x backend.KV, what string) *KV {
	kv, ok := x.(*KV)
	if !ok || kv == nil {
		panic(fmt.Sprintf("BUG: cuda: %s: KV %T is not a CUDA cache", what, x))
	}
	if kv.k == 0 {
		panic(fmt.Sprintf("BUG: cuda: %s: KV cache used after Free", what))
	}
	return kv
}

func checkAttn(kv *KV, layer int, a backend.Attn) error {
	s := kv.spec
	switch {
	case layer < 0 || layer >= s.Layers:
		return fmt.Errorf("layer %d outside [0, %d)", layer, s.Layers)
	case a.KVHeads != s.KVHeads || a.HeadDim != s.HeadDim:
		return fmt.Errorf("attn %d KV heads × %d disagrees with the cache's %d × %d", a.KVHeads, a.HeadDim, s.KVHeads, s.HeadDim)
	case a.Heads < 1 || a.Heads%a.KVHeads != 0:
		return fmt.Errorf("%d heads is not a multiple of %d KV heads", a.Heads, a.KVHeads)
	}
	return nil
}

// layerPtrs are the cache arrays of one layer.
func (kv *KV) layerPtrs(layer int) (k, v, kd, vd driver.DevicePtr) {
	k = kv.k + driver.DevicePtr(int64(layer)*kv.layerVals)
	v = kv.v + driver.DevicePtr(int64(layer)*kv.layerVals)
	if kv.kd != 0 {
		kd = kv.kd + driver.DevicePtr(int64(layer)*kv.layerScales)
		vd = kv.vd + driver.DevicePtr(int64(layer)*kv.layerScales)
	}
	return
}

// ropeArgs are the RoPE kernels' arguments for r: its frequency factors' device copy
// (0 for none) and 1 for NeoX rotation, 0 for normal; ok is false when the factors
// could not be uploaded (b.err is set).
func (b *Backend) ropeArgs(r backend.RoPE) (ff driver.DevicePtr, neox int, ok bool) {
	ff = b.freqFactors(r.FreqFactors)
	if r.FreqFactors != nil && ff == 0 {
		return 0, 0, false
	}
	if r.Mode == backend.RoPENeoX {
		neox = 1
	}
	return ff, neox, true
}

// freqFactors returns the device copy of RoPE frequency factors (uploaded once per
// distinct slice content, so a graph capture never copies from the host).
func (b *Backend) freqFactors(ff []float32) driver.DevicePtr {
	if ff == nil {
		return 0
	}
	key := "ff:" + string(unsafe.Slice((*byte)(unsafe.Pointer(&ff[0])), 4*len(ff)))
	if s := b.scratch[key]; s != nil {
		return s.p
	}
	p, err := b.alloc("RoPE freq factors", int64(4*len(ff)))
	if err == nil {
		err = driver.CopyHtoD(p, unsafe.Slice((*byte)(unsafe.Pointer(&ff[0])), 4*len(ff)))
	}
	if err != nil {
		b.fail(err)
		return 0
	}
	b.scratch[key] = &scratch{p: p, n: int64(4 * len(ff))}
	return p
}

// checkRoPE says what is wrong with a rotation of a's heads by r ("" for nothing).
func checkRoPE(r backend.RoPE, a backend.Attn) string {
	switch {
	case r.Mode != backend.RoPENormal && r.Mode != backend.RoPENeoX:
		return fmt.Sprintf("unknown RoPE mode %d", r.Mode)
	case r.Dims < 2 || r.Dims%2 != 0 || r.Dims > a.HeadDim:
		return fmt.Sprintf("rotated dims %d must be even and in [2, head dim %d]", r.Dims, a.HeadDim)
	case r.FreqFactors != nil && len(r.FreqFactors) != r.Dims/2:
		return fmt.Sprintf("%d freq factors, want dims/2 = %d", len(r.FreqFactors), r.Dims/2)
	}
	return ""
}

// RoPEStoreKV rotates q and k in place and stores k and v at (layer, pos[i]). A
// position outside the cache is recorded (by the kernel) and its row not stored.
func (b *Backend) RoPEStoreKV(q, k, v backend.Buffer, kvx backend.KV, layer int, pos backend.Buffer, nt int, r backend.RoPE, a backend.Attn) {
	checkNT(nt, "RoPEStoreKV")
	kv := kvOf(kvx, "RoPEStoreKV")
	if err := checkAttn(kv, layer, a); err != nil {
		b.failf("RoPEStoreKV: %v", err)
		return
	}
	if msg := checkRoPE(r, a); msg != "" {
		b.failf("RoPEStoreKV: %s", msg)
		return
	}
	hd, kvdim := a.HeadDim, a.KVHeads*a.HeadDim
	qs, ks, vs := f32(q, nt*a.Heads*hd, "RoPEStoreKV q"), f32(k, nt*kvdim, "RoPEStoreKV k"), f32(v, nt*kvdim, "RoPEStoreKV v")
	ps := i32(pos, nt, "RoPEStoreKV pos")
	if b.fuseRoPE(qs, ks, vs, ps, kv, layer, nt, r, a) {
		return
	}
	defer b.enter()()
	ff, neox, ok := b.ropeArgs(r)
	if !ok {
		return
	}
	qs.wrote()
	ks.wrote()
	kc, vc, kd, vd := kv.layerPtrs(layer)
	b.launch("rope_store", driver.Dim3{X: nt, Y: a.Heads + a.KVHeads}, driver.Dim3{X: max(32, ceilDiv(r.Dims/2, 32)*32)}, 0,
		driver.P(qs.p), driver.P(ks.p), driver.P(vs.p), driver.P(ps.p), driver.P(ff), driver.I(a.Heads), driver.I(a.KVHeads),
		driver.I(hd), driver.I(r.Dims), driver.I(neox), driver.F(r.Base), driver.F(r.FreqScale),
		driver.P(kc), driver.P(vc), driver.P(kd), driver.P(vd), driver.I(kv.spec.Ctx), driver.P(b.errWord))
}

// Attention: causal softmax(q·Kᵀ·Scale)·V over positions 0..pos[i], split-K (attn.cu).
func (b *Backend) Attention(dst, q backend.Buffer, kvx backend.KV, layer int, pos backend.Buffer, nt int, a backend.Attn) {
	checkNT(nt, "Attention")
	kv := kvOf(kvx, "Attention")
	if err := checkAttn(kv, layer, a); err != nil {
		b.failf("Attention: %v", err)
		return
	}
	hd := a.HeadDim
	ds, qs := f32(dst, nt*a.Heads*hd, "Attention dst"), f32(q, nt*a.Heads*hd, "Attention q")
	ps := i32(pos, nt, "Attention pos")
	defer b.enter()()
	if b.flash(kv, nt, hd) {
		ds.wrote()
		b.attnFlash(ds.p, qs.p, ps.p, kv, layer, nt, a)
		return
	}
	part := b.scratchFor("attn", int64(nt)*int64(a.Heads)*int64(kv.nsplit)*int64(hd+2)*4)
	if part == 0 {
		return
	}
	kc, vc, kd, vd := kv.layerPtrs(layer)
	chunk, nsplit, maxChunk := b.attnParams(kv, nt)
	var sq, sd driver.DevicePtr
	if hd%32 == 0 {
		sq, sd = b.shadow(ds)
	}
	cache := "_f16"
	if kv.spec.Type != backend.KVF16 {
		cache = "_q8"
	}
	cacheArgs := []driver.Arg{driver.P(kc), driver.P(kd), driver.P(vc), driver.P(vd)} // the fused kernels' form
	rest := []driver.Arg{driver.P(ps.p), driver.P(part), driver.I(a.Heads), driver.I(a.KVHeads), driver.I(hd), driver.I(chunk),
		driver.I(nsplit), driver.F(a.Scale), driver.I(kv.spec.Ctx), driver.P(b.errWord)}
	if b.combineFused(nt, a) {
		kernel, grid, shared := b.attnPartShape("attn_part", a, nt, nsplit, maxChunk, true)
		args := slices.Concat([]driver.Arg{driver.P(qs.p)}, cacheArgs, rest,
			[]driver.Arg{driver.P(b.attnCnt), driver.P(ds.p), driver.P(sq), driver.P(sd)})
		b.launch(kernel+cache, grid, driver.Dim3{X: 128}, shared, args...)
	} else {
		kernel, grid, shared := b.attnPartShape("attn_part", a, nt, nsplit, maxChunk, false)
		if cache == "_f16" { // attn_part_f16 takes no scales
			cacheArgs = []driver.Arg{driver.P(kc), driver.P(vc)}
		}
		b.launch(kernel+cache, grid, driver.Dim3{X: 128}, shared, slices.Concat([]driver.Arg{driver.P(qs.p)}, cacheArgs, rest)...)
		b.launch("attn_combine", driver.Dim3{X: a.Heads, Y: nt}, driver.Dim3{X: rowThreads(min(hd, 256))}, attnCombineShared(1, nsplit),
			driver.P(part), driver.P(ps.p), driver.P(ds.p), driver.I(a.Heads), driver.I(hd), driver.I(chunk), driver.I(nsplit),
			driver.I(kv.spec.Ctx), driver.P(sq), driver.P(sd))
	}
	ds.wrote()
	if sq != 0 {
		b.setShadow(ds, nt*a.Heads*hd)
	}
}

// attnCounters is the arrival counters the fused split-K kernels have (Backend.attnCnt):
// one per row and head of a launch.
const attnCounters = 1 << 16

// combineFused says whether a split-K attention launch of rows rows merges its splits
// in its own last blocks (attn.cu attn_partc_*: one launch a layer instead of two, the
// same bits) rather than in an attn_combine launch: unless MINFER_NO_FUSE_ATTN_COMBINE=1,
// when the launch's rows and heads fit the counters.
func (b *Backend) combineFused(rows int, a backend.Attn) bool {
	return !b.sw.noCombine && rows*a.Heads <= attnCounters
}

// attnGroupMax is attn.cu's ATTN_GMAX: the largest GQA group the grouped kernels take.
const attnGroupMax = 8

// attnGroup says whether a split-K attention launch of rows rows whose largest chunk is
// maxChunk takes the grouped kernels (attn.cu attn_part_grp_*: a block per KV head and
// split instead of per query head), and the group size g (query heads a KV head
// serves) that multiplies its shared memory: for groups of 2 … attnGroupMax heads whose
// g · (hd + maxChunk) floats fit the 48 KB every launch may take, from the tier's
// AttnGroupRows rows (MINFER_ATTN_GROUP=all: from one; MINFER_NO_ATTN_GROUP=1: never).
// The kernels give the same bits, so a row's result does not depend on the choice.
func (b *Backend) attnGroup(a backend.Attn, rows, maxChunk int) (g int, ok bool) {
	g = a.Heads / a.KVHeads
	switch {
	case g < 2 || g > attnGroupMax || attnScoresShared(g, a.HeadDim, maxChunk) > 48<<10 || b.sw.attnGroup == "none":
		return g, false
	case b.sw.attnGroup == "all":
		return g, true
	}
	return g, rows >= b.tier.AttnGroupRows
}

// attnPartShape is a split-K scores launch of rows rows over splits splits whose
// largest chunk is maxChunk: the kernel (base, the per-head kernel's name without its
// cache suffix, or base + "_grp" where attnGroup takes the grouped one; with fused, the
// attn_partc form that also merges the splits), its grid and its dynamic shared memory.
// Attention and AttentionSeqs both launch through it.
func (b *Backend) attnPartShape(base string, a backend.Attn, rows, splits, maxChunk int, fused bool) (string, driver.Dim3, int) {
	if fused {
		base = strings.Replace(base, "attn_part", "attn_partc", 1)
	}
	g, ok := b.attnGroup(a, rows, maxChunk)
	if !ok {
		g = 1
	}
	shared := attnScoresShared(g, a.HeadDim, maxChunk)
	if fused { // the last block's merge reuses the scores' shared memory
		shared = max(shared, attnCombineShared(g, splits))
	}
	if ok {
		return base + "_grp", driver.Dim3{X: a.KVHeads, Y: rows, Z: splits}, shared
	}
	return base, driver.Dim3{X: a.Heads, Y: rows, Z: splits}, shared
}

// attnScoresShared is the shared memory of a split-K block over g query heads (1 for
// the per-head kernels): each head's query and the scores of the launch's largest
// chunk, in floats (attn.cu attn_part_at, attn_part_grp_at).
func attnScoresShared(g, hd, maxChunk int) int { return 4 * g * (hd + maxChunk) }

// attnCombineShared is the shared memory of merging ng heads' splits (attn.cu
// attn_combine_heads: each split's max and sum, and the head's total).
func attnCombineShared(ng, splits int) int { return 4 * ng * (2*splits + 1) }

// attnFlash launches attn_flash_f16_HD for nt rows (queries at q, positions at pos,
// outputs at dst) over kv's layer.
func (b *Backend) attnFlash(dst, q, pos driver.DevicePtr, kv *KV, layer, nt int, a backend.Attn) {
	kc, vc, _, _ := kv.layerPtrs(layer)
	b.launch(fmt.Sprintf("attn_flash_f16_%d", a.HeadDim), driver.Dim3{X: ceilDiv(nt, 64), Y: a.Heads}, driver.Dim3{X: 128}, 0,
		driver.P(q), driver.P(kc), driver.P(vc), driver.P(pos), driver.P(dst), driver.I(a.Heads), driver.I(a.KVHeads),
		driver.I(nt), driver.F(a.Scale), driver.I(kv.spec.Ctx), driver.P(b.errWord))
}

// flash says whether Attention takes the one-pass tensor-core kernel (attn.cu
// attn_flash_f16_HD): prefill calls (the tier's GEMMMinRows rows or more) on an f16
// cache with head dim 64 or 128, sm_80+, unless MINFER_NO_FLASH=1. Its rows are not
// bitwise equal to the split-K kernels' (which serve every call below GEMMMinRows, so
// Caps().IdentityRows holds).
func (b *Backend) flash(kv *KV, nt, hd int) bool {
	return nt >= b.tier.GEMMMinRows && kv.spec.Type == backend.KVF16 && (hd == 64 || hd == 128) &&
		b.ctx.Props.Major >= 8 && !b.sw.noFlash
}

// attnParams are the attention launch's smallest chunk, splits and largest chunk for
// nt rows on cache kv: decode and verify rows split by position (attn.cu); calls of
// GEMMMinRows rows or more (prefill) use fewer, larger splits.
func (b *Backend) attnParams(kv *KV, nt int) (chunk, nsplit, maxChunk int) {
	if nt < b.tier.GEMMMinRows {
		return kv.chunk, kv.nsplit, kv.maxChunk
	}
	chunk = b.tier.AttnPrefillChunk
	nsplit = min(kv.nsplit, ceilDiv(kv.spec.Ctx, chunk))
	return chunk, nsplit, attnChunk(kv.spec.Ctx, nsplit, chunk)
}

// TopK computes each row's k best (value desc, id asc) on the device when k ≤ the
// tier's TopKMaxK, else on the host from the whole rows; NaN ranks below every number.
func (b *Backend) TopK(logits backend.Buffer, nt, n, k int, ids []int32, vals []float32) error {
	if b.closed {
		return errClosed
	}
	checkNT(nt, "TopK")
	l := f32(logits, nt*n, "TopK logits")
	defer b.enter()()
	if err := b.takeErr(); err != nil {
		return err
	}
	if k < 1 || k > n {
		return fmt.Errorf("cuda: TopK: k = %d outside [1, %d]", k, n)
	}
	if len(ids) < nt*k || len(vals) < nt*k {
		panic(fmt.Sprintf("BUG: cuda: TopK: ids/vals hold %d/%d values, need %d", len(ids), len(vals), nt*k))
	}
	if k > b.tier.TopKMaxK {
		return b.topKHost(l, nt, n, k, ids, vals)
	}
	sc := b.scratchFor("topk", int64(8*nt*k))
	if sc == 0 {
		return b.takeErr()
	}
	idp, valp := sc, sc+driver.DevicePtr(4*nt*k)
	b.launch("topk", driver.Dim3{X: nt}, driver.Dim3{X: 1024}, 0, driver.P(l.p), driver.I(n), driver.I(k), driver.P(idp), driver.P(valp))
	if err := b.takeErr(); err != nil {
		return err
	}
	if err := driver.CopyDtoH(unsafe.Slice((*byte)(unsafe.Pointer(&ids[0])), 4*nt*k), idp); err != nil {
		return err
	}
	return driver.CopyDtoH(unsafe.Slice((*byte)(unsafe.Pointer(&vals[0])), 4*nt*k), valp)
}

// topKHost is TopK from the rows copied to the host (k beyond the device's selection).
func (b *Backend) topKHost(l *Buffer, nt, n, k int, ids []int32, vals []float32) error {
	return b.eachHostRow(l, nt, n, func(r int, row []float32, order []int32) {
		for j := range k {
			ids[r*k+j], vals[r*k+j] = order[j], row[order[j]]
		}
	})
}

// eachHostRow copies each of nt rows of l (n values) to the host and calls f with the
// row and its column ids in the candidate order (backend.SortCandidates).
func (b *Backend) eachHostRow(l *Buffer, nt, n int, f func(r int, row []float32, order []int32)) error {
	row := make([]float32, n)
	idx := make([]int32, n)
	for r := range nt {
		if err := driver.CopyDtoH(unsafe.Slice((*byte)(unsafe.Pointer(&row[0])), 4*n), l.at(r*n)); err != nil {
			return err
		}
		backend.SortCandidates(row, idx)
		f(r, row, idx)
	}
	return nil
}

// Run replays the graph captured for key, capturing it (by calling record) on first
// use. record must only enqueue ops (no ReadF32, TopK or Sync) and use the same buffers
// on every call with that key. With MINFER_NO_GRAPHS=1, or an empty key, record runs
// every time.
func (b *Backend) Run(key string, record func()) error {
	if b.closed {
		return errClosed
	}
	defer b.enter()()
	if b.sw.noGraphs || key == "" {
		record()
		b.flush()
		return nil
	}
	b.epoch++
	defer func() { b.epoch++ }()
	if g := b.graphs[key]; g != nil {
		return g.Launch(b.stream)
	}
	g, err := b.capture(key, record)
	if err != nil {
		return err
	}
	b.graphs[key] = g
	return g.Launch(b.stream)
}

// capture records the ops record enqueues into a graph (Run's and RunSeqs'; bumping
// b.epoch around it is the caller's). An op's error recorded during the capture fails
// it, as the driver's does; an error pending before it stays pending.
func (b *Backend) capture(key string, record func()) (*driver.Graph, error) {
	if err := b.stream.BeginCapture(driver.CaptureRelaxed); err != nil {
		return nil, fmt.Errorf("graph %q: %w", key, err)
	}
	pending := b.err
	b.err = nil
	b.capturing = true
	record()
	b.flush()
	b.capturing = false
	g, err := b.stream.EndCapture()
	if rec := b.err; rec != nil {
		b.err = pending
		if g != nil {
			g.Destroy()
		}
		return nil, fmt.Errorf("graph %q: capture: %w", key, rec)
	}
	b.err = pending
	if err != nil {
		return nil, fmt.Errorf("graph %q: %w", key, err)
	}
	return g, nil
}

// fuseRoPE launches the q/k/v mat-vec with RoPE and the KV store in its epilogue
// (mmvq_KERNELr_NT) in place of the pending mat-vec launches that write q, k and v and
// of rope_store, if there are such: each one launch of the same mat-vec kernel over the
// same x with nt activation rows (their biases folded in or none), an F16 cache, and
// every dimension of a head rotated, at nt = 1 (decode and draft steps: mmvq.cu has
// only that kernel). It reports whether it did; RoPEStoreKV has checked
// the arguments.
func (b *Backend) fuseRoPE(q, k, v, pos *Buffer, kv *KV, layer, nt int, r backend.RoPE, a backend.Attn) bool {
	if b.sw.noFuseRoPE || nt != 1 || b.padd != nil || kv.kd != 0 || r.Dims != a.HeadDim || q == k || q == v || k == v {
		return false
	}
	idx := [3]int{-1, -1, -1}
	for i, mm := range b.pend {
		for j, x := range []*Buffer{q, k, v} {
			if mm.dst == x {
				idx[j] = i
			}
		}
	}
	hd, kvdim := a.HeadDim, a.KVHeads*a.HeadDim
	var ms [3]*mvSpec
	for j, want := range []int{a.Heads * hd, kvdim, kvdim} {
		if idx[j] < 0 {
			return false
		}
		mm := &b.pend[idx[j]]
		if mm.nt != nt || mm.rows != want || len(mm.launches) != 1 || mm.launches[0].mv == nil {
			return false
		}
		m := mm.launches[0].mv
		if m.mmq || m.nt != nt || (j > 0 && (m.kernel != ms[0].kernel || m.xq != ms[0].xq || m.xd != ms[0].xd || m.xf != ms[0].xf || m.cols != ms[0].cols || m.pro != ms[0].pro)) {
			return false
		}
		ms[j] = m
	}
	if pp := b.ppro; pp != nil && ms[0].pro != pp {
		return false // the held producer must launch first
	}
	pend := b.pend[:0]
	for i, mm := range b.pend {
		if i != idx[0] && i != idx[1] && i != idx[2] {
			pend = append(pend, mm)
		}
	}
	b.pend = pend
	defer b.enter()() // launches the other pending matmuls (independent of these three)
	ff, neox, ok := b.ropeArgs(r)
	if !ok {
		return true // b.err is set
	}
	q.wrote()
	k.wrote()
	kc, vc, _, _ := kv.layerPtrs(layer)
	warps := b.tier.MMVQWarps
	m := *ms[0]
	m.sets = []mvSet{ms[0].sets[0], ms[1].sets[0], ms[2].sets[0]}
	m.proWrite = ms[0].proWrite || ms[1].proWrite || ms[2].proWrite
	blocks := 0
	for _, st := range m.sets {
		blocks += ceilDiv(st.rows/2, warps)
	}
	pro := m.pro
	m.pro = nil // its arguments come after the rope ones
	args := append(m.args(), driver.P(pos.p), driver.P(ff), driver.I(hd), driver.I(neox), driver.F(r.Base), driver.F(r.FreqScale),
		driver.P(kc), driver.P(vc), driver.I(kv.spec.Ctx), driver.P(b.errWord))
	name, shared := fmt.Sprintf("mmvq_%sr_%d", m.kernel, nt), 0
	if pro != nil {
		args = append(args, pro.args(m.proWrite)...)
		name, shared = proName(name), proShared(m.cols)
	}
	b.launch(name, driver.Dim3{X: blocks}, driver.Dim3{X: 32 * warps}, shared, args...)
	return true
}
