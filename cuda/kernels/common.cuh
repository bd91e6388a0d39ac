// common.cuh: types, half conversion, dp4a, reductions and the k-pass top-k selection
// shared by the kernels.
// No CUDA headers are included, so NVRTC needs no include path.
#pragma once

typedef signed char i8;
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;

#include "iq3s_grid.cuh"
#include "iq_grids.cuh"

#define WARP 32
#define POS_INF __int_as_float(0x7f800000)
#define NEG_INF __int_as_float(0xff800000)

// Error codes written to the backend's device error word (first error wins).
#define ERR_EMBED_ID 1
#define ERR_KV_POS 2
#define ERR_ATTN_POS 3

static __device__ __forceinline__ float h2f(u16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

static __device__ __forceinline__ u16 f2h(float f) {
    u16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}

// dp4a: c + dot of the four signed bytes of a and b.
static __device__ __forceinline__ int dp4a(int a, int b, int c) {
    int d;
    asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// block_sum reduces v over the block in a fixed order (warps, then warp 0 over the
// per-warp sums), so the result depends only on blockDim, never on timing.
// sh must hold 32 floats. Every thread gets the result.
static __device__ __forceinline__ float block_sum(float v, float *sh) {
    v = warp_sum(v);
    const int w = threadIdx.x / WARP, l = threadIdx.x % WARP, nw = (blockDim.x + WARP - 1) / WARP;
    __syncthreads();
    if (l == 0) sh[w] = v;
    __syncthreads();
    v = l < nw ? sh[l] : 0.0f;
    v = warp_sum(v);
    return v;
}

static __device__ __forceinline__ float block_max(float v, float *sh) {
    v = warp_max(v);
    const int w = threadIdx.x / WARP, l = threadIdx.x % WARP, nw = (blockDim.x + WARP - 1) / WARP;
    __syncthreads();
    if (l == 0) sh[w] = v;
    __syncthreads();
    v = l < nw ? sh[l] : NEG_INF;
    v = warp_max(v);
    return v;
}

// mma16816: c += a · b for a 16 × 16 f16 tile of a and a 16 × 8 one of b (f32 c). sm_80+
// has m16n8k16; Turing (sm_75) has only m16n8k8, so there it is two of those over the
// k halves (a's registers 0-1 and b's 0 hold k 0-7, a's 2-3 and b's 1 hold k 8-15).
static __device__ __forceinline__ void mma16816(float *c, const u32 *a, const u32 *b) {
#if __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(b[0]));
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[2]), "r"(a[3]), "r"(b[1]));
#endif
}

static __device__ __forceinline__ u32 pack2(float lo, float hi) { return (u32)f2h(lo) | ((u32)f2h(hi) << 16); }

// grid_dep_sync is the first step of every kernel (before any read of another kernel's
// output and before any write): under programmatic dependent launch (sm_90+, the
// backend's Launcher.PDL) a kernel may start while the previous kernel of the stream is
// still running; griddepcontrol.wait blocks until that kernel has finished and its
// writes are visible. launch_dependents then lets the next kernel's blocks be scheduled
// early, so its launch latency hides behind this kernel's work. Launched without PDL,
// both are no-ops. Only reads of data no kernel writes (weights) may precede it.
static __device__ __forceinline__ void grid_dep_sync() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// ranks_before: (v, i) comes before (w, j) in the order of TopK and RowStats: the
// larger value, the lower id on ties, every number ahead of NaN (the CPU backend's
// order; NaNs among themselves by id).
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
// ids[0:k], vals[0:k] (id -1, value -Inf past the candidates) in ranks_before's order.
// k passes: pass j takes the best candidate strictly after pass j-1's pick. Used by
// topk and by rowstats' k-pass paths.
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
        block_best(bv, bi, sv, si);  // its first barrier: every thread has read pv/pi
        if (threadIdx.x == 0) {
            ids[j] = bi;
            vals[j] = bi >= 0 ? bv : NEG_INF;
            if (bi >= 0) { pv = bv; pi = bi; }  // else nothing is left: later passes find none too
        }
        __syncthreads();
    }
}

// RowCand is the candidate list row[lo], row[lo+1], … with ids lo, lo+1, ….
struct RowCand {
    const float *row;
    int lo;
    __device__ int id(int x) const { return lo + x; }
    __device__ float val(int x) const { return row[lo + x]; }
};

static __device__ __forceinline__ void set_error(int *err, int code, int detail) {
    if (atomicCAS(err, 0, code) == 0) err[1] = detail;
}

// q8_store quantizes v, one value per lane, as the 32-value block at element index
// idx - lane (all 32 lanes of the warp must call it together): int8 round(v/d) with
// d = amax/127, the scale written by lane 0. Every producer of mat-vec activations
// (quantize.cu, and the fused epilogues of norm, elementwise and attn) uses it, so an
// activation's 8-bit form is the same whichever kernel made it.
static __device__ __forceinline__ void q8_store(float v, i8 *q, float *qd, i64 idx) {
    const float amax = warp_max(fabsf(v));
    const float dd = amax / 127.0f;
    const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
    q[idx] = (i8)roundf(v * id);
    if ((threadIdx.x % WARP) == 0) qd[idx / 32] = dd;
}

// The RMSNorm and SwiGLU arithmetic, written once with explicit rounding for their
// kernels (norm.cu, elementwise.cu) and the mat-vec prologues that recompute them
// (mmvq.cuh mv_prologue), so --fmad cannot contract them differently in the two and a
// value has the same bits whichever kernel made it. rms_threads is the host's
// rowThreads(n) (ops.go): the block size of rmsnorm, whose reduction order the
// prologue replays.
static __device__ __forceinline__ int rms_threads(int n) { return min(1024, max(32, (n + 31) / 32 * 32)); }
static __device__ __forceinline__ float rms_acc(float s, float v) { return __fmaf_rn(v, v, s); }
static __device__ __forceinline__ float rms_scale(float s, int n, float eps) {
    return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(s, (float)n), eps)));
}
static __device__ __forceinline__ float rms_val(float x, float scale, float w) { return __fmul_rn(__fmul_rn(x, scale), w); }
static __device__ __forceinline__ float silu_mul(float g, float u) {
    return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
}

// rope_cs is RoPE's cos and sin of pair i at position p (ggml's rope cache: theta =
// p · (base^(-2/dims))^i by repeated multiplication, / ff[i] when ff is given, · fs) and
// rope_rot the rotation of the pair (x0, x1). rope.cu and the fused q/k/v mat-vec
// (mmvq.cu) both use them; the explicit rounding keeps --fmad from contracting them
// differently in the two kernels, so a rotated value has the same bits in either.
// rope_cs is not inlined: one copy of its powf, cosf and sinf per module, not one per kernel.
static __device__ __noinline__ void rope_cs(int p, int i, int dims, float base, const float *ff, float fs, float *c,
                                               float *s) {
    const float theta_scale = powf(base, -2.0f / (float)dims);
    float theta = (float)p;
    for (int t = 0; t < i; t++) theta = __fmul_rn(theta, theta_scale);
    if (ff) theta = __fdiv_rn(theta, ff[i]);
    theta = __fmul_rn(theta, fs);
    *c = cosf(theta);
    *s = sinf(theta);
}
static __device__ __forceinline__ void rope_rot(float x0, float x1, float c, float s, float *y0, float *y1) {
    *y0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    *y1 = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

// Row identity across kernels: the mat-vec kernels (mmvq.cu, which serve nt = 1) and the
// small-nt tensor-core kernels (mmq.cu) turn a weight unit's exact integer dots into the
// row's float sum with these functions, in the same order. They are written as PTX with
// explicit rounding (.rn), which the compiler neither contracts nor reorders, so a
// product and a sum round the same way in either kernel.
static __device__ __forceinline__ float fmul_rn(float a, float b) {
    float r;
    asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
static __device__ __forceinline__ float fadd_rn(float a, float b) {
    float r;
    asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
static __device__ __forceinline__ float ffma_rn(float a, float b, float c) {
    float r;
    asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(b), "f"(c));
    return r;
}
static __device__ __forceinline__ float i2f_rn(int v) {
    float r;
    asm("cvt.rn.f32.s32 %0, %1;" : "=f"(r) : "r"(v));
    return r;
}

// fold1 adds a one-scale unit (Q4_0, Q5_0, Q8_0, Q6_K) to acc: its integer dot s (the
// weights' offset already taken out) times the weight scale dw and activation scale dx.
static __device__ __forceinline__ float fold1(float acc, float dw, float dx, int s) {
    return ffma_rn(fmul_rn(dw, dx), i2f_rn(s), acc);
}

// KScale holds a K-quant unit's two parts' d·scale (a1, a2) and dmin·min (b1, b2).
struct KScale { float a1, a2, b1, b2; };
static __device__ __forceinline__ KScale kscale(float d, float dmin, int sca, int ma, int scb, int mb) {
    KScale k;
    k.a1 = fmul_rn(d, i2f_rn(sca));
    k.a2 = fmul_rn(d, i2f_rn(scb));
    k.b1 = fmul_rn(dmin, i2f_rn(ma));
    k.b2 = fmul_rn(dmin, i2f_rn(mb));
    return k;
}

// foldk adds a K-quant unit (Q4_K, Q5_K) to acc: parts a and b with integer dots sa, sb,
// activation sums suma, sumb and activation scales da, db.
static __device__ __forceinline__ float foldk(float acc, const KScale &k, int sa, int sb, int suma, int sumb, float da, float db) {
    const float ta = ffma_rn(k.a1, i2f_rn(sa), -fmul_rn(k.b1, i2f_rn(suma)));
    const float tb = ffma_rn(k.a2, i2f_rn(sb), -fmul_rn(k.b2, i2f_rn(sumb)));
    return ffma_rn(da, ta, ffma_rn(db, tb, acc));
}

// k_scale_min is scale_min_k4 (below) of sub-block k, on a K-quant block's 12 bytes of
// scales held as three words (the block head's words 1-3).
static __device__ __forceinline__ void k_scale_min(int k, u32 w1, u32 w2, u32 w3, int &sc, int &m) {
    const int b = 8 * (k & 3);
    const u32 s1 = (w1 >> b) & 0xFF, s2 = (w2 >> b) & 0xFF, s3 = (w3 >> b) & 0xFF;
    if (k < 4) {
        sc = (int)(s1 & 63);
        m = (int)(s2 & 63);
    } else {
        sc = (int)((s3 & 0xF) | ((s1 >> 6) << 4));
        m = (int)((s3 >> 4) | ((s2 >> 6) << 4));
    }
}

// khead is the KScale of sub-blocks 2j and 2j+1 of the K-quant block at blk, from its
// 16-byte head (d, dmin, the 12 bytes of scales) read in one load.
static __device__ __forceinline__ KScale khead(const u8 *blk, int j) {
    const int4 h = *(const int4 *)blk;
    int sca, ma, scb, mb;
    k_scale_min(2 * j, h.y, h.z, h.w, sca, ma);
    k_scale_min(2 * j + 1, h.y, h.z, h.w, scb, mb);
    return kscale(h2f((u16)(h.x & 0xFFFF)), h2f((u16)((u32)h.x >> 16)), sca, ma, scb, mb);
}

// spread5 moves bits 0-3 of h to bit 4 of bytes 0-3 (Q5_0's fifth bits of 4 values).
static __device__ __forceinline__ int spread5(u32 h) {
    return (int)(((h & 1) << 4) | ((h & 2) << 11) | ((h & 4) << 18) | ((h & 8) << 25));
}

// K-quant 6-bit scale and min j (0..7) of a 12-byte scales field (ggml get_scale_min_k4).
static __device__ __forceinline__ void scale_min_k4(int j, const u8 *q, int &sc, int &m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// prmt is PTX's byte permute: byte n of the result is byte (s >> 4n) & 7 of the pair
// (a: bytes 0-3, b: 4-7). Callers keep each selector nibble below 8 (bit 3 would
// replicate the byte's sign instead).
static __device__ __forceinline__ u32 prmt(u32 a, u32 b, u32 s) {
    u32 r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s));
    return r;
}

// The 16 levels of IQ4_NL and IQ4_XS (ggml's kvalues_iq4nl) as int8 bytes, 4 a word.
#define IQ4_T0 0xbfad9881u
#define IQ4_T1 0xf6eaddcfu
#define IQ4_T2 0x26190d01u
#define IQ4_T3 0x71594535u
// MXFP4's 16 levels (the E2M1 codes doubled, ggml's kvalues_mxfp4), likewise.
#define FP4_T0 0x03020100u
#define FP4_T1 0x0c080604u
#define FP4_T2 0xfdfeff00u
#define FP4_T3 0xf4f8fafcu

// lut4 is the levels of the four 4-bit indices in the low 16 bits of s (nibble n gives
// byte n) in the 16-byte table t0 … t3: indices 0-7 from its first half, 8-15 from its
// second.
static __device__ __forceinline__ u32 lut4(u32 s, u32 t0, u32 t1, u32 t2, u32 t3) {
    const u32 i = s & 0x7777, lo = prmt(t0, t1, i), hi = prmt(t2, t3, i);
    return prmt(lo, hi, 0x3210 | ((s & 0x8888) >> 1));
}
static __device__ __forceinline__ u32 iq4_lut4(u32 s) { return lut4(s, IQ4_T0, IQ4_T1, IQ4_T2, IQ4_T3); }

// nib_at is index i of a 32-value group of 4-bit indices in pack's halves order
// (types.go's nibbleHalves): word k holds values 4k … 4k+3 in its low 16 bits and
// 16+4k … 16+4k+3 in its high ones, four bits each.
static __device__ __forceinline__ int nib_at(const u8 *g, int i) {
    const int j = i % 16, byte = g[4 * (j / 4) + 2 * (i / 16) + (j % 4) / 2];
    return (byte >> (4 * (j % 2))) & 0xF;
}
static __device__ __forceinline__ int iq4_level(int i) { return (int)(i8)(iq4_lut4((u32)i) & 0xFF); }
static __device__ __forceinline__ int fp4_level(int i) { return (int)(i8)(lut4((u32)i, FP4_T0, FP4_T1, FP4_T2, FP4_T3) & 0xFF); }

// e8m0_half is 2^(e-128), MXFP4's E8M0 scale halved (ggml's GGML_E8M0_TO_FP32_HALF; e 0
// and 1 give the subnormals 2^-128 and 2^-127).
static __device__ __forceinline__ float e8m0_half(u32 e) {
    return __int_as_float((int)(e < 2 ? 0x00200000u << e : (e - 1) << 23));
}

// iq3s_dot4 is s plus the dot of a run's four IQ3_S magnitudes (grid word w) with signs
// (bits 0-3 of sn: value k negative when bit k is set) and four activations x: the
// activations of the negative values are complemented (−x − 1) and their magnitudes
// added back.
static __device__ __forceinline__ int iq3s_dot4(u32 w, u32 sn, int x, int s) {
    const u32 m = ((((sn & 0xF) * 0x00204081u) & 0x01010101u) * 0xFFu);  // 0xFF in the bytes of negative values
    return dp4a((int)w, (int)((u32)x ^ m), dp4a((int)w, (int)(m & 0x01010101u), s));
}

// q3k_scale is Q3_K scale is (0..15, the 6-bit value less 32) of a block's 12 scale bytes.
static __device__ __forceinline__ int q3k_scale(const u8 *s, int is) {
    const int lo = is < 8 ? (s[is] & 0xF) : (s[is - 8] >> 4);
    const int hi = (s[8 + is % 4] >> (2 * (is / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

// even_signs is the 8 sign bits of a 7-bit field: bit 7 the parity of the other seven
// (ggml's ksigns_iq2xs).
static __device__ __forceinline__ u32 even_signs(u32 v) {
    v &= 127;
    return v | ((u32)(__popc(v) & 1) << 7);
}

// IQG is one 32-value group of a codebook type (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS): the
// magnitudes of values 4k … 4k+3 in the bytes of w[k], the signs in sn (bit j: value j
// negative), the odd scales 2s + 1 of its two 16-value halves (s0, s1).
struct IQG { u32 w[8]; u32 sn; int s0, s1; };

// iqg is group g of block b of codebook type T (layouts below; the formats are
// core/quant/iq2.go's).
template <int T>
static __device__ __forceinline__ IQG iqg(const void *q, const void *e, i64 b, int g);

// iqg_fscale is the format's group scale factor: x = d·(0.5 + s)·fscale·mag·sign.
template <int T>
static __device__ __forceinline__ float iqg_fscale();

// Weight layouts on the device (see core/backend/cuda/weights.go, which packs them):
//   F32, F16: plain row-major.
//   Q4_0: q = 16-byte nibble blocks, d = f16 scales; one of each per 32 values.
//   Q5_0: q = 16-byte nibble blocks, e = u32 high bits, d = f16 scales.
//   Q8_0: q = int8 row-major values, d = f16 scales per 32 values.
//   Q4_K, Q5_K: ggml blocks as stored (144 / 176 bytes, 16-byte aligned fields).
//   Q6_K: q = 208-byte bodies (ql 128, qh 64, scales 16), d = f16 scales.
//   BF16: plain row-major.
//   Q4_1: q = 16-byte nibble blocks, d = u32 (f16 d, f16 m) per 32 values.
//   Q5_1: q = 16-byte nibble blocks, e = u32 high bits, d = u32 (f16 d, f16 m).
//   IQ4_NL: q = 16-byte nibble blocks (level indices, halves order: see nib_at), d =
//     f16 scales.
//   IQ4_XS: q = 128-byte nibble bodies (halves order), d = f16 per 256 values, e = the
//     eight group scales ls − 32 as int8 (types.go's iq4xsScales).
//   Q3_K: q = 96-byte bodies (hmask 32, qs 64), e = 12 scale bytes, d = f16 per 256.
//   Q2_K: q = 64-byte qs, e = 16 scale bytes, d = u32 (f16 d, f16 dmin) per 256.
//   MXFP4: q = 16-byte nibble blocks (level indices, halves order), d = u8 E8M0 exponents.
//   IQ3_S: q = 64-byte qs, e = 44 bytes (qh 8, signs 32, scales 4), d = f16 per 256.
//   IQ2_XXS: q = 64 bytes (per group 4 grid indices, then a u32 of 4×7 sign bits and the
//     scale in its top 4 bits), d = f16 per 256.
//   IQ2_XS: q = u16 qs[32] (9-bit grid index, 7 sign bits), e = 8 scale bytes, d.
//   IQ2_S: q = qs[32] then signs[32], e = qh[8] then scales[8], d.
//   IQ3_XXS: q = qs[64] (8 grid indices a group), e = u32[8] (4×7 sign bits, scale), d.
enum WType {
    W_F32 = 0, W_F16 = 1, W_Q4_0 = 2, W_Q4_1 = 3, W_Q5_0 = 6, W_Q5_1 = 7, W_Q8_0 = 8, W_Q2_K = 10, W_Q3_K = 11,
    W_Q4_K = 12, W_Q5_K = 13, W_Q6_K = 14, W_IQ2_XXS = 16, W_IQ2_XS = 17, W_IQ3_XXS = 18, W_IQ4_NL = 20,
    W_IQ3_S = 21, W_IQ2_S = 22, W_IQ4_XS = 23, W_BF16 = 30, W_MXFP4 = 39
};

template <int T>
static __device__ __forceinline__ float iqg_fscale() { return T == W_IQ3_XXS ? 0.5f : 0.25f; }

// iq2_run puts run r's grid entry (8 magnitudes) and 8 sign bits into a group.
static __device__ __forceinline__ void iq2_run(IQG &v, int r, unsigned long long w, u32 signs) {
    v.w[2 * r] = (u32)w;
    v.w[2 * r + 1] = (u32)(w >> 32);
    v.sn |= (signs & 0xFF) << (8 * r);
}

template <int T>
static __device__ __forceinline__ IQG iqg(const void *q, const void *e, i64 b, int g) {
    IQG v;
    v.sn = 0;
    if (T == W_IQ2_XXS) {
        const int2 h = *(const int2 *)((const u8 *)q + b * 64 + 8 * g);  // 4 grid indices, aux
        const u32 aux = (u32)h.y;
#pragma unroll
        for (int r = 0; r < 4; r++) iq2_run(v, r, iq2xxs_grid[((u32)h.x >> (8 * r)) & 0xFF], even_signs(aux >> (7 * r)));
        v.s0 = v.s1 = 2 * (int)(aux >> 28) + 1;
    } else if (T == W_IQ2_XS) {
        const int2 h = *(const int2 *)((const u8 *)q + b * 64 + 8 * g);  // 4 u16: index | signs << 9
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const u32 c = ((u32)(r < 2 ? h.x : h.y) >> (16 * (r % 2))) & 0xFFFF;
            iq2_run(v, r, iq2xs_grid[c & 511], even_signs(c >> 9));
        }
        const u32 sc = ((const u8 *)e)[b * 8 + g];
        v.s0 = 2 * (int)(sc & 0xF) + 1;
        v.s1 = 2 * (int)(sc >> 4) + 1;
    } else if (T == W_IQ2_S) {
        const u8 *qb = (const u8 *)q + b * 64, *eb = (const u8 *)e + b * 16;
        const u32 qs = *(const u32 *)(qb + 4 * g), sg = *(const u32 *)(qb + 32 + 4 * g), qh = eb[g];
#pragma unroll
        for (int r = 0; r < 4; r++) iq2_run(v, r, iq2s_grid[((qs >> (8 * r)) & 0xFF) | (((qh >> (2 * r)) & 3) << 8)], sg >> (8 * r));
        const u32 sc = eb[8 + g];
        v.s0 = 2 * (int)(sc & 0xF) + 1;
        v.s1 = 2 * (int)(sc >> 4) + 1;
    } else {  // W_IQ3_XXS
        const int2 h = *(const int2 *)((const u8 *)q + b * 64 + 8 * g);  // 8 grid indices
        const u32 aux = ((const u32 *)e)[b * 8 + g];
#pragma unroll
        for (int r = 0; r < 8; r++) v.w[r] = iq3xxs_grid[((u32)(r < 4 ? h.x : h.y) >> (8 * (r % 4))) & 0xFF];
#pragma unroll
        for (int p = 0; p < 4; p++) v.sn |= even_signs(aux >> (7 * p)) << (8 * p);
        v.s0 = v.s1 = 2 * (int)(aux >> 28) + 1;
    }
    return v;
}

// wval is weight element (row, col) as float: used by embed and general paths.
template <int T>
static __device__ __forceinline__ float wval(const void *q, const void *d, const void *e, i64 row, int col, int cols) {
    if (T == W_F32) return ((const float *)q)[row * cols + col];
    if (T == W_F16) return h2f(((const u16 *)q)[row * cols + col]);
    if (T == W_Q8_0) return h2f(((const u16 *)d)[(row * cols + col) / 32]) * (float)((const i8 *)q)[row * cols + col];
    if (T == W_Q4_0 || T == W_Q5_0) {
        const i64 b = row * (cols / 32) + col / 32;
        const int i = col % 32;
        const u8 byte = ((const u8 *)q)[b * 16 + (i % 16)];
        int v = i < 16 ? (byte & 0xF) : (byte >> 4);
        if (T == W_Q5_0) v = (v | (((((const u32 *)e)[b] >> i) & 1) << 4)) - 16;
        else v -= 8;
        return h2f(((const u16 *)d)[b]) * (float)v;
    }
    if (T == W_Q4_K || T == W_Q5_K) {
        const int bs = T == W_Q4_K ? 144 : 176, qo = T == W_Q4_K ? 16 : 48;
        const u8 *blk = (const u8 *)q + (row * (cols / 256) + col / 256) * bs;
        const int k = col % 256, j = k / 64, l = k % 32, hi = (k % 64) >= 32;
        const u8 byte = blk[qo + j * 32 + l];
        int v = hi ? (byte >> 4) : (byte & 0xF);
        if (T == W_Q5_K) v |= ((blk[16 + l] >> (2 * j + hi)) & 1) << 4;
        int sc, m;
        scale_min_k4(2 * j + hi, blk + 4, sc, m);
        const u16 *dd = (const u16 *)blk;
        return h2f(dd[0]) * (float)sc * (float)v - h2f(dd[1]) * (float)m;
    }
    if (T == W_Q6_K) {
        const i64 b = row * (cols / 256) + col / 256;
        const u8 *body = (const u8 *)q + b * 208;
        const int k = col % 256, n = k / 128, r = k % 128, part = r / 32, l = r % 32;
        const int lo = (body[n * 64 + (part & 1) * 32 + l] >> (part >= 2 ? 4 : 0)) & 0xF;
        const int hb = (body[128 + n * 32 + l] >> (2 * part)) & 3;
        const int sc = (i8)body[192 + n * 8 + part * 2 + l / 16];
        return h2f(((const u16 *)d)[b]) * (float)sc * (float)((lo | (hb << 4)) - 32);
    }
    // The types below round as core/quant's dequantizers do (explicit .rn, no fused
    // multiply-add), so an embedding row has the CPU's bits.
    if (T == W_BF16) return __int_as_float((int)((u32)((const u16 *)q)[row * cols + col] << 16));
    if (T == W_Q4_1 || T == W_Q5_1 || T == W_IQ4_NL) {
        const i64 b = row * (cols / 32) + col / 32;
        const int i = col % 32;
        if (T == W_IQ4_NL) return fmul_rn(h2f(((const u16 *)d)[b]), (float)iq4_level(nib_at((const u8 *)q + b * 16, i)));
        const u8 byte = ((const u8 *)q)[b * 16 + (i % 16)];
        int v = i < 16 ? (byte & 0xF) : (byte >> 4);
        if (T == W_Q5_1) v |= ((((const u32 *)e)[b] >> i) & 1) << 4;
        const u32 dm = ((const u32 *)d)[b];
        return fadd_rn(fmul_rn((float)v, h2f((u16)(dm & 0xFFFF))), h2f((u16)(dm >> 16)));
    }
    if (T == W_MXFP4) {
        const i64 b = row * (cols / 32) + col / 32;
        const int i = col % 32;
        return fmul_rn((float)fp4_level(nib_at((const u8 *)q + b * 16, i)), e8m0_half(((const u8 *)d)[b]));
    }
    if (T == W_IQ3_S) {
        const i64 b = row * (cols / 256) + col / 256;
        const int k = col % 256, g = k / 32, j = k % 32, r = j / 4;
        const u8 *x = (const u8 *)e + b * 44;  // qh[8], signs[32], scales[4]
        const int idx = ((const u8 *)q)[b * 64 + 8 * g + r] | (((x[g] >> r) & 1) << 8);
        const int mag = (iq3s_grid[idx] >> (8 * (j % 4))) & 0xFF;
        const float db = fmul_rn(h2f(((const u16 *)d)[b]), (float)(1 + 2 * ((x[40 + g / 2] >> (4 * (g % 2))) & 0xF)));
        const float y = fmul_rn(db, (float)mag);
        return (x[8 + 4 * g + j / 8] >> (j % 8)) & 1 ? -y : y;
    }
    if (T == W_IQ2_XXS || T == W_IQ2_XS || T == W_IQ2_S || T == W_IQ3_XXS) {
        const i64 b = row * (cols / 256) + col / 256;
        const int k = col % 256, j = k % 32;
        const IQG v = iqg<T>(q, e, b, k / 32);
        const int mag = (v.w[j / 4] >> (8 * (j % 4))) & 0xFF, s = ((j < 16 ? v.s0 : v.s1) - 1) / 2;
        const float db = fmul_rn(fmul_rn(h2f(((const u16 *)d)[b]), fadd_rn(0.5f, (float)s)), iqg_fscale<T>());
        const float y = fmul_rn(db, (float)mag);
        return (v.sn >> j) & 1 ? -y : y;
    }
    if (T == W_IQ4_XS) {
        const i64 b = row * (cols / 256) + col / 256;
        const int k = col % 256, g = k / 32, i = k % 32;
        const int v = nib_at((const u8 *)q + b * 128 + 16 * g, i);
        const int ls = ((const i8 *)e)[b * 8 + g];
        return fmul_rn(fmul_rn(h2f(((const u16 *)d)[b]), (float)ls), (float)iq4_level(v));
    }
    if (T == W_Q3_K || T == W_Q2_K) {
        const i64 b = row * (cols / 256) + col / 256;
        const int k = col % 256, n = k / 128, j = (k % 128) / 32, l = k % 32;
        if (T == W_Q3_K) {
            const u8 *body = (const u8 *)q + b * 96;
            int v = (body[32 + 32 * n + l] >> (2 * j)) & 3;
            if (!((body[l] >> (4 * n + j)) & 1)) v -= 4;
            const int sc = q3k_scale((const u8 *)e + b * 12, k / 16);
            return fmul_rn(fmul_rn(h2f(((const u16 *)d)[b]), (float)sc), (float)v);
        }
        const int v = (((const u8 *)q)[b * 64 + 32 * n + l] >> (2 * j)) & 3;
        const int sc = ((const u8 *)e)[b * 16 + k / 16];
        const u32 dm = ((const u32 *)d)[b];
        const float dl = fmul_rn(h2f((u16)(dm & 0xFFFF)), (float)(sc & 0xF)), ml = fmul_rn(h2f((u16)(dm >> 16)), (float)(sc >> 4));
        return fadd_rn(fmul_rn(dl, (float)v), -ml);
    }
    return 0.0f;
}
