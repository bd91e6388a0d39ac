package cpu

import (
	"math"
	"unsafe"

	"github.com/minfer/minfer/core/backend"
	"github.com/minfer/minfer/core/quant"
)

// ropeCache fills cache[2i], cache[2i+1] with cos, sin of theta_i for position p, as
// ggml_rope_cache_init does with ext_factor 0 and attn_factor 1: theta starts at p and
// is multiplied by base^(-2/dims) (powf) once per pair, in float32; cos and sin are
// glibc's cosf and sinf, not the correctly rounded values.
func ropeCache(cache []float32, p int32, r backend.RoPE) {
	thetaScale := float32(math.Pow(float64(r.Base), float64(float32(-2)/float32(r.Dims))))
	theta := float32(p)
	for i := 0; i < r.Dims/2; i++ {
		ff := float32(1)
		if r.FreqFactors != nil {
			ff = r.FreqFactors[i]
		}
		t := r.FreqScale * (theta / ff)
		cache[2*i] = cosf(t) // libm's cosf/sinf, as ggml (see sincosf.go)
		cache[2*i+1] = sinf(t)
		theta *= thetaScale
	}
}

// ropeHead rotates one head vector in place (ggml's rotate_pairs). GCC contracts
// x0*c - x1*s into fma(x0, c, -(x1*s)) in ggml's build (-ffp-contract=fast): with the
// contraction the synthetic llama F16 goldens match llama.cpp to 2e-6, without it to 4e-3.
func ropeHead(v, cache []float32, mode backend.RoPEMode, dims int) {
	off, stride := 1, 2 // normal: pairs (2i, 2i+1)
	if mode == backend.RoPENeoX {
		off, stride = dims/2, 1 // neox: pairs (i, i+dims/2)
	}
	for i := 0; i < dims/2; i++ {
		c, s := cache[2*i], cache[2*i+1]
		j := i * stride
		x0, x1 := v[j], v[j+off]
		v[j] = fma32(x0, c, -float32(x1*s))
		v[j+off] = fma32(x0, s, float32(x1*c))
	}
}

func checkRoPE(r backend.RoPE, headDim int) string {
	switch {
	case r.Mode != backend.RoPENormal && r.Mode != backend.RoPENeoX:
		return "unknown mode"
	case r.Dims < 2 || r.Dims%2 != 0 || r.Dims > headDim:
		return "rotated dims must be even and in [2, head dim]"
	case r.FreqFactors != nil && len(r.FreqFactors) != r.Dims/2:
		return "freq factors must number dims/2"
	}
	return ""
}

// RoPEStoreKV rotates q and k in place and stores k and v into kv at (layer, pos[i]).
// A position outside [0, Ctx) or a shape that disagrees with the cache is recorded as
// an error and that row is left untouched.
func (b *Backend) RoPEStoreKV(qb, kb, vb backend.Buffer, kvx backend.KV, layer int, posb backend.Buffer, nt int, r backend.RoPE, a backend.Attn) {
	checkNT(nt, "RoPEStoreKV")
	j, ok := b.ropeJob(backend.SeqAttention{Q: qb, K: kb, V: vb, KV: kvx, Pos: posb, NT: nt}, layer, r, a)
	if !ok {
		return
	}
	b.pool.chunksWork(nt*(a.Heads+2*a.KVHeads)*a.HeadDim*8, nt, 1, func(w, lo, hi int) {
		for t := lo; t < hi; t++ {
			b.ropeRow(&j, w, t, layer, r, a)
		}
	})
}

// RoPEStoreKVSeqs is RoPEStoreKV for several sequences' rows, each with its own cache
// and positions (backend.MultiAttention): all their rows are one op, on the workers
// from two rows on (a one-row sequence's rotation and store alone is below the pool's
// serial threshold, so a batch of them ran one after another on the caller). Each row
// is rotated and stored as RoPEStoreKV does it.
func (b *Backend) RoPEStoreKVSeqs(seqs []backend.SeqAttention, layer int, r backend.RoPE, a backend.Attn) {
	jobs := b.ropeJobs[:0]
	total := 0
	for _, sq := range seqs {
		checkNT(sq.NT, "RoPEStoreKVSeqs")
		j, ok := b.ropeJob(sq, layer, r, a)
		if !ok {
			return
		}
		j.first = total
		total += sq.NT
		jobs = append(jobs, j)
	}
	b.ropeJobs = jobs
	fn := func(w, lo, hi int) {
		k := 0
		for t := lo; t < hi; t++ {
			for t >= jobs[k].first+jobs[k].nt {
				k++
			}
			b.ropeRow(&jobs[k], w, t-jobs[k].first, layer, r, a)
		}
	}
	if total >= 2 {
		b.pool.chunks(total, 1, fn)
	} else {
		fn(0, 0, total)
	}
	clear(b.ropeJobs) // drop the buffers' slices
}

// ropeJob is one RoPEStoreKV call's checked arguments.
type ropeJob struct {
	kv        *KV
	q, k, v   []float32
	pos       []int32
	nt, first int // first: RoPEStoreKVSeqs' index of the job's row 0
}

// ropeJob checks one sequence's RoPEStoreKV arguments, failing the backend and
// reporting false if they are bad.
func (b *Backend) ropeJob(sq backend.SeqAttention, layer int, r backend.RoPE, a backend.Attn) (ropeJob, bool) {
	nt := sq.NT
	kv := kvOf(sq.KV, "RoPEStoreKV")
	if err := checkAttn(kv, layer, a); err != nil {
		b.failf("RoPEStoreKV: %v", err)
		return ropeJob{}, false
	}
	if msg := checkRoPE(r, a.HeadDim); msg != "" {
		b.failf("RoPEStoreKV: rope %+v: %s", r, msg)
		return ropeJob{}, false
	}
	hd, r0 := a.HeadDim, sq.Row
	qd, kvd := a.Heads*hd, a.KVHeads*hd
	j := ropeJob{kv: kv, nt: nt,
		q:   f32(sq.Q, (r0+nt)*qd, "RoPEStoreKV q")[r0*qd:],
		k:   f32(sq.K, (r0+nt)*kvd, "RoPEStoreKV k")[r0*kvd:],
		v:   f32(sq.V, (r0+nt)*kvd, "RoPEStoreKV v")[r0*kvd:],
		pos: i32(sq.Pos, r0+nt, "RoPEStoreKV pos")[r0 : r0+nt],
	}
	for _, p := range j.pos {
		if p < 0 || int(p) >= kv.mapped() {
			b.failf("RoPEStoreKV: position %d outside the cache [0, %d)", p, kv.mapped())
			return ropeJob{}, false
		}
	}
	return j, true
}

// ropeRow rotates row t of j's queries and keys and stores its keys and values, on
// worker w.
func (b *Backend) ropeRow(j *ropeJob, w, t, layer int, r backend.RoPE, a backend.Attn) {
	hd := a.HeadDim
	half := r.Dims / 2
	vec := (useAVX512 || useAVX2) && r.Mode == backend.RoPENeoX && half%8 == 0
	sc := &b.workers[w]
	if cap(sc.cache) < 2*r.Dims {
		sc.cache = make([]float32, 2*r.Dims)
	}
	cache := sc.cache[:r.Dims]
	cs, sn := sc.cache[r.Dims:r.Dims+half], sc.cache[r.Dims+half:2*r.Dims]
	rope := func(x []float32) {
		switch {
		case vec && useAVX512:
			ropeNeoXAVX512(&x[0], &cs[0], &sn[0], half)
		case vec:
			ropeNeoXAVX2(&x[0], &cs[0], &sn[0], half)
		default:
			ropeHead(x, cache, r.Mode, r.Dims)
		}
	}
	ropeCache(cache, j.pos[t], r)
	if vec {
		for i := range half {
			cs[i], sn[i] = cache[2*i], cache[2*i+1]
		}
	}
	q, k, v := j.q, j.k, j.v
	for h := range a.Heads {
		rope(q[(t*a.Heads+h)*hd : (t*a.Heads+h+1)*hd])
	}
	for h := range a.KVHeads {
		kr := k[(t*a.KVHeads+h)*hd : (t*a.KVHeads+h+1)*hd]
		rope(kr)
		j.kv.store(layer, h, int(j.pos[t]), kr, v[(t*a.KVHeads+h)*hd:(t*a.KVHeads+h+1)*hd])
	}
}

// store writes one head's key and value (ggml_cpy f32 → f16 or → q8_0).
func (kv *KV) store(layer, head, pos int, k, v []float32) {
	i := kv.vec(layer, head, pos)
	if kv.k16 != nil {
		hd := kv.spec.HeadDim
		kd, vd := kv.k16[i*hd:(i+1)*hd], kv.v16[i*hd:(i+1)*hd]
		for j := range hd {
			kd[j] = quant.F32ToF16(k[j])
			vd[j] = quant.F32ToF16(v[j])
		}
		return
	}
	n := kv.vecBytes
	q8FromFloat(kv.k[i*n:(i+1)*n], k)
	q8FromFloat(kv.v[i*n:(i+1)*n], v)
}

// Attention: dst[i] = softmax(q[i]·Kᵀ·Scale)·V over cache positions 0..pos[i], per head,
// with ggml's one-chunk flash attention numerics (see the package comment).
func (b *Backend) Attention(dst, qb backend.Buffer, kvx backend.KV, layer int, posb backend.Buffer, nt int, a backend.Attn) {
	checkNT(nt, "Attention")
	j, ok := b.attnJob(backend.SeqAttention{Dst: dst, Q: qb, KV: kvx, Pos: posb, NT: nt}, layer, a)
	if !ok {
		return
	}
	b.pool.chunksWork(j.work, j.items, 1, func(w, lo, hi int) {
		for item := lo; item < hi; item++ {
			b.attnItem(&j, w, item, a)
		}
	})
}

// AttentionSeqs is Attention for several sequences' rows, each with its own cache and
// positions, in one pool op (backend.MultiAttention): the items (row, KV head or query
// head) of all sequences are handed out together, so that the workers share a batch's
// attention instead of splitting each sequence's few items between them, op by op.
// Every item is computed as Attention computes it: the same bits.
func (b *Backend) AttentionSeqs(seqs []backend.SeqAttention, layer int, a backend.Attn) {
	if len(seqs) == 0 {
		return
	}
	jobs := b.attnJobs[:0]
	total, work := 0, 0
	for _, sq := range seqs {
		checkNT(sq.NT, "AttentionSeqs")
		j, ok := b.attnJob(sq, layer, a)
		if !ok {
			return
		}
		j.first = total
		total += j.items
		work += j.work
		jobs = append(jobs, j)
	}
	b.attnJobs = jobs
	b.pool.chunksWork(work, total, 1, func(w, lo, hi int) {
		k := 0
		for item := lo; item < hi; item++ {
			for item >= jobs[k].first+jobs[k].items {
				k++
			}
			b.attnItem(&jobs[k], w, item-jobs[k].first, a)
		}
	})
	clear(b.attnJobs) // drop the buffers' slices
}

// attnJob is one Attention call's checked arguments and its items: nt·KVHeads·blocks
// items of up to four query heads sharing a KV head (z4), else nt·Heads single heads.
type attnJob struct {
	kv          *KV
	q, d        []float32
	pos         []int32
	layer       int
	q8dot       func(n int, w, x []byte) float32
	z4          bool
	blocks      int // z4: items per KV head
	avx2        bool
	items, work int
	first       int // AttentionSeqs: the job's first item in the op
}

// attnJob checks one sequence's Attention arguments (failing the backend and
// reporting false if they are bad) and sizes its items.
func (b *Backend) attnJob(sq backend.SeqAttention, layer int, a backend.Attn) (attnJob, bool) {
	nt := sq.NT
	kv := kvOf(sq.KV, "Attention")
	if err := checkAttn(kv, layer, a); err != nil {
		b.failf("Attention: %v", err)
		return attnJob{}, false
	}
	hd := a.HeadDim
	qd := a.Heads * hd
	q := f32(sq.Q, (sq.Row+nt)*qd, "Attention q")
	d := f32(sq.Dst, (sq.DstRow+nt)*qd, "Attention dst")
	if &q[0] == &d[0] {
		panic("BUG: cpu: Attention: dst aliases q")
	}
	q, d = q[sq.Row*qd:(sq.Row+nt)*qd], d[sq.DstRow*qd:(sq.DstRow+nt)*qd]
	pos := i32(sq.Pos, sq.Row+nt, "Attention pos")[sq.Row : sq.Row+nt]
	for t := range nt {
		if p := pos[t]; p < 0 || int(p) >= kv.mapped() {
			b.failf("Attention: position %d outside the cache [0, %d)", p, kv.mapped())
			return attnJob{}, false
		}
	}
	j := attnJob{kv: kv, q: q, d: d, pos: pos, layer: layer, avx2: b.order == OrderAVX2}
	if kv.k16 == nil {
		tr, _ := quant.Q8_0.Lookup()
		if _, j.q8dot = vecDotOf(tr); j.q8dot == nil {
			b.failf("Attention: core/quant has no q8_0 dot product")
			return attnJob{}, false
		}
	}
	for _, p := range pos {
		j.work += (int(p) + 1) * qd
	}
	group := a.Heads / a.KVHeads
	if kv.k16 != nil && useAVX512 && hd == 64 && group >= 2 && !j.avx2 {
		j.z4, j.blocks = true, (group+3)/4 // per KV head
		j.items = nt * a.KVHeads * j.blocks
	} else {
		j.items = nt * a.Heads
	}
	return j, true
}

// attnItem computes item of j on worker w.
func (b *Backend) attnItem(j *attnJob, w, item int, a backend.Attn) {
	hd := a.HeadDim
	group := a.Heads / a.KVHeads
	sc := b.workerScratch(w, hd)
	kv, q, d := j.kv, j.q, j.d
	if j.z4 {
		// Up to four query heads sharing a KV head (attendF16Z4).
		var qs, outs [4][]float32
		t, kvh, blk := item/(a.KVHeads*j.blocks), item/j.blocks%a.KVHeads, item%j.blocks
		h0 := kvh*group + 4*blk
		nh := min(4, (kvh+1)*group-h0)
		for i := range nh {
			r := t*a.Heads + h0 + i
			qs[i], outs[i] = q[r*hd:(r+1)*hd], d[r*hd:(r+1)*hd]
		}
		kv.attendF16Z4(outs[:nh], qs[:nh], sc, j.layer, kvh, int(j.pos[t]), a.Scale)
		return
	}
	t, h := item/a.Heads, item%a.Heads
	qr := q[item*hd : (item+1)*hd]
	out := d[item*hd : (item+1)*hd]
	if kv.k16 != nil {
		kv.attendF16(out, qr, sc, j.layer, h/group, int(j.pos[t]), a.Scale, j.avx2)
	} else {
		kv.attendQ8(out, qr, sc, j.layer, h/group, int(j.pos[t]), a.Scale, j.q8dot)
	}
}

// workerScratch returns worker w's scratch sized for head dim hd.
func (b *Backend) workerScratch(w, hd int) *scratch {
	sc := &b.workers[w]
	if len(sc.acc) < hd {
		sc.q = make([]byte, 2*hd+hd/32*q8_0Bytes+8)
		sc.acc = make([]float32, hd)
		sc.v = make([]float32, hd)
	}
	return sc
}

// attendF16 is ggml_compute_forward_flash_attn_ext_f16_one_chunk for an F16 cache: Q
// rounded to F16, scores by ggml_vec_dot_f16, V accumulated in F16 (every update
// rounded, as ggml_vec_mad_f16 / ggml_vec_scale_f16 store F16). avx2 takes the scores
// in the order of ggml's AVX2 build (OrderAVX2).
func (kv *KV) attendF16(out, q []float32, sc *scratch, layer, head, p int, scale float32, avx2 bool) {
	hd := kv.spec.HeadDim
	acc := sc.acc[:hd]
	clear(acc)
	if (useAVX512 || useAVX2) && hd%64 == 0 && !avx2 {
		kv.attendF16Z(out, q, acc, sc, layer, head, p, scale)
		return
	}
	q16 := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(sc.q))), hd)
	for j, x := range q {
		q16[j] = quant.F32ToF16(x)
	}
	kv.attendF16Loop(out, q16, acc, layer, head, p, scale, avx2)
}

// attendF16Loop is ggml's loop as written, one key at a time.
func (kv *KV) attendF16Loop(out []float32, q16 []uint16, acc []float32, layer, head, p int, scale float32, avx2 bool) {
	dot := dotVecF16
	if avx2 {
		dot = dotVec8F16
	}
	hd := kv.spec.HeadDim
	var S float32
	M := float32(math.Inf(-1))
	kv.runs(layer, head, p+1, func(base, _, c int) {
		for ic := range c {
			kr := kv.k16[(base+ic)*hd : (base+ic+1)*hd]
			s := dot(kr, q16) * scale
			ms, vs := float32(1), float32(1)
			if s > M {
				Mold := M
				M = s
				ms = expf(Mold - M)
				scaleF16(acc, ms)
			} else {
				vs = expf(s - M)
			}
			madF16(acc, kv.v16[(base+ic)*hd:(base+ic+1)*hd], vs)
			S = fma32(S, ms, vs) // S = S*ms + vs, contracted as in ggml's build
		}
	})
	finishAttn(out, acc, S)
}

// attendF16Z is attendF16's loop in passes with the same operations in the same order
// per value: every score (scoresF16AVX512, on the query rounded to F16), then the
// online softmax's running maximum and the argument of each key's exponential, the
// exponentials eight at a time (expfs), the rescale factors ms, weights vs and the sum
// S key by key (softmaxF16), and the F16 accumulation of V (accumVF16…, which rescales
// where ms ≠ 1 as ggml does where the maximum rose: a factor of exactly 1 leaves F16
// values unchanged).
func (kv *KV) attendF16Z(out, q, acc []float32, sc *scratch, layer, head, p int, scale float32) {
	hd := kv.spec.HeadDim
	n := p + 1
	sc.growKeys(n)
	msv, vsv := sc.ms[:n], sc.vs[:n]
	S := kv.softmaxF16(q, sc, layer, head, n, scale, msv, vsv, 1)
	// the accumulation runs block after block on the same acc: the same operations
	// in the same order as over one contiguous run
	kv.runs(layer, head, n, func(base, i, c int) {
		switch {
		case hd == 64 && useAVX512:
			accumVF16x64AVX512(&acc[0], &kv.v16[base*hd], c, &msv[i], &vsv[i])
		case useAVX512:
			accumVF16AVX512(&acc[0], &kv.v16[base*hd], hd, c, &msv[i], &vsv[i])
		case hd == 64:
			accumVF16x64AVX2(&acc[0], &kv.v16[base*hd], c, &msv[i], &vsv[i])
		default:
			accumVF16AVX2(&acc[0], &kv.v16[base*hd], hd, c, &msv[i], &vsv[i])
		}
	})
	finishAttn(out, acc, S)
}

// attendF16Z4 is attendF16Z for up to four query heads of head dim 64 that read the
// same KV head at the same position: out[j] = attention of q[j] for j < len(q) ≤ 4. The
// V accumulations run interleaved in one call (accumVF16x64x4AVX512): each head's chain
// of F16 roundings is serial, and four chains hide each other's latency. A missing head
// gets ms = 1, vs = 0 and is not written.
func (kv *KV) attendF16Z4(out, q [][]float32, sc *scratch, layer, head, p int, scale float32) {
	n := p + 1
	sc.growKeys(n)
	ms4, vs4 := sc.ms4[:4*n], sc.vs4[:4*n]
	var S [4]float32
	for j := range 4 {
		if j < len(q) {
			S[j] = kv.softmaxF16(q[j], sc, layer, head, n, scale, ms4[j:], vs4[j:], 4)
			continue
		}
		for i := j; i < 4*n; i += 4 {
			ms4[i], vs4[i] = 1, 0
		}
	}
	acc := sc.acc4[:4*64]
	clear(acc)
	kv.runs(layer, head, n, func(base, i, c int) {
		accumVF16x64x4AVX512(&acc[0], &kv.v16[base*64], c, &ms4[4*i], &vs4[4*i])
	})
	for j := range q {
		finishAttn(out[j], acc[64*j:64*j+64], S[j])
	}
}

// growKeys sizes the per-key scratch of attendF16Z and attendF16Z4 for n keys.
func (sc *scratch) growKeys(n int) {
	if cap(sc.s) >= n {
		return
	}
	c := max(n, 256)
	sc.s, sc.ms, sc.vs, sc.e = make([]float32, c), make([]float32, c), make([]float32, c), make([]float32, c)
	sc.rise = make([]bool, c)
	sc.ms4, sc.vs4 = make([]float32, 4*c), make([]float32, 4*c)
	sc.acc4 = make([]float32, 4*64)
}

// softmaxF16 is the softmax of attendF16Z for one head over keys 0..n-1 (scratch sized
// by growKeys): it writes key i's ms and vs to ms[i·stride] and vs[i·stride] and
// returns the sum S.
func (kv *KV) softmaxF16(q []float32, sc *scratch, layer, head, n int, scale float32, ms, vs []float32, stride int) float32 {
	hd := kv.spec.HeadDim
	scores, e, rise := sc.s[:n], sc.e[:n], sc.rise[:n]
	q32 := sc.v[:hd] // the query rounded to F16, as float32
	if useAVX512 {
		roundF16AVX512(&q32[0], &q[0], hd)
	} else {
		roundF16AVX2(&q32[0], &q[0], hd)
	}
	kv.runs(layer, head, n, func(base, i, c int) {
		if useAVX512 {
			scoresF16AVX512(&kv.k16[base*hd], &q32[0], hd, c, scale, &scores[i])
		} else {
			scoresF16AVX2(&kv.k16[base*hd], &q32[0], hd, c, scale, &scores[i])
		}
	})
	M := float32(math.Inf(-1))
	for ic, s := range scores {
		if s > M { // the maximum rises: ms = expf(Mold - M), vs = 1
			e[ic], M, rise[ic] = M-s, s, true
		} else { // ms = 1, vs = expf(s - M)
			e[ic], rise[ic] = s-M, false
		}
	}
	expfs(e, e)
	// S = S*ms + vs, contracted as in ggml's build. Where ms is 1 that is S + vs exactly:
	// the sum of two float32 values needs more than float64's 53 bits only when one is
	// below 2⁻²⁸ of the other, and then both roundings give the larger one. The plain
	// add keeps fma32's float64 conversions off the chain for all keys but the rises.
	var S float32
	for ic, x := range e {
		if rise[ic] {
			ms[ic*stride], vs[ic*stride] = x, 1
			S = fma32(S, x, 1)
		} else {
			ms[ic*stride], vs[ic*stride] = 1, x
			S += x
		}
	}
	return S
}

// attendQ8 is the same for a Q8_0 cache: Q quantized to Q8_0 (x86 quantizer), scores
// by the q8_0·q8_0 block dot, V dequantized and accumulated in float32.
func (kv *KV) attendQ8(out, q []float32, sc *scratch, layer, head, p int, scale float32, dot func(int, []byte, []byte) float32) {
	hd := kv.spec.HeadDim
	n := kv.vecBytes
	qq := sc.q[:n]
	q8FromFloat(qq, q)
	acc := sc.acc[:hd]
	clear(acc)
	v32 := sc.v[:hd]
	var S float32
	M := float32(math.Inf(-1))
	kv.runs(layer, head, p+1, func(base, _, c int) {
		for ic := range c {
			s := dot(hd, kv.k[(base+ic)*n:(base+ic+1)*n], qq) * scale
			ms, vs := float32(1), float32(1)
			if s > M {
				Mold := M
				M = s
				ms = expf(Mold - M)
				for j := range acc {
					acc[j] *= ms
				}
			} else {
				vs = expf(s - M)
			}
			dequantQ8_0(v32, kv.v[(base+ic)*n:(base+ic+1)*n])
			for j, x := range v32 {
				acc[j] = fma32(x, vs, acc[j])
			}
			S = fma32(S, ms, vs) // S = S*ms + vs, contracted as in ggml's build
		}
	})
	finishAttn(out, acc, S)
}

// finishAttn writes acc/S (0 when S is 0), as ggml's final ggml_vec_scale_f32.
func finishAttn(out, acc []float32, S float32) {
	var inv float32
	if S != 0 {
		inv = 1 / S
	}
	for j, x := range acc {
		out[j] = x * inv
	}
}

// q8_0Bytes is the size of a Q8_0 block: an F16 scale and 32 int8 values.
const q8_0Bytes = 34

// q8FromFloat quantizes activations or K/V rows to Q8_0 as ggml's x86 build does (for
// the KV cache: ggml_cpy f32 → q8_0 uses the same from_float).
func q8FromFloat(dst []byte, src []float32) {
	tr, _ := quant.Q8_0.Lookup()
	tr.FromFloat(dst, src)
}

// f16Round rounds a float32 to the nearest binary16 value (as a float32).
func f16Round(x float32) float32 { return quant.F16ToF32(quant.F32ToF16(x)) }

// dequantQ8_0 is dequantize_row_q8_0: qs[j]·d.
func dequantQ8_0(dst []float32, src []byte) {
	for i := 0; i*32 < len(dst); i++ {
		blk := src[i*q8_0Bytes : (i+1)*q8_0Bytes]
		d := quant.F16ToF32(uint16(blk[0]) | uint16(blk[1])<<8)
		out := dst[i*32 : (i+1)*32]
		for j := range out {
			out[j] = float32(int8(blk[2+j])) * d
		}
	}
}
