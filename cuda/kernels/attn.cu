// attn.cu: causal attention over the cache, split-K. attn_part: block (head h, row r,
// split s) scores positions [s*c, min((s+1)*c, p1)) of the p1 = pos[r]+1 positions row r
// sees, c = split_chunk(p1, nsplit, minchunk), and writes the partial (max m, sum l,
// unnormalised output acc[hd]). attn_combine merges the splits of (r, h) in order. The
// chunk depends only on the row's position and the cache size (nsplit), never on nt, so
// each row has the same bits whatever the batch; and a short context is spread over
// several blocks of ≥ minchunk positions instead of one. attn_combine also writes the
// output's 8-bit form when q is not null (hd % 32 == 0).
#include "common.cuh"

template <bool Q8>
static __device__ __forceinline__ float kv_at(const void *c, const u16 *cd, i64 idx) {
    if (Q8) return (float)((const i8 *)c)[idx] * h2f(cd[idx / 32]);
    return h2f(((const u16 *)c)[idx]);
}

// split_chunk is the positions per split for a row seeing p1 positions: p1 spread over
// nsplit splits, rounded up to a multiple of 32, at least minchunk (core/backend/cuda
// attnChunk mirrors it).
static __device__ __forceinline__ int split_chunk(int p1, int nsplit, int minchunk) {
    const int c = ((p1 + nsplit - 1) / nsplit + 31) / 32 * 32;
    return c > minchunk ? c : minchunk;
}

// Dynamic shared memory: (hd + the largest chunk) floats. 128 threads.
template <bool Q8>
static __device__ void attn_part(const float *q, const void *kc, const u16 *kd, const void *vc, const u16 *vd,
                                 const int *pos, float *part, int heads, int kvheads, int hd, int chunk,
                                 int nsplit, float scale, int ctx, int *err) {
    extern __shared__ float sm[];
    __shared__ float red[32];
    float *sq = sm, *ss = sm + hd;
    const int h = blockIdx.x, r = blockIdx.y, s = blockIdx.z;
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
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, nw = blockDim.x / WARP;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) sq[d] = q[((i64)r * heads + h) * hd + d];
    __syncthreads();
    for (int i = warp; i < n; i += nw) {
        const i64 base = (i64)(start + i) * kvdim + (i64)kvh * hd;
        float dot = 0.0f;
        for (int d = lane; d < hd; d += WARP) dot += sq[d] * kv_at<Q8>(kc, kd, base + d);
        dot = warp_sum(dot);
        if (lane == 0) ss[i] = dot * scale;
    }
    __syncthreads();
    float m = NEG_INF;
    for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, ss[i]);
    m = block_max(m, red);
    float l = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float e = expf(ss[i] - m);
        ss[i] = e;
        l += e;
    }
    l = block_sum(l, red);  // its barriers also publish ss
    float *out = part + (((i64)r * heads + h) * nsplit + s) * (hd + 2);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0.0f;
        for (int i = 0; i < n; i++) acc += ss[i] * kv_at<Q8>(vc, vd, (i64)(start + i) * kvdim + (i64)kvh * hd + d);
        out[2 + d] = acc;
    }
    if (threadIdx.x == 0) { out[0] = m; out[1] = l; }
}

extern "C" __global__ void attn_part_f16(const float *q, const void *kc, const void *vc, const int *pos, float *part,
                                         int heads, int kvheads, int hd, int chunk, int nsplit, float scale, int ctx,
                                         int *err) {
    grid_dep_sync();
    attn_part<false>(q, kc, 0, vc, 0, pos, part, heads, kvheads, hd, chunk, nsplit, scale, ctx, err);
}

extern "C" __global__ void attn_part_q8(const float *q, const void *kc, const u16 *kd, const void *vc, const u16 *vd,
                                        const int *pos, float *part, int heads, int kvheads, int hd, int chunk,
                                        int nsplit, float scale, int ctx, int *err) {
    grid_dep_sync();
    attn_part<true>(q, kc, kd, vc, vd, pos, part, heads, kvheads, hd, chunk, nsplit, scale, ctx, err);
}

// Grid (heads, nt), threads over hd.
extern "C" __global__ void attn_combine(const float *part, const int *pos, float *dst, int heads, int hd, int chunk,
                                        int nsplit, int ctx, i8 *q, float *qd) {
    grid_dep_sync();
    const int h = blockIdx.x, r = blockIdx.y;
    if (pos[r] < 0 || pos[r] >= ctx) {  // recorded by attn_part
        for (int d = threadIdx.x; d < hd; d += blockDim.x) dst[((i64)r * heads + h) * hd + d] = 0.0f;
        return;
    }
    chunk = split_chunk(pos[r] + 1, nsplit, chunk);
    const int ns = pos[r] / chunk + 1;
    const float *p = part + ((i64)r * heads + h) * nsplit * (hd + 2);
    float M = NEG_INF;
    for (int s = 0; s < ns; s++) M = fmaxf(M, p[s * (hd + 2)]);
    float L = 0.0f;
    for (int s = 0; s < ns; s++) L += p[s * (hd + 2) + 1] * expf(p[s * (hd + 2)] - M);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0.0f;
        for (int s = 0; s < ns; s++) acc += p[s * (hd + 2) + 2 + d] * expf(p[s * (hd + 2)] - M);
        const float v = acc / L;
        dst[((i64)r * heads + h) * hd + d] = v;
        if (q) q8_store(v, q, qd, ((i64)r * heads + h) * hd + d);
    }
}
