// mmvq.cuh: the mat-vec machinery that mmvq.cu (the first types) and mmvk.cu (the
// types added for issue 25) instantiate with their per-type traits; see mmvq.cu.
#pragma once
#include "common.cuh"

struct Args {
    const void *q, *d, *e;  // weight arrays (layout per type: common.cuh)
    const int *xq;          // quantized activations, as ints (4 values each)
    const float *xd;        // their scales, one per 32 values
    const float *xf;        // f32 activations (F16/F32 weights)
    int cols;
};

static __device__ __forceinline__ int nib_lo(int v) { return v & 0x0F0F0F0F; }
static __device__ __forceinline__ int nib_hi(int v) { return (v >> 4) & 0x0F0F0F0F; }
static __device__ __forceinline__ int sum8(const int *x, int n) {
    int s = 0;
#pragma unroll
    for (int k = 0; k < 8; k++)
        if (k < n) s = dp4a(0x01010101, x[k], s);
    return s;
}
// load4 reads word i of q, 16 bytes: a 32-value block's 4-bit values, as 4 ints.
static __device__ __forceinline__ void load4(const void *q, i64 i, int *x) {
    const int4 v = ((const int4 *)q)[i];
    x[0] = v.x; x[1] = v.y; x[2] = v.z; x[3] = v.w;
}
// q4_dot is the integer dot of a 32-value block's 4-bit values (q[k]: values 4k…4k+3 in
// its low nibbles, 16+4k… in its high ones, as load4 reads them) with an activation
// block; Q4_0 and Q4_1 share it, each applying its own offset or minimum.
static __device__ __forceinline__ int q4_dot(const int *q, const int *x) {
    int s = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) { s = dp4a(nib_lo(q[k]), x[k], s); s = dp4a(nib_hi(q[k]), x[k + 4], s); }
    return s;
}
static __device__ __forceinline__ void load8(const int *p, int *x) {
    const int4 a = ((const int4 *)p)[0], b = ((const int4 *)p)[1];
    x[0] = a.x; x[1] = a.y; x[2] = a.z; x[3] = a.w; x[4] = b.x; x[5] = b.y; x[6] = b.z; x[7] = b.w;
}

// XBlock is one 32-value block of an activation row in its 8-bit form: the values, their
// scale and their sum (for the types whose weights are offset: q - 8, q - 16).
struct XBlock { int x[8]; float d; int sum; };
static __device__ __forceinline__ XBlock xblock(const Args &a, int j, int u) {
    XBlock x;
    load8(a.xq + ((i64)j * a.cols + u * 32) / 4, x.x);
    x.d = a.xd[(i64)j * (a.cols / 32) + u];
    x.sum = sum8(x.x, 8);
    return x;
}

// Pro is a mat-vec prologue (the p kernels, nt = 1): instead of reading x's 8-bit
// form, every block computes it into shared memory from the producer's inputs, so the
// producer's launch is gone. PRO_NORM: x = RMSNorm(a) · b (a the residual row, b the
// norm weight, eps); PRO_GLU: x = silu(a) · b (a gate, b up). Block 0 also writes the
// f32 result to df and its 8-bit form to dq/dd (the buffer and shadow the producer
// would have written) when df is not null.
#define PRO_NORM 1
#define PRO_GLU 2
struct Pro {
    int kind;
    const float *a, *b;
    float eps;
    float *df;
    i8 *dq;
    float *dd;
};

// mv_prologue computes n values (n % 32 == 0) into sq (n int8) and sd (n/32 scales)
// with all of the block's threads, with the bits of rmsnorm / swiglu and q8_store.
// Its inputs are first staged in shared memory (sa, sb: n floats each) in one pass of
// independent loads, so the block waits for L2 about once. The norm's Σ x² replays
// rmsnorm's reduction over rms_threads(n) threads (each thread t's sequential sum over
// t, t + T, …, the xor tree of each warp of T, then the tree over the warp sums),
// warp w of this block taking T's warps w, w + W, …. It ends with __syncthreads.
static __device__ __forceinline__ void mv_prologue(const Pro &p, int n, float *sa, float *sb, i8 *sq, float *sd) {
    __shared__ float sh[32];
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, nw = blockDim.x / WARP;
#pragma unroll 4
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        sa[i] = p.a[i];
        sb[i] = p.b[i];
    }
    __syncthreads();
    float scale = 0.0f;
    if (p.kind == PRO_NORM) {
        const int T = rms_threads(n);
        for (int vw = warp; vw < T / WARP; vw += nw) {
            float s = 0.0f;
            for (int i = vw * WARP + lane; i < n; i += T) s = rms_acc(s, sa[i]);
            s = warp_sum(s);
            if (lane == 0) sh[vw] = s;
        }
        __syncthreads();
        float s = lane < T / WARP ? sh[lane] : 0.0f;
        s = warp_sum(s);
        scale = rms_scale(s, n, p.eps);
    }
    const bool wr = p.df != nullptr && blockIdx.x == 0;
    for (int g = warp; g < n / WARP; g += nw) {
        const int i = g * WARP + lane;
        const float v = p.kind == PRO_NORM ? rms_val(sa[i], scale, sb[i]) : silu_mul(sa[i], sb[i]);
        q8_store(v, sq, sd, i);
        if (wr) {
            p.df[i] = v;
            q8_store(v, p.dq, p.dd, i);
        }
    }
    __syncthreads();
}

// pro_args points a's 8-bit activations at the prologue's shared arrays (dynamic
// shared memory, pro_smem's layout: 2n staging floats, n values, n/32 scales; the
// host's proShared).
static __device__ __forceinline__ Args pro_args(const Args &a, const Pro &p) {
    extern __shared__ int4 pro_smem[];
    float *sa = (float *)pro_smem, *sb = sa + a.cols;
    i8 *sq = (i8 *)(sb + a.cols);
    float *sd = (float *)(sq + a.cols);
    mv_prologue(p, a.cols, sa, sb, sq, sd);
    Args b = a;
    b.xq = (const int *)sq;
    b.xd = sd;
    return b;
}

// mmvq_rows: warp w owns weight rows RW·w … RW·w+RW-1; lane l handles units l, l+32, …
// of them, keeps one accumulator per weight row and activation row, and the warp sums
// each with a fixed xor tree. Each unit of x is loaded once (T::loadx) for all RW rows,
// which divides the activation traffic through L1 by RW. A row's lanes, units and
// summation order depend neither on NT nor on RW, so its bits do not either.
//
// The lane's first weight units are loaded before waiting for x's producer (weights
// never change), so their memory latency overlaps the previous kernel under PDL.
//
// With PRO (the p kernels, NT = 1) x comes from the prologue pro (after the wait, with
// every thread of the block). A non-null res gets each output added (res[row] +=
// dst[row]: the residual add of the backend's Add, fused), with the add kernel's bits.
template <class T, int NT, int RW, bool PRO = false>
static __device__ __forceinline__ void mmvq_rows(const Args &a0, float *dst, int rows, const float *bias, float *res,
                                                 int blk, const Pro *pro = nullptr) {
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const i64 row0 = ((i64)blk * (blockDim.x / WARP) + warp) * RW;
    const int U = T::units(a0.cols);
    typename T::R r[RW] = {};
#pragma unroll
    for (int i = 0; i < RW; i++)
        if (row0 + i < rows && lane < U) r[i] = T::load(a0, row0 + i, lane);
    grid_dep_sync();
    const Args a = PRO ? pro_args(a0, *pro) : a0;
    if (row0 >= rows) return;
    float acc[RW][NT];
#pragma unroll
    for (int i = 0; i < RW; i++)
#pragma unroll
        for (int j = 0; j < NT; j++) acc[i][j] = 0.0f;
    for (int u = lane; u < U; u += WARP) {
        if (u != lane) {
#pragma unroll
            for (int i = 0; i < RW; i++)
                if (row0 + i < rows) r[i] = T::load(a, row0 + i, u);
        }
#pragma unroll
        for (int j = 0; j < NT; j++) {
            const typename T::X xv = T::loadx(a, j, u);
#pragma unroll
            for (int i = 0; i < RW; i++) acc[i][j] = T::fold(acc[i][j], r[i], xv);
        }
    }
#pragma unroll
    for (int i = 0; i < RW; i++) {
        if (row0 + i >= rows) break;  // warp-uniform
#pragma unroll
        for (int j = 0; j < NT; j++) {
            const float s = warp_sum(acc[i][j]);
            if (lane != 0) continue;
            const float y = bias ? fadd_rn(s, bias[row0 + i]) : s;
            dst[(i64)j * rows + row0 + i] = y;
            if (res) res[(i64)j * rows + row0 + i] = fadd_rn(res[(i64)j * rows + row0 + i], y);
        }
    }
}

// Each kernel multiplies one x by up to three weights of the same type and shape class
// (a layer's q, k and v, or gate and up: one launch instead of three): the first
// ceil(rows0 / warps) blocks take set 0, the next set 1, then set 2; a set with 0 rows
// is absent. Every row runs mmvq_rows's code whatever the sets, so its bits are those of a
// one-weight launch.
#define MMVQ_SET(i) \
    const void *q##i, const void *d##i, const void *e##i, float *dst##i, int rows##i, const float *bias##i, float *res##i
// MMVQ_BODY dispatches a block to its set; PRO and PA (the prologue's name or
// nullptr) select mmvq_rows's prologue.
#define MMVQ_BODY(T, N, RW, PRO, PA)                                                        \
    const int rpb = blockDim.x / WARP * RW;                                                 \
    const int nb0 = (rows0 + rpb - 1) / rpb, nb1 = (rows1 + rpb - 1) / rpb;                 \
    int blk = blockIdx.x;                                                                   \
    if (blk < nb0) {                                                                        \
        const Args a = {q0, d0, e0, xq, xd, xf, cols};                                      \
        mmvq_rows<T, N, RW, PRO>(a, dst0, rows0, bias0, res0, blk, PA);                     \
    } else if ((blk -= nb0) < nb1) {                                                        \
        const Args a = {q1, d1, e1, xq, xd, xf, cols};                                      \
        mmvq_rows<T, N, RW, PRO>(a, dst1, rows1, bias1, res1, blk, PA);                     \
    } else {                                                                                \
        blk -= nb1;                                                                         \
        const Args a = {q2, d2, e2, xq, xd, xf, cols};                                      \
        mmvq_rows<T, N, RW, PRO>(a, dst2, rows2, bias2, res2, blk, PA);                     \
    }
// MMVQ1R's kernel takes RW weight rows per warp.
#define MMVQ1R(name, T, N, RW)                                                                              \
    extern "C" __global__ void mmvq_##name##_##N(const int *xq, const float *xd, const float *xf, int cols, \
                                                 MMVQ_SET(0), MMVQ_SET(1), MMVQ_SET(2)) {                   \
        MMVQ_BODY(T, N, RW, false, nullptr)                                                                 \
    }
// The prologue's arguments (Pro), after a p kernel's sets.
#define MMVQ_PRO int pk, const float *pa, const float *pb, float peps, float *pdf, i8 *pdq, float *pdd
// mmvq_NAMEp_1 (and NAMEwp_1, two rows per warp): NT = 1 with x from the prologue
// (dynamic shared memory: cols bytes + cols/32 scales). Only NT = 1 (decode and draft
// steps), which keeps mmvq.cu's NVRTC compile time (≈ 0.3 s per kernel) in bounds.
#define MMVQP1R(name, T, RW)                                                                                \
    extern "C" __global__ void mmvq_##name##p_1(const int *xq, const float *xd, const float *xf, int cols, \
                                                MMVQ_SET(0), MMVQ_SET(1), MMVQ_SET(2), MMVQ_PRO) {          \
        const Pro pro = {pk, pa, pb, peps, pdf, pdq, pdd};                                                  \
        MMVQ_BODY(T, 1, RW, true, &pro)                                                                     \
    }
#define MMVQP(name, T) MMVQP1R(name, T, 1)
#define MMVQWP(name, T) MMVQP1R(name##w, T, 2)
#define MMVQ1(name, T, N) MMVQ1R(name, T, N, 1)
#define MMVQ(name, T) \
    MMVQ1(name, T, 1) MMVQ1(name, T, 2) MMVQ1(name, T, 3) MMVQ1(name, T, 4) \
    MMVQ1(name, T, 5) MMVQ1(name, T, 6) MMVQ1(name, T, 7) MMVQ1(name, T, 8)
// NAMEw: two weight rows per warp, at the nt of the tier's PairRows (ops.go).
#define MMVQW1(name, T, N) MMVQ1R(name##w, T, N, 2)
#define MMVQW(name, T) \
    MMVQW1(name, T, 1) MMVQW1(name, T, 2) MMVQW1(name, T, 3) MMVQW1(name, T, 4) \
    MMVQW1(name, T, 5) MMVQW1(name, T, 6) MMVQW1(name, T, 7) MMVQW1(name, T, 8)

// mmvq_rope is a layer's merged q, k, v mat-vec (sets 0, 1, 2) with RoPE and the F16 KV
// store in its epilogue (the fused path of the backend's q/k/v MatMuls, their AddBias
// and RoPEStoreKV, for rotated dims = head dim hd and an F16 cache). Warp P of a set
// owns the pair of rows that RoPE rotates together, (h·hd + i, h·hd + i + hd/2) for
// NeoX, (h·hd + 2i, h·hd + 2i + 1) otherwise, with h = P / (hd/2) and i = P % (hd/2),
// and computes both with mmvq_rows's lanes, units and xor tree and its bias add, so the
// sums have the unfused launch's bits; lane 0 then rotates q and k pairs with rope_cs
// and rope_rot (rope_store's functions) at pos[j], stores the rows, and writes the k
// and v rows into the cache at pos[j] as rope_store does (a position outside the
// cache is recorded, ERR_KV_POS, and nothing is stored).
template <class T, int NT, bool PRO = false>
static __device__ __forceinline__ void mmvq_rope(const Args &a0, float *dst, int rows, const float *bias, int blk, int set,
                                                 const int *pos, const float *ff, int hd, int neox, float base, float fs,
                                                 u16 *kc, u16 *vc, int ctx, int *err, const Pro *pro = nullptr) {
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const int P = blk * (blockDim.x / WARP) + warp, half = hd / 2, h = P / half, i = P % half;
    const i64 ra = (i64)h * hd + (neox ? i : 2 * i), rb = ra + (neox ? half : 1);
    const bool on = 2 * P < rows;  // rows % hd == 0: both rows of a pair exist
    const int U = T::units(a0.cols);
    typename T::R r0 = {}, r1 = {};
    if (on && lane < U) { r0 = T::load(a0, ra, lane); r1 = T::load(a0, rb, lane); }
    grid_dep_sync();
    const Args a = PRO ? pro_args(a0, *pro) : a0;
    if (!on) return;
    float acc0[NT], acc1[NT];
#pragma unroll
    for (int j = 0; j < NT; j++) { acc0[j] = 0.0f; acc1[j] = 0.0f; }
    for (int u = lane; u < U; u += WARP) {
        if (u != lane) { r0 = T::load(a, ra, u); r1 = T::load(a, rb, u); }
#pragma unroll
        for (int j = 0; j < NT; j++) {
            const typename T::X xv = T::loadx(a, j, u);
            acc0[j] = T::fold(acc0[j], r0, xv);
            acc1[j] = T::fold(acc1[j], r1, xv);
        }
    }
#pragma unroll
    for (int j = 0; j < NT; j++) {
        float y0 = warp_sum(acc0[j]), y1 = warp_sum(acc1[j]);
        if (lane != 0) continue;
        if (bias) { y0 = fadd_rn(y0, bias[ra]); y1 = fadd_rn(y1, bias[rb]); }
        const int p = pos[j];
        if (set < 2) {
            float c, s;
            rope_cs(p, i, hd, base, ff, fs, &c, &s);
            rope_rot(y0, y1, c, s, &y0, &y1);
        }
        dst[(i64)j * rows + ra] = y0;
        dst[(i64)j * rows + rb] = y1;
        if (set == 0) continue;
        if (p < 0 || p >= ctx) {
            if (set == 1 && P == 0) set_error(err, ERR_KV_POS, p);
            continue;
        }
        u16 *c = set == 1 ? kc : vc;
        c[(i64)p * rows + ra] = f2h(y0);
        c[(i64)p * rows + rb] = f2h(y1);
    }
}
#define MMVQR_BODY(T, N, PRO, PA)                                                                         \
    const int ppb = blockDim.x / WARP;                                                                    \
    const int nb0 = (rows0 / 2 + ppb - 1) / ppb, nb1 = (rows1 / 2 + ppb - 1) / ppb;                       \
    int blk = blockIdx.x;                                                                                 \
    if (blk < nb0) {                                                                                      \
        const Args a = {q0, d0, e0, xq, xd, xf, cols};                                                    \
        mmvq_rope<T, N, PRO>(a, dst0, rows0, bias0, blk, 0, pos, ff, hd, neox, base, fs, kc, vc, ctx, err, PA); \
    } else if ((blk -= nb0) < nb1) {                                                                      \
        const Args a = {q1, d1, e1, xq, xd, xf, cols};                                                    \
        mmvq_rope<T, N, PRO>(a, dst1, rows1, bias1, blk, 1, pos, ff, hd, neox, base, fs, kc, vc, ctx, err, PA); \
    } else {                                                                                              \
        blk -= nb1;                                                                                       \
        const Args a = {q2, d2, e2, xq, xd, xf, cols};                                                    \
        mmvq_rope<T, N, PRO>(a, dst2, rows2, bias2, blk, 2, pos, ff, hd, neox, base, fs, kc, vc, ctx, err, PA); \
    }
#define MMVQR_ARGS                                                                                         \
    const int *xq, const float *xd, const float *xf, int cols, MMVQ_SET(0), MMVQ_SET(1), MMVQ_SET(2),      \
        const int *pos, const float *ff, int hd, int neox, float base, float fs, u16 *kc, u16 *vc, int ctx, \
        int *err
#define MMVQR1(name, T, N) \
    extern "C" __global__ void mmvq_##name##r_##N(MMVQR_ARGS) { MMVQR_BODY(T, N, false, nullptr) }
// mmvq_NAMErp_1: the rope kernel with x from the prologue (see MMVQP1R).
#define MMVQRP(name, T)                                                       \
    extern "C" __global__ void mmvq_##name##rp_1(MMVQR_ARGS, MMVQ_PRO) {      \
        const Pro pro = {pk, pa, pb, peps, pdf, pdq, pdd};                    \
        MMVQR_BODY(T, 1, true, &pro)                                          \
    }
// Only NT = 1 (decode and draft steps): instantiated for every NT 1-8, the rope kernels
// took NVRTC minutes to compile (measured on the H200: mmvq.cu did not finish in 140 s).
#define MMVQR(name, T) MMVQR1(name, T, 1)
