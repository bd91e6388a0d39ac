// attn.cu: causal attention over the cache, split-K. attn_part: block (head h, row r,
// split s) scores positions [s*c, min((s+1)*c, p1)) of the p1 = pos[r]+1 positions row r
// sees, c = split_chunk(p1, nsplit, minchunk), and writes the partial (max m, sum l,
// unnormalised output acc[hd]). attn_combine merges the splits of (r, h) in order. The
// chunk depends only on the row's position and the cache size (nsplit), never on nt, so
// each row has the same bits whatever the batch; and a short context is spread over
// several blocks of ≥ minchunk positions instead of one. attn_combine also writes the
// output's 8-bit form when q is not null (hd % 32 == 0). The *_seqs kernels do the same
// for the rows of several sequences, each against its own cache (seqs.cuh).
#include "common.cuh"
#include "seqs.cuh"

template <bool Q8>
static __device__ __forceinline__ float kv_at(const void *c, const u16 *cd, i64 idx) {
    if (Q8) return (float)((const i8 *)c)[idx] * h2f(cd[idx / 32]);
    return h2f(((const u16 *)c)[idx]);
}

// ATTN_GMAX is the most query heads a KV head may serve for the grouped kernels
// (attn_part_grp_*: 7 in Qwen2.5-7B and -0.5B, 4-8 in most GQA models); a larger group
// keeps attn_part.
#define ATTN_GMAX 8

// ATTN_LP is the lanes that score one cache position together (kv_dots).
#define ATTN_LP 8

// kv_at8 is cache values idx … idx+7 (idx % 8 == 0: one 16-byte or 8-byte load, within
// one Q8_0 block) as kv_at gives them.
template <bool Q8>
static __device__ __forceinline__ void kv_at8(const void *c, const u16 *cd, i64 idx, float *v) {
    if (Q8) {
        const int2 q = *(const int2 *)((const i8 *)c + idx);
        const float d = h2f(cd[idx / 32]);
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = (float)(i8)(((u32)(e < 4 ? q.x : q.y) >> (8 * (e % 4))) & 0xFF) * d;
    } else {
        const uint4 h = *(const uint4 *)((const u16 *)c + idx);
        const u32 w[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = h2f((u16)(w[e / 2] >> (16 * (e % 2))));
    }
}

// kv_dots sets dots[g] (g < ng ≤ NG) to the dot of query g (sq + g·hd, in shared memory)
// with the hd cache values at base, computed by the ATTN_LP lanes of an aligned group
// (j: this lane's index in it; every lane of the warp must call it, valid or not, for
// the shuffles): lane j adds the dimensions of chunks j, j + 8, … of 8 values, in
// order, with fused multiply-adds, and the group adds its lanes with the xor tree 4, 2,
// 1; every lane of the group gets the totals. (A warp a position, with a five-shuffle
// tree a score, and a thread a position, with 128 dependent loads a score at short
// contexts, were both slower: perf-cuda.md v17.) The order is fixed — the same in
// attn_part and attn_part_grp and for every nt — so a row's score has the same bits
// whichever kernel or batch computes it. An invalid lane's sums are zeros.
template <bool Q8, int NG>
static __device__ __forceinline__ void kv_dots(const float *sq, int ng, int hd, const void *kc, const u16 *kd, i64 base,
                                               bool valid, int j, float *dots) {
    float c[NG];
#pragma unroll
    for (int g = 0; g < NG; g++) c[g] = 0.0f;
    for (int d0 = 8 * j; valid && d0 < hd; d0 += 8 * ATTN_LP) {
        float k[8];
        if (hd % 8 == 0) {
            kv_at8<Q8>(kc, kd, base + d0, k);
        } else {
#pragma unroll
            for (int e = 0; e < 8; e++) k[e] = d0 + e < hd ? kv_at<Q8>(kc, kd, base + d0 + e) : 0.0f;
        }
#pragma unroll
        for (int g = 0; g < NG; g++) {
            if (g >= ng) break;
#pragma unroll
            for (int e = 0; e < 8; e++)
                if (hd % 8 == 0 || d0 + e < hd) c[g] = __fmaf_rn(sq[g * hd + d0 + e], k[e], c[g]);
        }
    }
#pragma unroll
    for (int g = 0; g < NG; g++) {
        if (g >= ng) break;  // block-uniform
        float v = c[g];
#pragma unroll
        for (int o = ATTN_LP / 2; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
        dots[g] = v;
    }
}

// warp_softmax turns a split's n scores sg (shared memory) into exp(score − m) in place,
// by one warp, with the bits of a 128-thread block's reduction (block_max, block_sum),
// which the kernels had before it: lane l takes positions l, l + 32, … as the block's
// threads l, l + 32, l + 64 and l + 96 (virtual thread t summing positions t, t + 128, …
// in order, into s[w] for t = l + 32w), each virtual warp's sums go through the xor tree
// (warp_sum), and the four totals add as block_sum adds them, (W0 + W2) + (W1 + W3). (A
// single sum a lane, then one xor tree, fd221db, moved the split-K prefill's perplexity
// from −0.075% to −0.121% of the CPU's, past TestPerplexityVsCPU's 0.1%: perf-cuda.md,
// "What is left".) The max is order-free. One warp a head, so a block of the grouped
// kernel takes its heads' reductions side by side and waits once (a block's two barrier
// pairs a head were most of attn_part_grp's time below 32 rows: perf-cuda.md v17);
// attn_part takes the same steps, so the bits are the same. The caller publishes sg
// with a barrier.
static __device__ __forceinline__ void warp_softmax(float *sg, int n, int lane, float &m, float &l) {
    float mx = NEG_INF;
    for (int i = lane; i < n; i += WARP) mx = fmaxf(mx, sg[i]);
    mx = warp_max(mx);
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};  // (indexed by constants only: registers)
    for (int i0 = lane; i0 < n; i0 += 4 * WARP) {
#pragma unroll
        for (int w = 0; w < 4; w++) {
            const int i = i0 + w * WARP;
            if (i < n) {
                const float e = expf(sg[i] - mx);
                sg[i] = e;
                s[w] = __fadd_rn(s[w], e);
            }
        }
    }
    m = mx;
    const float w0 = warp_sum(s[0]), w1 = warp_sum(s[1]), w2 = warp_sum(s[2]), w3 = warp_sum(s[3]);
    l = __fadd_rn(__fadd_rn(w0, w2), __fadd_rn(w1, w3));
}

// split_chunk is the positions per split for a row seeing p1 positions: p1 spread over
// nsplit splits, rounded up to a multiple of 32, at least minchunk (core/backend/cuda
// attnChunk mirrors it).
static __device__ __forceinline__ int split_chunk(int p1, int nsplit, int minchunk) {
    const int c = ((p1 + nsplit - 1) / nsplit + 31) / 32 * 32;
    return c > minchunk ? c : minchunk;
}

// attn_part_at is block (head h, row r, split s) of attn_part; the partials of a row
// and head sit ps (≥ nsplit) splits apart. Each group of ATTN_LP lanes scores a
// position (kv_dots), one warp takes the scores' max and sum (warp_softmax), and each
// thread sums one output dimension over the positions in order. Dynamic shared memory:
// (hd + the largest chunk) floats. 128 threads.
template <bool Q8>
static __device__ void attn_part_at(const float *q, const void *kc, const u16 *kd, const void *vc, const u16 *vd,
                                    const int *pos, float *part, int heads, int kvheads, int hd, int chunk,
                                    int nsplit, int ps, float scale, int ctx, int *err, int h, int r, int s) {
    extern __shared__ float sm[];
    float *sq = sm, *ss = sm + hd;
    if (pos[r] < 0 || pos[r] >= ctx) {
        if (threadIdx.x == 0 && h == 0 && s == 0) set_error(err, ERR_ATTN_POS, pos[r]);
        return;
    }
    const int p1 = pos[r] + 1;
    chunk = split_chunk(p1, nsplit, chunk);
    const int start = s * chunk;
    if (start >= p1) return;
    const int end = min(start + chunk, p1), n = end - start;
    const int kvh = h / (heads / kvheads), kvdim = kvheads * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) sq[d] = q[((i64)r * heads + h) * hd + d];
    __syncthreads();
    for (int i0 = 0; i0 < n; i0 += blockDim.x / ATTN_LP) {  // block-uniform: kv_dots shuffles
        const int i = i0 + threadIdx.x / ATTN_LP, j = threadIdx.x % ATTN_LP;
        float dot;
        kv_dots<Q8, 1>(sq, 1, hd, kc, kd, (i64)(start + min(i, n - 1)) * kvdim + (i64)kvh * hd, i < n, j, &dot);
        if (i < n && j == 0) ss[i] = __fmul_rn(dot, scale);
    }
    __syncthreads();
    float *out = part + (((i64)r * heads + h) * ps + s) * (hd + 2);
    if (threadIdx.x < WARP) {
        float m, l;
        warp_softmax(ss, n, threadIdx.x, m, l);
        if (threadIdx.x == 0) { out[0] = m; out[1] = l; }
    }
    __syncthreads();
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0.0f;
        for (int i = 0; i < n; i++) acc = __fmaf_rn(ss[i], kv_at<Q8>(vc, vd, (i64)(start + i) * kvdim + (i64)kvh * hd + d), acc);
        out[2 + d] = acc;
    }
}

extern "C" __global__ void attn_part_f16(const float *q, const void *kc, const void *vc, const int *pos, float *part,
                                         int heads, int kvheads, int hd, int chunk, int nsplit, float scale, int ctx,
                                         int *err) {
    grid_dep_sync();
    attn_part_at<false>(q, kc, 0, vc, 0, pos, part, heads, kvheads, hd, chunk, nsplit, nsplit, scale, ctx, err,
                        blockIdx.x, blockIdx.y, blockIdx.z);
}

extern "C" __global__ void attn_part_q8(const float *q, const void *kc, const u16 *kd, const void *vc, const u16 *vd,
                                        const int *pos, float *part, int heads, int kvheads, int hd, int chunk,
                                        int nsplit, float scale, int ctx, int *err) {
    grid_dep_sync();
    attn_part_at<true>(q, kc, kd, vc, vd, pos, part, heads, kvheads, hd, chunk, nsplit, nsplit, scale, ctx, err,
                       blockIdx.x, blockIdx.y, blockIdx.z);
}

// attn_part_grp_at is attn_part_at for the grp = heads / kvheads query heads of KV head
// kvh (heads kvh·grp …) of row r in one block, so each K and V element of the split is
// loaded once for the group instead of once a head, and a launch has grp times fewer
// blocks. (With a warp per position the cache traffic was not what limited attn_part:
// at a 2,048-token context a 16-row forward of Qwen2.5-7B spent 152-153 µs a layer in
// either kernel, perf-cuda.md v17.) Every head's arithmetic is attn_part_at's — kv_dots's
// scores, warp_softmax (a warp a head, the heads side by side), each output's sum over
// the positions in order — so each partial has attn_part_at's bits, whichever kernel a call
// takes. Dynamic shared memory: grp · (hd + the largest chunk) floats. 128 threads.
template <bool Q8>
static __device__ void attn_part_grp_at(const float *q, const void *kc, const u16 *kd, const void *vc, const u16 *vd,
                                        const int *pos, float *part, int heads, int kvheads, int hd, int chunk,
                                        int nsplit, int ps, float scale, int ctx, int *err, int kvh, int r, int s) {
    extern __shared__ float sm[];
    if (pos[r] < 0 || pos[r] >= ctx) {
        if (threadIdx.x == 0 && kvh == 0 && s == 0) set_error(err, ERR_ATTN_POS, pos[r]);
        return;
    }
    const int p1 = pos[r] + 1;
    chunk = split_chunk(p1, nsplit, chunk);
    const int start = s * chunk;
    if (start >= p1) return;
    const int end = min(start + chunk, p1), n = end - start;
    const int grp = heads / kvheads, h0 = kvh * grp, kvdim = kvheads * hd;
    float *sq = sm, *ss = sm + grp * hd;  // head g's query at sq + g·hd, its scores at ss + g·chunk
    for (int i = threadIdx.x; i < grp * hd; i += blockDim.x) sq[i] = q[((i64)r * heads + h0) * hd + i];
    __syncthreads();
    for (int i0 = 0; i0 < n; i0 += blockDim.x / ATTN_LP) {  // block-uniform: kv_dots shuffles
        const int i = i0 + threadIdx.x / ATTN_LP, j = threadIdx.x % ATTN_LP;
        float dot[ATTN_GMAX];
        kv_dots<Q8, ATTN_GMAX>(sq, grp, hd, kc, kd, (i64)(start + min(i, n - 1)) * kvdim + (i64)kvh * hd, i < n, j, dot);
#pragma unroll
        for (int g = 0; g < ATTN_GMAX; g++)
            if (g < grp && i < n && j == 0) ss[g * chunk + i] = __fmul_rn(dot[g], scale);
    }
    __syncthreads();
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    for (int g = warp; g < grp; g += blockDim.x / WARP) {
        float m, l;
        warp_softmax(ss + g * chunk, n, lane, m, l);
        if (lane == 0) {
            float *out = part + (((i64)r * heads + h0 + g) * ps + s) * (hd + 2);
            out[0] = m;
            out[1] = l;
        }
    }
    __syncthreads();
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc[ATTN_GMAX];
#pragma unroll
        for (int g = 0; g < ATTN_GMAX; g++) acc[g] = 0.0f;
        for (int i = 0; i < n; i++) {
            const float v = kv_at<Q8>(vc, vd, (i64)(start + i) * kvdim + (i64)kvh * hd + d);
#pragma unroll
            for (int g = 0; g < ATTN_GMAX; g++)
                if (g < grp) acc[g] = __fmaf_rn(ss[g * chunk + i], v, acc[g]);
        }
#pragma unroll
        for (int g = 0; g < ATTN_GMAX; g++)
            if (g < grp) part[(((i64)r * heads + h0 + g) * ps + s) * (hd + 2) + 2 + d] = acc[g];
    }
}

// attn_part_grp_*: attn_part_* with grid (kvheads, rows, splits), a block per KV head.
extern "C" __global__ void attn_part_grp_f16(const float *q, const void *kc, const void *vc, const int *pos, float *part,
                                             int heads, int kvheads, int hd, int chunk, int nsplit, float scale, int ctx,
                                             int *err) {
    grid_dep_sync();
    attn_part_grp_at<false>(q, kc, 0, vc, 0, pos, part, heads, kvheads, hd, chunk, nsplit, nsplit, scale, ctx, err,
                            blockIdx.x, blockIdx.y, blockIdx.z);
}

extern "C" __global__ void attn_part_grp_q8(const float *q, const void *kc, const u16 *kd, const void *vc, const u16 *vd,
                                            const int *pos, float *part, int heads, int kvheads, int hd, int chunk,
                                            int nsplit, float scale, int ctx, int *err) {
    grid_dep_sync();
    attn_part_grp_at<true>(q, kc, kd, vc, vd, pos, part, heads, kvheads, hd, chunk, nsplit, nsplit, scale, ctx, err,
                           blockIdx.x, blockIdx.y, blockIdx.z);
}

// attn_part_seqs is attn_part over the rows of nseq sequences (seqs.cuh), each row
// against its sequence's cache at layer with its sequence's splits: grid (heads, rows,
// the largest nsplit), partials ps splits apart.
template <bool Q8>
static __device__ void attn_part_seqs(const SeqDesc *seqs, int nseq, int layer, float *part, int heads, int kvheads,
                                      int hd, int ps, float scale, int *err) {
    const SeqDesc &d = seqs[seq_of(seqs, nseq, blockIdx.y)];
    if ((int)blockIdx.z >= d.nsplit) return;
    attn_part_at<Q8>(d.q, layer_at(d.kc, layer, d.layer_vals), layer_at(d.kd, layer, d.layer_scales),
                     layer_at(d.vc, layer, d.layer_vals), layer_at(d.vd, layer, d.layer_scales), d.pos,
                     part + (i64)d.first * heads * ps * (hd + 2), heads, kvheads, hd, d.chunk, d.nsplit, ps, scale,
                     d.ctx, err, blockIdx.x, blockIdx.y - d.first, blockIdx.z);
}

// attn_part_seqs_grp is attn_part_seqs with a block per KV head (attn_part_grp_at):
// grid (kvheads, rows, the largest nsplit).
template <bool Q8>
static __device__ void attn_part_seqs_grp(const SeqDesc *seqs, int nseq, int layer, float *part, int heads,
                                          int kvheads, int hd, int ps, float scale, int *err) {
    const SeqDesc &d = seqs[seq_of(seqs, nseq, blockIdx.y)];
    if ((int)blockIdx.z >= d.nsplit) return;
    attn_part_grp_at<Q8>(d.q, layer_at(d.kc, layer, d.layer_vals), layer_at(d.kd, layer, d.layer_scales),
                         layer_at(d.vc, layer, d.layer_vals), layer_at(d.vd, layer, d.layer_scales), d.pos,
                         part + (i64)d.first * heads * ps * (hd + 2), heads, kvheads, hd, d.chunk, d.nsplit, ps, scale,
                         d.ctx, err, blockIdx.x, blockIdx.y - d.first, blockIdx.z);
}

extern "C" __global__ void attn_part_seqs_grp_f16(const SeqDesc *seqs, int nseq, int layer, float *part, int heads,
                                                  int kvheads, int hd, int ps, float scale, int *err) {
    grid_dep_sync();
    attn_part_seqs_grp<false>(seqs, nseq, layer, part, heads, kvheads, hd, ps, scale, err);
}

extern "C" __global__ void attn_part_seqs_grp_q8(const SeqDesc *seqs, int nseq, int layer, float *part, int heads,
                                                 int kvheads, int hd, int ps, float scale, int *err) {
    grid_dep_sync();
    attn_part_seqs_grp<true>(seqs, nseq, layer, part, heads, kvheads, hd, ps, scale, err);
}

extern "C" __global__ void attn_part_seqs_f16(const SeqDesc *seqs, int nseq, int layer, float *part, int heads,
                                              int kvheads, int hd, int ps, float scale, int *err) {
    grid_dep_sync();
    attn_part_seqs<false>(seqs, nseq, layer, part, heads, kvheads, hd, ps, scale, err);
}

extern "C" __global__ void attn_part_seqs_q8(const SeqDesc *seqs, int nseq, int layer, float *part, int heads,
                                             int kvheads, int hd, int ps, float scale, int *err) {
    grid_dep_sync();
    attn_part_seqs<true>(seqs, nseq, layer, part, heads, kvheads, hd, ps, scale, err);
}

// attn_combine_heads merges the splits of heads h0 … h0 + ng − 1 of row r (partials ps
// splits apart) into dst; the 8-bit shadow, when q is not null, goes to row qrow + r of
// q (the block's threads must be a multiple of 32, and hd % 32 == 0: a warp's 32 values
// are one Q8 block). Every thread of the block calls it. The splits' maxima and sums are
// loaded once into shared memory sm (ng · (2·ns + 1) floats, ns ≤ nsplit the row's
// splits: attnCombineShared); thread g finds head g's max M and turns each split's max
// m into e = exp(m − M) there, summing L = Σ l·e over the splits in order; then each
// output is Σ acc·e over the splits in order, divided by L. So an output's bits depend
// neither on ng nor on the block's size, and the fused kernels (attn_partc_*) give
// attn_combine's. The partials are read from L2 (__ldcg), once each: in the fused
// kernels other blocks of the same launch wrote them.
static __device__ __forceinline__ void attn_combine_heads(const float *part, const int *pos, float *dst, int heads,
                                                          int hd, int chunk, int nsplit, int ps, int ctx, i8 *q,
                                                          float *qd, int h0, int ng, int r, int qrow, float *sm) {
    if (pos[r] < 0 || pos[r] >= ctx) {  // recorded by attn_part
        for (int i = threadIdx.x; i < ng * hd; i += blockDim.x) dst[((i64)r * heads + h0) * hd + i] = 0.0f;
        return;
    }
    chunk = split_chunk(pos[r] + 1, nsplit, chunk);
    const int ns = pos[r] / chunk + 1, st = 2 * ns + 1;  // head g: e at sm[g·st + s], l at + ns, L at + 2·ns
    const float *p0 = part + ((i64)r * heads + h0) * ps * (hd + 2);  // head g, split s at (g·ps + s)·(hd + 2)
    for (int i = threadIdx.x; i < ng * ns; i += blockDim.x) {
        const int g = i / ns, s = i % ns;
        const float *p = p0 + ((i64)g * ps + s) * (hd + 2);
        sm[g * st + s] = __ldcg(p);
        sm[g * st + ns + s] = __ldcg(p + 1);
    }
    __syncthreads();
    if (threadIdx.x < ng) {
        float *e = sm + threadIdx.x * st;
        float M = NEG_INF;
        for (int s = 0; s < ns; s++) M = fmaxf(M, e[s]);
        float L = 0.0f;
        for (int s = 0; s < ns; s++) {
            e[s] = expf(e[s] - M);
            L += e[ns + s] * e[s];
        }
        e[2 * ns] = L;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < ng * hd; i += blockDim.x) {
        const int g = i / hd, d = i % hd;
        const float *p = p0 + (i64)g * ps * (hd + 2) + 2 + d, *e = sm + g * st;
        float acc = 0.0f;
        for (int s = 0; s < ns; s++) acc += __ldcg(p + (i64)s * (hd + 2)) * e[s];
        const float v = acc / e[2 * ns];
        dst[((i64)r * heads + h0 + g) * hd + d] = v;
        if (q) q8_store(v, q, qd, ((i64)(qrow + r) * heads + h0 + g) * hd + d);
    }
}

// attn_last: every thread of a block that has written its split's partials calls it;
// the block that brings the count at cnt to ns (the splits of its row that run) gets
// true, with every other split's partials visible to it, and sets the count back to 0
// for the next launch. The fence-then-count, count-then-fence pattern of a
// last-block reduction (CUDA's threadFenceReduction).
static __device__ __forceinline__ bool attn_last(int *cnt, int ns) {
    __shared__ int last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        last = atomicAdd(cnt, 1) == ns - 1;
        if (last) atomicExch(cnt, 0);
    }
    __syncthreads();
    if (last) __threadfence();
    return last;
}

// attn_partc_at is attn_part_at with the combine in the same launch (issue 19: one
// launch a layer fewer): the last split of (r, heads h0 … h0 + ng − 1) to finish
// (attn_last on cnt) merges them as attn_combine does, with its bits. GRP selects the
// grouped body (a block per KV head: h0 = kvh · grp). A row whose position is outside
// the cache gets attn_combine's zeros from split 0.
template <bool Q8, bool GRP>
static __device__ void attn_partc_at(const float *q, const void *kc, const u16 *kd, const void *vc, const u16 *vd,
                                     const int *pos, float *part, int heads, int kvheads, int hd, int chunk, int nsplit,
                                     int ps, float scale, int ctx, int *err, int hk, int r, int s, int *cnt, float *dst,
                                     i8 *qo, float *qdo, int qrow) {
    const int ng = GRP ? heads / kvheads : 1, h0 = hk * ng;
    if (pos[r] < 0 || pos[r] >= ctx) {
        if (threadIdx.x == 0 && hk == 0 && s == 0) set_error(err, ERR_ATTN_POS, pos[r]);
        if (s == 0) attn_combine_heads(part, pos, dst, heads, hd, chunk, nsplit, ps, ctx, qo, qdo, h0, ng, r, qrow, 0);
        return;
    }
    const int ns = pos[r] / split_chunk(pos[r] + 1, nsplit, chunk) + 1;
    if (s >= ns) return;
    if (GRP)
        attn_part_grp_at<Q8>(q, kc, kd, vc, vd, pos, part, heads, kvheads, hd, chunk, nsplit, ps, scale, ctx, err, hk, r, s);
    else
        attn_part_at<Q8>(q, kc, kd, vc, vd, pos, part, heads, kvheads, hd, chunk, nsplit, ps, scale, ctx, err, hk, r, s);
    if (attn_last(cnt + (i64)r * (heads / ng) + hk, ns)) {  // the scores' shared memory is free again
        extern __shared__ float sm[];
        attn_combine_heads(part, pos, dst, heads, hd, chunk, nsplit, ps, ctx, qo, qdo, h0, ng, r, qrow, sm);
    }
}

// attn_partc_*: attn_part_* and attn_combine in one launch; cnt holds a zero int per
// (row, head) (per (row, KV head) for _grp), left zero after the launch.
#define ATTN_PARTC(name, Q8, GRP)                                                                                     \
    extern "C" __global__ void name(const float *q, const void *kc, const u16 *kd, const void *vc, const u16 *vd,    \
                                    const int *pos, float *part, int heads, int kvheads, int hd, int chunk,          \
                                    int nsplit, float scale, int ctx, int *err, int *cnt, float *dst, i8 *qo,        \
                                    float *qdo) {                                                                    \
        grid_dep_sync();                                                                                             \
        attn_partc_at<Q8, GRP>(q, kc, kd, vc, vd, pos, part, heads, kvheads, hd, chunk, nsplit, nsplit, scale, ctx,  \
                               err, blockIdx.x, blockIdx.y, blockIdx.z, cnt, dst, qo, qdo, 0);                       \
    }
ATTN_PARTC(attn_partc_f16, false, false)
ATTN_PARTC(attn_partc_q8, true, false)
ATTN_PARTC(attn_partc_grp_f16, false, true)
ATTN_PARTC(attn_partc_grp_q8, true, true)

// attn_partc_seqs*: attn_part_seqs* and attn_combine_seqs in one launch; cnt as for
// attn_partc_* over the rows of every sequence.
template <bool Q8, bool GRP>
static __device__ void attn_partc_seqs(const SeqDesc *seqs, int nseq, int layer, float *part, int heads, int kvheads,
                                       int hd, int ps, float scale, int *err, int *cnt, i8 *qo, float *qdo) {
    const SeqDesc &d = seqs[seq_of(seqs, nseq, blockIdx.y)];
    if ((int)blockIdx.z >= d.nsplit) return;
    attn_partc_at<Q8, GRP>(d.q, layer_at(d.kc, layer, d.layer_vals), layer_at(d.kd, layer, d.layer_scales),
                           layer_at(d.vc, layer, d.layer_vals), layer_at(d.vd, layer, d.layer_scales), d.pos,
                           part + (i64)d.first * heads * ps * (hd + 2), heads, kvheads, hd, d.chunk, d.nsplit, ps,
                           scale, d.ctx, err, blockIdx.x, blockIdx.y - d.first, blockIdx.z,
                           cnt + (i64)d.first * (GRP ? kvheads : heads), d.dst, qo, qdo, d.dst_row);
}
#define ATTN_PARTC_SEQS(name, Q8, GRP)                                                                             \
    extern "C" __global__ void name(const SeqDesc *seqs, int nseq, int layer, float *part, int heads, int kvheads, \
                                    int hd, int ps, float scale, int *err, int *cnt, i8 *qo, float *qdo) {        \
        grid_dep_sync();                                                                                          \
        attn_partc_seqs<Q8, GRP>(seqs, nseq, layer, part, heads, kvheads, hd, ps, scale, err, cnt, qo, qdo);      \
    }
ATTN_PARTC_SEQS(attn_partc_seqs_f16, false, false)
ATTN_PARTC_SEQS(attn_partc_seqs_q8, true, false)
ATTN_PARTC_SEQS(attn_partc_seqs_grp_f16, false, true)
ATTN_PARTC_SEQS(attn_partc_seqs_grp_q8, true, true)

// Grid (heads, nt), threads over hd.
extern "C" __global__ void attn_combine(const float *part, const int *pos, float *dst, int heads, int hd, int chunk,
                                        int nsplit, int ctx, i8 *q, float *qd) {
    grid_dep_sync();
    extern __shared__ float sm[];
    attn_combine_heads(part, pos, dst, heads, hd, chunk, nsplit, nsplit, ctx, q, qd, blockIdx.x, 1, blockIdx.y, 0, sm);
}

// attn_combine_seqs is attn_combine over the rows of attn_part_seqs: grid (heads, rows).
extern "C" __global__ void attn_combine_seqs(const SeqDesc *seqs, int nseq, const float *part, int heads, int hd,
                                             int ps, i8 *q, float *qd) {
    grid_dep_sync();
    const SeqDesc &d = seqs[seq_of(seqs, nseq, blockIdx.y)];
    extern __shared__ float sm[];
    attn_combine_heads(part + (i64)d.first * heads * ps * (hd + 2), d.pos, d.dst, heads, hd, d.chunk, d.nsplit, ps,
                       d.ctx, q, qd, blockIdx.x, 1, blockIdx.y - d.first, d.dst_row, sm);
}

// attn_flash_f16_HD: causal attention for many rows (prefill, the backend's
// GEMMMinRows rows or more) over an f16 cache in one pass with online softmax, on the
// tensor cores. Grid (ceil(nt/64), heads), 128 threads: warp w takes rows
// r0 + 16w … r0 + 16w + 15 of the block's 64. The block walks the cache in tiles of 64
// positions up to the largest position its rows see (tiles past it are never loaded);
// K and V tiles sit in shared memory; S = Q·Kᵀ and O += P·V are m16n8k16 mma with f32
// accumulation (q and p rounded to f16). Each row masks the positions past its own. A
// row's result depends on the rows of its 64-row tile only through which tiles are
// loaded, never on timing: no atomics, a fixed order, so a prefill has the same bits run
// to run. dst[r][h][d] = Σ p·v / Σ p; rows whose position is outside the cache are
// recorded (ERR_ATTN_POS) and written as zeros.
#define FA_ROWS 64
#define FA_KEYS 64
template <int HD>
static __device__ void attn_flash(const float *q, const u16 *kc, const u16 *vc, const int *pos, float *dst, int heads,
                                  int kvheads, int nt, float scale, int ctx, int *err) {
    constexpr int LD = HD + 8;  // shared row stride in halves: conflict-free fragment loads
    __shared__ __align__(16) u16 sk[FA_KEYS * LD];
    __shared__ __align__(16) u16 sv[FA_KEYS * LD];
    __shared__ int spos[FA_ROWS];
    const int h = blockIdx.y, r0 = blockIdx.x * FA_ROWS;
    const int kvh = h / (heads / kvheads), kvdim = kvheads * HD;
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, g = lane / 4, t = lane % 4;
    if (threadIdx.x < FA_ROWS) {
        const int r = r0 + threadIdx.x;
        int p = -1;
        if (r < nt) {
            p = pos[r];
            if (p < 0 || p >= ctx) {
                if (h == 0) set_error(err, ERR_ATTN_POS, p);
                p = -1;
            }
        }
        spos[threadIdx.x] = p;
    }
    __syncthreads();
    int bmax = -1, wmax = -1;
    for (int i = 0; i < FA_ROWS; i++) bmax = max(bmax, spos[i]);
    for (int i = 0; i < 16; i++) wmax = max(wmax, spos[warp * 16 + i]);
    const int pa = spos[warp * 16 + g], pb = spos[warp * 16 + g + 8];  // this thread's two rows
    const int ra = r0 + warp * 16 + g, rb = ra + 8;

    // Q fragments (A, row-major 16 × HD): rows ra, rb; k slice kk holds columns
    // 16kk + 2t, +1 (regs 0, 1) and 16kk + 8 + 2t, +1 (regs 2, 3).
    u32 qa[HD / 16][4];
    {
        const float *qra = q + ((i64)(ra < nt ? ra : 0) * heads + h) * HD;
        const float *qrb = q + ((i64)(rb < nt ? rb : 0) * heads + h) * HD;
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++) {
            const int c = 16 * kk + 2 * t;
            qa[kk][0] = pack2(qra[c], qra[c + 1]);
            qa[kk][1] = pack2(qrb[c], qrb[c + 1]);
            qa[kk][2] = pack2(qra[c + 8], qra[c + 9]);
            qa[kk][3] = pack2(qrb[c + 8], qrb[c + 9]);
        }
    }
    float o[HD / 8][4];
#pragma unroll
    for (int j = 0; j < HD / 8; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float ma = NEG_INF, mb = NEG_INF, la = 0.0f, lb = 0.0f;  // running max (log2 units) and partial sums
    const float sl2 = scale * 1.4426950408889634f;

    for (int j0 = 0; j0 <= bmax; j0 += FA_KEYS) {
        __syncthreads();  // the previous tile's readers are done
        // Load K and V positions j0 … j0+63 (16 bytes a thread a step), zeros past the
        // block's last position: the cache there holds whatever its memory held (a NaN's
        // bits too), and a masked position's p = 0 times a NaN value would be NaN.
        for (int i = threadIdx.x; i < FA_KEYS * HD / 8; i += blockDim.x) {
            const int row = i / (HD / 8), c8 = (i % (HD / 8)) * 8, p = j0 + row;
            int4 kv4 = make_int4(0, 0, 0, 0), vv4 = make_int4(0, 0, 0, 0);
            if (p <= bmax) {
                kv4 = *(const int4 *)(kc + (i64)p * kvdim + (i64)kvh * HD + c8);
                vv4 = *(const int4 *)(vc + (i64)p * kvdim + (i64)kvh * HD + c8);
            }
            *(int4 *)(sk + row * LD + c8) = kv4;
            *(int4 *)(sv + row * LD + c8) = vv4;
        }
        __syncthreads();
        if (j0 > wmax) continue;  // every row of this warp is past (or invalid)
        // S = Q·Kᵀ: 8 tiles of 8 positions; c0, c1: row ra, positions 2t, 2t+1; c2, c3: row rb.
        float s[FA_KEYS / 8][4];
#pragma unroll
        for (int n = 0; n < FA_KEYS / 8; n++) {
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
            const u16 *kr = sk + (n * 8 + g) * LD + 2 * t;
#pragma unroll
            for (int kk = 0; kk < HD / 16; kk++) {
                u32 b[2];
                b[0] = *(const u32 *)(kr + 16 * kk);
                b[1] = *(const u32 *)(kr + 16 * kk + 8);
                mma16816(s[n], qa[kk], b);
            }
        }
        // Mask, scale to log2 units, tile maxima.
        float ta = NEG_INF, tb = NEG_INF;
#pragma unroll
        for (int n = 0; n < FA_KEYS / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int kp = j0 + n * 8 + 2 * t + (e & 1);
                const int rp = e < 2 ? pa : pb;
                const float v = kp <= rp ? s[n][e] * sl2 : NEG_INF;
                s[n][e] = v;
                if (e < 2) ta = fmaxf(ta, v);
                else tb = fmaxf(tb, v);
            }
#pragma unroll
        for (int o2 = 1; o2 < 4; o2 <<= 1) {
            ta = fmaxf(ta, __shfl_xor_sync(0xffffffffu, ta, o2));
            tb = fmaxf(tb, __shfl_xor_sync(0xffffffffu, tb, o2));
        }
        const float na = fmaxf(ma, ta), nb = fmaxf(mb, tb);
        const float ua = na == NEG_INF ? 0.0f : na, ub = nb == NEG_INF ? 0.0f : nb;  // all masked so far
        const float aa = exp2f(ma - ua), ab = exp2f(mb - ub);
        ma = na;
        mb = nb;
        la *= aa;
        lb *= ab;
#pragma unroll
        for (int j = 0; j < HD / 8; j++) {
            o[j][0] *= aa;
            o[j][1] *= aa;
            o[j][2] *= ab;
            o[j][3] *= ab;
        }
#pragma unroll
        for (int n = 0; n < FA_KEYS / 8; n++) {
            s[n][0] = exp2f(s[n][0] - ua);
            s[n][1] = exp2f(s[n][1] - ua);
            s[n][2] = exp2f(s[n][2] - ub);
            s[n][3] = exp2f(s[n][3] - ub);
            la += s[n][0] + s[n][1];
            lb += s[n][2] + s[n][3];
        }
        // O += P·V: P's accumulator layout is the A layout of the next mma (k slice kk2
        // = positions 16kk2 … 16kk2+15 = S tiles 2kk2 and 2kk2+1).
#pragma unroll
        for (int kk2 = 0; kk2 < FA_KEYS / 16; kk2++) {
            u32 a[4];
            a[0] = pack2(s[2 * kk2][0], s[2 * kk2][1]);
            a[1] = pack2(s[2 * kk2][2], s[2 * kk2][3]);
            a[2] = pack2(s[2 * kk2 + 1][0], s[2 * kk2 + 1][1]);
            a[3] = pack2(s[2 * kk2 + 1][2], s[2 * kk2 + 1][3]);
            const u16 *v0 = sv + (16 * kk2 + 2 * t) * LD + g;
#pragma unroll
            for (int j = 0; j < HD / 8; j++) {
                // B (16 positions × 8 dims, "col"): b0 = positions 2t, 2t+1 of dim 8j+g; b1 = +8.
                const u16 *vp = v0 + 8 * j;
                u32 b[2];
                b[0] = (u32)vp[0] | ((u32)vp[LD] << 16);
                b[1] = (u32)vp[8 * LD] | ((u32)vp[9 * LD] << 16);
                mma16816(o[j], a, b);
            }
        }
    }
    la += __shfl_xor_sync(0xffffffffu, la, 1);
    la += __shfl_xor_sync(0xffffffffu, la, 2);
    lb += __shfl_xor_sync(0xffffffffu, lb, 1);
    lb += __shfl_xor_sync(0xffffffffu, lb, 2);
    const float ia = pa >= 0 ? 1.0f / la : 0.0f, ib = pb >= 0 ? 1.0f / lb : 0.0f;
#pragma unroll
    for (int j = 0; j < HD / 8; j++) {
        const int d = 8 * j + 2 * t;
        if (ra < nt) {
            float *out = dst + ((i64)ra * heads + h) * HD + d;
            out[0] = o[j][0] * ia;
            out[1] = o[j][1] * ia;
        }
        if (rb < nt) {
            float *out = dst + ((i64)rb * heads + h) * HD + d;
            out[0] = o[j][2] * ib;
            out[1] = o[j][3] * ib;
        }
    }
}

extern "C" __global__ void __launch_bounds__(128) attn_flash_f16_64(const float *q, const u16 *kc, const u16 *vc,
                                                                    const int *pos, float *dst, int heads, int kvheads,
                                                                    int nt, float scale, int ctx, int *err) {
    grid_dep_sync();
    attn_flash<64>(q, kc, vc, pos, dst, heads, kvheads, nt, scale, ctx, err);
}

extern "C" __global__ void __launch_bounds__(128) attn_flash_f16_128(const float *q, const u16 *kc, const u16 *vc,
                                                                     const int *pos, float *dst, int heads, int kvheads,
                                                                     int nt, float scale, int ctx, int *err) {
    grid_dep_sync();
    attn_flash<128>(q, kc, vc, pos, dst, heads, kvheads, nt, scale, ctx, err);
}
