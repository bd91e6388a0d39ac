// rowstats.cu: what a sampler needs of each row of logits[nt][n] instead of the row
// (backend.RowStatser): the k best values and ids (descending, ties to the lower id, NaN
// below every number), the row max (NaN ignored), log Σ exp over the row and the logit
// of one picked column.
//
// Two kernels. rowstats_part: grid (parts, nt), each block one chunk of a row: the
// chunk's max, Σ exp(x - chunk max) in float32 and its k best by k selection passes over
// the chunk (a few thousand values, cached after the first pass). rowstats_merge: one
// block per row combines the parts' sums (rescaled to the row max) and selects the k
// best of the parts' candidates. The chunking depends only on n and every reduction has
// a fixed order, so a row's results do not depend on nt or on timing.
#include "common.cuh"

// ranks_before: (v, i) comes before (w, j) in the candidate order (i, j valid ids).
static __device__ __forceinline__ bool ranks_before(float v, int i, float w, int j) {
    const bool vn = v != v, wn = w != w;
    if (vn != wn) return wn;
    if (vn) return i < j;
    return v > w || (v == w && i < j);
}

// better folds candidate (v, i) into the best so far (bv, bi); i < 0 is no candidate.
static __device__ __forceinline__ void better(float v, int i, float &bv, int &bi) {
    if (i >= 0 && (bi < 0 || ranks_before(v, i, bv, bi))) { bv = v; bi = i; }
}

// block_best reduces (bv, bi) over the block; thread 0 gets the result. sv/si hold 32.
static __device__ __forceinline__ void block_best(float &bv, int &bi, float *sv, int *si) {
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nw = blockDim.x / WARP;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        better(ov, oi, bv, bi);
    }
    __syncthreads();  // sv/si of the previous call have been read
    if (lane == 0) { sv[warp] = bv; si[warp] = bi; }
    __syncthreads();
    if (warp == 0) {
        bv = lane < nw ? sv[lane] : NEG_INF;
        bi = lane < nw ? si[lane] : -1;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            better(ov, oi, bv, bi);
        }
    }
}

// select_k writes the k best of the m candidates (val(x), id(x)) for x < m into
// ids[0:k], vals[0:k] (id -1, value -Inf past the candidates). k passes: pass j takes
// the best candidate strictly after pass j-1's pick in the order.
template <typename Cand>
static __device__ void select_k(Cand c, int m, int k, int *ids, float *vals) {
    __shared__ float sv[32];
    __shared__ int si[32];
    __shared__ float pv;
    __shared__ int pi;
    if (threadIdx.x == 0) { pv = 0.0f; pi = -1; }
    __syncthreads();
    for (int j = 0; j < k; j++) {
        const float prev_v = pv;
        const int prev_i = pi;
        float bv = NEG_INF;
        int bi = -1;
        for (int x = threadIdx.x; x < m; x += blockDim.x) {
            const int i = c.id(x);
            if (i < 0) continue;
            const float v = c.val(x);
            if (prev_i < 0 || ranks_before(prev_v, prev_i, v, i)) better(v, i, bv, bi);
        }
        block_best(bv, bi, sv, si);
        if (threadIdx.x == 0) {
            ids[j] = bi;
            vals[j] = bi >= 0 ? bv : NEG_INF;
            if (bi >= 0) { pv = bv; pi = bi; }  // else nothing is left: later passes find none too
        }
        __syncthreads();
    }
}

struct RowCand {
    const float *row;
    int lo;
    __device__ int id(int x) const { return lo + x; }
    __device__ float val(int x) const { return row[lo + x]; }
};

// Part record per (row, part): k ids, k values, then max, sum and a NaN flag (floats).
static __device__ __forceinline__ i64 part_stride(int k) { return 2 * (i64)k + 3; }

// PartCand is the flattened list of a row's part candidates: index x is part x / k,
// slot x % k of the part records at recs.
struct PartCand {
    const float *recs;
    i64 ps;
    int k;
    __device__ int id(int x) const { return ((const int *)recs)[(x / k) * ps + x % k]; }
    __device__ float val(int x) const { return recs[(x / k) * ps + k + x % k]; }
};

extern "C" __global__ void rowstats_part(const float *logits, int n, int k, int chunk, float *part) {
    grid_dep_sync();
    __shared__ float sh[32];
    const int r = blockIdx.y, p = blockIdx.x, parts = gridDim.x;
    const float *row = logits + (i64)r * n;
    const int lo = p * chunk, hi = min(n, lo + chunk);
    float m = NEG_INF;
    bool nan = false;
    for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        const float v = row[i];
        m = fmaxf(m, v);  // fmaxf ignores NaN
        nan |= v != v;
    }
    m = block_max(m, sh);
    nan = __syncthreads_or(nan);
    float s = 0.0f;
    if (m != NEG_INF && m != POS_INF) {
        for (int i = lo + threadIdx.x; i < hi; i += blockDim.x) {
            const float v = row[i];
            if (v == v) s += expf(v - m);
        }
    }
    s = block_sum(s, sh);
    float *rec = part + ((i64)r * parts + p) * part_stride(k);
    int *rid = (int *)rec;
    float *rval = rec + k;
    if (threadIdx.x == 0) {
        rval[k] = m;
        rval[k + 1] = s;
        rval[k + 2] = nan ? 1.0f : 0.0f;
    }
    RowCand c = {row, lo};
    select_k(c, hi - lo, k, rid, rval);
}

// out: ids[nt*k], vals[nt*k], maxv[nt], lse[nt], picked[nt] (4-byte values back to back).
extern "C" __global__ void rowstats_merge(const float *logits, int n, int k, int parts, const float *part,
                                          const int *pick, float *out, int nt) {
    grid_dep_sync();
    __shared__ float sh[32];
    const int r = blockIdx.x;
    const i64 ps = part_stride(k);
    const float *recs = part + (i64)r * parts * ps;
    float m = NEG_INF;
    bool nan = false;
    for (int p = threadIdx.x; p < parts; p += blockDim.x) {
        m = fmaxf(m, recs[p * ps + 2 * k]);
        nan |= recs[p * ps + 2 * k + 2] != 0.0f;
    }
    m = block_max(m, sh);
    nan = __syncthreads_or(nan);
    float s = 0.0f;
    if (m != NEG_INF && m != POS_INF) {
        for (int p = threadIdx.x; p < parts; p += blockDim.x) {
            const float pm = recs[p * ps + 2 * k];
            if (pm != NEG_INF) s += recs[p * ps + 2 * k + 1] * expf(pm - m);
        }
    }
    s = block_sum(s, sh);
    int *ids = (int *)out;
    float *vals = out + (i64)nt * k, *maxv = vals + (i64)nt * k, *lse = maxv + nt, *picked = lse + nt;
    if (threadIdx.x == 0) {
        maxv[r] = m;
        lse[r] = nan ? __int_as_float(0x7fc00000) : (m == NEG_INF || m == POS_INF) ? m : m + logf(s);
        const int c = pick[r];
        picked[r] = c >= 0 ? logits[(i64)r * n + c] : 0.0f;
    }
    if (k == 0) return;
    PartCand c = {recs, ps, k};
    select_k(c, parts * k, k, ids + (i64)r * k, vals + (i64)r * k);
}
