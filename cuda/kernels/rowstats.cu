// rowstats.cu: what a sampler needs of each row of logits[nt][n] instead of the row
// (backend.RowStatser): the k best values and ids (descending, ties to the lower id, NaN
// below every number), the row max (NaN ignored), log Σ exp over the row and the logit
// of one picked column.
//
// Two kernels. rowstats_part: grid (parts, nt), RS_THREADS threads, each block one chunk
// (at most RS_THREADS·RS_VPT values) of a row, read once into registers: the chunk's max,
// Σ exp(x - chunk max) in float32 and its k best, sorted. rowstats_merge: one block per
// row combines the parts' sums (rescaled to the row max) and merges the parts' sorted
// candidate lists. The chunking depends only on n and every reduction has a fixed order,
// so a row's results do not depend on nt or on timing.
//
// Selection works on 64-bit keys (rank_key): larger key = earlier in the candidate
// order, every key of a real element distinct and nonzero, 0 = no candidate. A part
// finds a threshold T such that at least k of its elements have keys ≥ T (the k-th
// best of the 256 per-thread bests, found by sorting each warp's bests and binary
// searches), collects those candidates (at most RS_VPT·k; a little over k on logits-like
// rows) in shared memory and ranks them by counting. The merge stages the parts' sorted
// lists in shared memory; each warp keeps the sorted top 32 or 64 of the lists it has
// seen and folds in each next list with one bitonic merge step (max against the reversed
// list, then log2 clean-up stages), then the warps' lists merge in a tree. k == 1 and
// k > RS_KMAX keep the single-pass and k-pass selections (select_k).
#include "common.cuh"

typedef unsigned long long u64;

#define RS_THREADS 256  // rowstats_part's block size (the launch's)
#define RS_VPT 16       // values per thread: a chunk holds at most RS_THREADS*RS_VPT
#define RS_KMAX 64      // the largest k on the register / bitonic paths
#define RS_RANK_MAX 256 // candidates ranked by counting; more are bitonic-sorted
#define RS_CAND_MAX (RS_VPT * RS_KMAX)

// rank_key orders (v, id) as ranks_before does, as one unsigned integer (larger first):
// the high word is v's bits made monotone (±0 equal, NaN 0 below -Inf), the low word
// ~id. Real ids are < 2^31, so a real key is never 0.
static __device__ __forceinline__ u64 rank_key(float v, int id) {
    u32 o = 0;
    if (v == v) {
        const u32 b = v == 0.0f ? 0u : __float_as_uint(v);
        o = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
    }
    return ((u64)o << 32) | (u64)(~(u32)id);
}

// key_id is the id of a key (-1 for 0, no candidate).
static __device__ __forceinline__ int key_id(u64 key) { return (int)~(u32)key; }

// key_val is the value of a real element's key: rebuilt from the key's high word, or
// read from the row for ±0 (the key lost the sign) and NaN (the payload).
static __device__ __forceinline__ float key_val(u64 key, const float *row) {
    const u32 o = (u32)(key >> 32);
    if (o == 0u || o == 0x80000000u) return row[key_id(key)];
    return __uint_as_float((o & 0x80000000u) ? (o ^ 0x80000000u) : ~o);
}

static __device__ __forceinline__ u64 umax64(u64 a, u64 b) { return a > b ? a : b; }
static __device__ __forceinline__ u64 umin64(u64 a, u64 b) { return a < b ? a : b; }

static __device__ __forceinline__ u64 shfl_xor64(u64 v, int o) {
    const u32 lo = __shfl_xor_sync(0xffffffffu, (u32)v, o);
    const u32 hi = __shfl_xor_sync(0xffffffffu, (u32)(v >> 32), o);
    return ((u64)hi << 32) | lo;
}

// Part record per (row, part): k ids, k values, then max, sum and a NaN flag (floats).
// The ids and values are the part's k best in order (id -1, value -Inf past its values).
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

// part_topk writes the k best (2 ≤ k ≤ RS_KMAX) of the chunk whose keys thread t holds
// in key[0:RS_VPT] (0: no value) to rid/rval in order; row is the row, for the values.
static __device__ __forceinline__ void part_topk(const u64 *key, int k, const float *row, int *rid, float *rval) {
    __shared__ u64 s_best[RS_THREADS];
    __shared__ u64 s_cand[RS_CAND_MAX];
    __shared__ u64 s_t;
    __shared__ int s_n;
    const int t = threadIdx.x;
    const int lane = t % WARP, w = t / WARP;
    u64 best = 0;
#pragma unroll
    for (int j = 0; j < RS_VPT; j++) best = umax64(best, key[j]);
    // Sort the warp's bests (descending, bitonic): lane l then holds the warp's l-th.
#pragma unroll
    for (int size = 2; size <= WARP; size *= 2) {
#pragma unroll
        for (int o = size / 2; o > 0; o /= 2) {
            const u64 x = shfl_xor64(best, o);
            best = (((lane & o) == 0) == ((lane & size) == 0)) ? umax64(best, x) : umin64(best, x);
        }
    }
    s_best[t] = best;
    if (t == 0) { s_t = 0; s_n = 0; }
    __syncthreads();
    // T = the k-th best of the threads' bests: its rank (how many are better) is its
    // lane plus, for every other warp, how many of that warp's sorted bests are better
    // (a binary search). With fewer than k real bests (a chunk shorter than k) no real
    // best has rank k-1 and T stays 0 (0 keys may write 0): every value is a candidate.
    // Else exactly k threads have a best ≥ T, so there are at most RS_VPT·k candidates.
    int rank = lane;
#pragma unroll
    for (int u = 0; u < RS_THREADS / WARP; u++) {
        if (u == w) continue;
        const u64 *list = s_best + u * WARP;
        int c = 0;  // how many of list[0:31] are better, then list[31]
#pragma unroll
        for (int step = WARP / 2; step > 0; step /= 2) {
            if (list[c + step - 1] > best) c += step;
        }
        rank += c + (list[WARP - 1] > best);
    }
    if (rank == k - 1) s_t = best;
    __syncthreads();
    const u64 th = s_t;
    // Collect the candidates: a warp scan of the threads' counts, one atomic per warp.
    int cnt = 0;
#pragma unroll
    for (int j = 0; j < RS_VPT; j++) cnt += key[j] != 0 && key[j] >= th;
    int inc = cnt;
#pragma unroll
    for (int o = 1; o < WARP; o *= 2) {
        const int y = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += y;
    }
    int base = 0;
    if (lane == WARP - 1) base = atomicAdd(&s_n, inc);
    int pos = __shfl_sync(0xffffffffu, base, WARP - 1) + inc - cnt;
#pragma unroll
    for (int j = 0; j < RS_VPT; j++) {
        if (key[j] != 0 && key[j] >= th) {
            if (pos < RS_CAND_MAX) s_cand[pos] = key[j];
            pos++;
        }
    }
    __syncthreads();
    const int c = min(s_n, RS_CAND_MAX);
    if (c <= RS_RANK_MAX) {
        // Each candidate's place is how many candidates are better (keys are distinct).
        // q adjacent threads count for one candidate (q uniform, so every lane shuffles).
        const int q = c <= RS_THREADS / 4 ? 4 : c <= RS_THREADS / 2 ? 2 : 1, x = t / q;
        const u64 mine = x < c ? s_cand[x] : 0;
        int r = 0;
        for (int u = t % q; u < c; u += q) r += s_cand[u] > mine;
        if (q >= 2) r += __shfl_xor_sync(0xffffffffu, r, 1);
        if (q >= 4) r += __shfl_xor_sync(0xffffffffu, r, 2);
        if (t % q == 0 && x < c && r < k) {
            rid[r] = key_id(mine);
            rval[r] = key_val(mine, row);
        }
    } else {
        // Bitonic sort (descending) of the candidates padded with 0 to a power of two.
        int p2 = RS_RANK_MAX * 2;
        while (p2 < c) p2 *= 2;
        for (int u = c + t; u < p2; u += RS_THREADS) s_cand[u] = 0;
        __syncthreads();
        for (int size = 2; size <= p2; size *= 2) {
            for (int stride = size / 2; stride > 0; stride /= 2) {
                for (int x = t; x < p2 / 2; x += RS_THREADS) {
                    const int i = ((x & ~(stride - 1)) << 1) | (x & (stride - 1)), j = i + stride;
                    const u64 a = s_cand[i], b = s_cand[j];
                    if ((a < b) == ((i & size) == 0)) { s_cand[i] = b; s_cand[j] = a; }
                }
                __syncthreads();
            }
        }
        if (t < k) {
            rid[t] = key_id(s_cand[t]);
            rval[t] = key_val(s_cand[t], row);
        }
    }
    if (t >= c && t < k) { rid[t] = -1; rval[t] = NEG_INF; }
}

extern "C" __global__ void rowstats_part(const float *logits, int n, int k, int chunk, float *part) {
    grid_dep_sync();
    __shared__ float sh[32];
    if (blockDim.x != RS_THREADS || chunk > RS_THREADS * RS_VPT) __trap();  // the launch and rowStatsChunk broke the layout
    const int r = blockIdx.y, p = blockIdx.x, parts = gridDim.x, t = threadIdx.x;
    const float *row = logits + (i64)r * n;
    const int lo = p * chunk, hi = min(n, lo + chunk);
    // Thread t holds values lo + t + j·RS_THREADS (the order of the max and sum).
    float v[RS_VPT];
#pragma unroll
    for (int j = 0; j < RS_VPT; j++) {
        const int i = lo + t + j * RS_THREADS;
        v[j] = i < hi ? row[i] : NEG_INF;
    }
    float m = NEG_INF;
    bool nan = false;
#pragma unroll
    for (int j = 0; j < RS_VPT; j++) {
        if (lo + t + j * RS_THREADS < hi) {
            m = fmaxf(m, v[j]);  // fmaxf ignores NaN
            nan |= v[j] != v[j];
        }
    }
    m = block_max(m, sh);
    nan = __syncthreads_or(nan);
    float s = 0.0f;
    if (m != NEG_INF && m != POS_INF) {
#pragma unroll
        for (int j = 0; j < RS_VPT; j++) {
            if (lo + t + j * RS_THREADS < hi && v[j] == v[j]) s += expf(v[j] - m);
        }
    }
    s = block_sum(s, sh);
    float *rec = part + ((i64)r * parts + p) * part_stride(k);
    int *rid = (int *)rec;
    float *rval = rec + k;
    if (t == 0) {
        rval[k] = m;
        rval[k + 1] = s;
        rval[k + 2] = nan ? 1.0f : 0.0f;
    }
    if (k == 0) return;
    if (k == 1) {
        __shared__ float sv[32];
        __shared__ int si[32];
        float bv = NEG_INF;
        int bi = -1;
#pragma unroll
        for (int j = 0; j < RS_VPT; j++) {
            const int i = lo + t + j * RS_THREADS;
            if (i < hi) better(v[j], i, bv, bi);
        }
        block_best(bv, bi, sv, si);
        if (t == 0) {
            rid[0] = bi;
            rval[0] = bi >= 0 ? bv : NEG_INF;
        }
        return;
    }
    if (k > RS_KMAX) {
        RowCand c = {row, lo};
        select_k(c, hi - lo, k, rid, rval);
        return;
    }
    u64 key[RS_VPT];
#pragma unroll
    for (int j = 0; j < RS_VPT; j++) {
        const int i = lo + t + j * RS_THREADS;
        key[j] = i < hi ? rank_key(v[j], i) : 0;
    }
    part_topk(key, k, row, rid, rval);
}

// ListStage holds one thread's share of a round of part lists on their way to shared
// memory: key slot x = t + j·RS_THREADS is slot x % kp of list base + x / kp (kp = 32 or
// 64, the list length; slots past the part's k hold no candidate).
#define RS_STAGE 4096  // keys per round: 64 lists of 64 or 128 of 32
struct ListStage {
    int id[RS_STAGE / RS_THREADS];
    float v[RS_STAGE / RS_THREADS];
};

// stage_load issues the loads of lists base .. base+cnt-1; stage_store waits for them and
// writes the keys to s.
static __device__ __forceinline__ void stage_load(ListStage &st, const float *recs, i64 ps, int k, int kshift, int base,
                                                  int cnt) {
    const int t = threadIdx.x, kp = 1 << kshift;
#pragma unroll
    for (int j = 0; j < RS_STAGE / RS_THREADS; j++) {
        const int x = t + j * RS_THREADS, i = x & (kp - 1);
        st.id[j] = -1;
        st.v[j] = 0.0f;
        if (x < cnt * kp && i < k) {
            const float *rec = recs + (base + (x >> kshift)) * ps;
            st.id[j] = ((const int *)rec)[i];
            st.v[j] = rec[k + i];
        }
    }
}

static __device__ __forceinline__ void stage_store(const ListStage &st, int kshift, int cnt, u64 *s) {
    const int t = threadIdx.x;
#pragma unroll
    for (int j = 0; j < RS_STAGE / RS_THREADS; j++) {
        const int x = t + j * RS_THREADS;
        if (x < cnt << kshift) s[x] = st.id[j] >= 0 ? rank_key(st.v[j], st.id[j]) : 0;
    }
}

// merge_top sets the warp's sorted (descending) list R (element lane in r0 and, when
// long, lane + 32 in r1) to the first 32 or 64 of R ∪ B (B sorted likewise): the max of
// R and reversed B holds exactly those, as a bitonic sequence, then the bitonic
// clean-up stages sort it.
static __device__ __forceinline__ void merge_top(bool long_list, int lane, u64 &r0, u64 &r1, u64 b0, u64 b1) {
    if (long_list) {
        r0 = umax64(r0, shfl_xor64(b1, 31));  // element 63 - lane
        r1 = umax64(r1, shfl_xor64(b0, 31));  // element 31 - lane
        const u64 hi = umax64(r0, r1), lo = umin64(r0, r1);
        r0 = hi;
        r1 = lo;
    } else {
        r0 = umax64(r0, shfl_xor64(b0, 31));
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const bool first = (lane & o) == 0;
        const u64 x0 = shfl_xor64(r0, o);
        r0 = first ? umax64(r0, x0) : umin64(r0, x0);
        if (long_list) {
            const u64 x1 = shfl_xor64(r1, o);
            r1 = first ? umax64(r1, x1) : umin64(r1, x1);
        }
    }
}

// out: ids[nt*k], vals[nt*k], maxv[nt], lse[nt], picked[nt] (4-byte values back to back).
extern "C" __global__ void rowstats_merge(const float *logits, int n, int k, int parts, const float *part,
                                          const int *pick, float *out, int nt) {
    grid_dep_sync();
    __shared__ float sh[32];
    __shared__ u64 s_keys[RS_STAGE];
    if (blockDim.x != RS_THREADS) __trap();  // the launch broke the staging layout
    const int r = blockIdx.x;
    const i64 ps = part_stride(k);
    const float *recs = part + (i64)r * parts * ps;
    // k in [2, RS_KMAX]: the parts' lists go through shared memory in rounds of cap
    // lists; round 0's loads are issued first, to overlap the statistics' loads.
    const bool lists = k >= 2 && k <= RS_KMAX;
    const int kshift = k > WARP ? 6 : 5, cap = RS_STAGE >> kshift;
    ListStage st;
    if (lists) stage_load(st, recs, ps, k, kshift, 0, min(parts, cap));
    float m = NEG_INF;
    bool nan = false;
    for (int p = threadIdx.x; p < parts; p += blockDim.x) {
        m = fmaxf(m, recs[p * ps + 2 * k]);
        nan |= recs[p * ps + 2 * k + 2] != 0.0f;
    }
    if (lists) stage_store(st, kshift, min(parts, cap), s_keys);
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
    if (!lists) {
        PartCand c = {recs, ps, k};
        select_k(c, parts * k, k, ids + (i64)r * k, vals + (i64)r * k);
        return;
    }
    // Warp w folds lists w, w + nw, ... of each round into its sorted list, then the
    // warps' lists merge in a tree (through s_keys, free by then).
    const int lane = threadIdx.x % WARP, w = threadIdx.x / WARP, nw = blockDim.x / WARP, kp = 1 << kshift;
    const bool long_list = k > WARP;
    u64 r0 = 0, r1 = 0;
    bool have = false;
    for (int base = 0; base < parts; base += cap) {
        const int cnt = min(cap, parts - base);
        if (base > 0) {
            __syncthreads();  // the previous round is merged
            stage_load(st, recs, ps, k, kshift, base, cnt);
            stage_store(st, kshift, cnt, s_keys);
        }
        __syncthreads();
        for (int q = w; q < cnt; q += nw) {
            const u64 b0 = s_keys[q * kp + lane], b1 = long_list ? s_keys[q * kp + WARP + lane] : 0;
            if (have) {
                merge_top(long_list, lane, r0, r1, b0, b1);
            } else {
                r0 = b0;
                r1 = b1;
                have = true;
            }
        }
    }
    __syncthreads();
    s_keys[w * 64 + lane] = r0;
    s_keys[w * 64 + WARP + lane] = r1;
    for (int half = 1; half < nw; half *= 2) {
        __syncthreads();
        if ((w & (2 * half - 1)) == 0 && w + half < nw) {
            merge_top(long_list, lane, r0, r1, s_keys[(w + half) * 64 + lane], s_keys[(w + half) * 64 + WARP + lane]);
            s_keys[w * 64 + lane] = r0;
            s_keys[w * 64 + WARP + lane] = r1;
        }
    }
    if (w == 0) {
        const float *row = logits + (i64)r * n;
        int *rid = ids + (i64)r * k;
        float *rval = vals + (i64)r * k;
        if (lane < k) {
            const int id = key_id(r0);
            rid[lane] = id;
            rval[lane] = id >= 0 ? key_val(r0, row) : NEG_INF;
        }
        if (lane + WARP < k) {
            const int id = key_id(r1);
            rid[lane + WARP] = id;
            rval[lane + WARP] = id >= 0 ? key_val(r1, row) : NEG_INF;
        }
    }
}
