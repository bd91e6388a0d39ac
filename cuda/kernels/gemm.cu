// gemm.cu: dst[nt][rows] = x[nt][cols] · w[rows][cols]ᵀ for many rows (prefill) on the
// tensor cores. Quantized weights are first dequantized to an f16 copy (dequant_f16_*,
// once per call: ~2 bytes written per value, cheap beside the GEMM at nt ≥ 64); x is
// rounded to f16 as it is loaded; mma.sync m16n8k16 (two m16n8k8 on Turing) accumulates
// in f32.
//
// gemm_f16w: block tile 128 tokens × 128 weight rows × 32 columns, 8 warps as 2 (tokens)
// × 4 (rows), each a 64 × 32 tile of 4 × 4 mma tiles; the next column tile is loaded
// into registers while the current one is multiplied. Needs cols % 32 == 0.
// Rows of a call are not bitwise equal to 1-row calls (the mat-vec kernels serve
// nt ≤ 8, see Caps.IdentityRows). f16 rounding bounds |x| by 65504.
#include "common.cuh"

#define BM 128
#define BN 128
#define BK 32
#define LDS (BK + 8)  // shared row stride in halves: 80 bytes, conflict-free fragment loads

// dq8 writes the values c0 … c0+7 of weight row `row` (c0 % 8 == 0, so they share one
// block and, in the K-quants, one sub-block) as floats, with one wide load of their
// quants and one decode of their scales instead of eight wval calls; each value is
// wval's expression. Types without a case here take wval.
template <int T>
static __device__ __forceinline__ void dq8(const void *q, const void *d, const void *e, i64 row, int c0, int cols,
                                           float *o) {
    if (T == W_Q8_0) {
        const i64 i = row * cols + c0;
        const float dd = h2f(((const u16 *)d)[i / 32]);
        const int2 v = *(const int2 *)((const i8 *)q + i);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            o[k] = dd * (float)(i8)(v.x >> (8 * k));
            o[4 + k] = dd * (float)(i8)(v.y >> (8 * k));
        }
    } else if (T == W_Q4_0 || T == W_Q5_0) {
        const i64 b = row * (cols / 32) + c0 / 32;
        const int i0 = c0 % 32, sh = i0 < 16 ? 0 : 4;
        const int2 v = *(const int2 *)((const u8 *)q + b * 16 + (i0 % 16));
        const float dd = h2f(((const u16 *)d)[b]);
        const u32 hb = T == W_Q5_0 ? ((const u32 *)e)[b] >> i0 : 0;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int x = (int)((((u32)(k < 4 ? v.x : v.y)) >> (8 * (k % 4) + sh)) & 0xF);
            if (T == W_Q5_0) x = (x | (((hb >> k) & 1) << 4)) - 16;
            else x -= 8;
            o[k] = dd * (float)x;
        }
    } else if (T == W_Q4_K || T == W_Q5_K) {
        const int bs = T == W_Q4_K ? 144 : 176, qo = T == W_Q4_K ? 16 : 48;
        const u8 *blk = (const u8 *)q + (row * (cols / 256) + c0 / 256) * bs;
        const int k0 = c0 % 256, j = k0 / 64, l0 = k0 % 32, hi = (k0 % 64) >= 32;
        const int4 h = *(const int4 *)blk;
        int sc, m;
        k_scale_min(2 * j + hi, h.y, h.z, h.w, sc, m);
        const float dd = h2f((u16)(h.x & 0xFFFF)), dmin = h2f((u16)((u32)h.x >> 16));
        const int2 v = *(const int2 *)(blk + qo + j * 32 + l0);
        int2 qh = {0, 0};
        if (T == W_Q5_K) qh = *(const int2 *)(blk + 16 + l0);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int x = (int)((((u32)(k < 4 ? v.x : v.y)) >> (8 * (k % 4) + (hi ? 4 : 0))) & 0xF);
            if (T == W_Q5_K) x |= (int)(((((u32)(k < 4 ? qh.x : qh.y)) >> (8 * (k % 4))) >> (2 * j + hi)) & 1) << 4;
            o[k] = dd * (float)sc * (float)x - dmin * (float)m;
        }
    } else if (T == W_Q6_K) {
        const i64 b = row * (cols / 256) + c0 / 256;
        const u8 *body = (const u8 *)q + b * 208;
        const int k0 = c0 % 256, n = k0 / 128, r = k0 % 128, part = r / 32, l0 = r % 32;
        const int2 lo = *(const int2 *)(body + n * 64 + (part & 1) * 32 + l0);
        const int2 hv = *(const int2 *)(body + 128 + n * 32 + l0);
        const int sc = (i8)body[192 + n * 8 + part * 2 + l0 / 16];
        const float dd = h2f(((const u16 *)d)[b]);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int x = (int)((((u32)(k < 4 ? lo.x : lo.y)) >> (8 * (k % 4) + (part >= 2 ? 4 : 0))) & 0xF);
            const int hb = (int)((((u32)(k < 4 ? hv.x : hv.y)) >> (8 * (k % 4) + 2 * part)) & 3);
            o[k] = dd * (float)sc * (float)((x | (hb << 4)) - 32);
        }
    } else {
#pragma unroll
        for (int k = 0; k < 8; k++) o[k] = wval<T>(q, d, e, row, c0 + k, cols);
    }
}

// dequant: grid (rows, ceil(cols/2048)), 256 threads, 8 consecutive values per thread
// (dq8) written as one 16-byte store (cols % 32 == 0).
template <int T>
static __device__ void dequant(const void *q, const void *d, const void *e, u16 *out, int rows, int cols) {
    const int row = blockIdx.x, c0 = (blockIdx.y * blockDim.x + threadIdx.x) * 8;
    if (c0 >= cols) return;
    float f[8];
    dq8<T>(q, d, e, row, c0, cols, f);
    int4 v;
    v.x = (int)pack2(f[0], f[1]);
    v.y = (int)pack2(f[2], f[3]);
    v.z = (int)pack2(f[4], f[5]);
    v.w = (int)pack2(f[6], f[7]);
    *(int4 *)(out + (i64)row * cols + c0) = v;
}

#define DEQUANT(name, T)                                                                                  \
    extern "C" __global__ void dequant_f16_##name(const void *q, const void *d, const void *e, u16 *out, \
                                                  int rows, int cols) { grid_dep_sync();                                 \
        dequant<T>(q, d, e, out, rows, cols);                                                            \
    }

extern "C" __global__ void __launch_bounds__(256) gemm_f16w(const u16 *w, const float *x, float *dst, int nt, int rows,
                                                             int cols, const float *bias) {
    grid_dep_sync();
    __shared__ __align__(16) u16 sx[BM * LDS];
    __shared__ __align__(16) u16 sw[BN * LDS];
    const int tid = threadIdx.x, lane = tid % WARP, warp = tid / WARP;
    const int g = lane >> 2, t = lane & 3, wm = warp / 4, wn = warp % 4;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    // Loader mapping: x tile 128 × 32 floats = 1024 float4 (4 per thread); w tile
    // 128 × 32 halves = 512 × 16 bytes (2 per thread).
    float4 rx[4];
    int4 rw[2];
    const float4 zf = {0.f, 0.f, 0.f, 0.f};
    const int4 zi = {0, 0, 0, 0};
    auto load = [&](int k0) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int idx = tid + i * 256, r = idx / 8, c = (idx % 8) * 4, m = m0 + r;
            rx[i] = m < nt ? *(const float4 *)(x + (i64)m * cols + k0 + c) : zf;
        }
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int idx = tid + i * 256, r = idx / 4, c = (idx % 4) * 8, n = n0 + r;
            rw[i] = n < rows ? *(const int4 *)(w + (i64)n * cols + k0 + c) : zi;
        }
    };
    auto store = [&]() {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int idx = tid + i * 256, r = idx / 8, c = (idx % 8) * 4;
            uint2 v;
            v.x = pack2(rx[i].x, rx[i].y);
            v.y = pack2(rx[i].z, rx[i].w);
            *(uint2 *)&sx[r * LDS + c] = v;
        }
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int idx = tid + i * 256, r = idx / 4, c = (idx % 4) * 8;
            *(int4 *)&sw[r * LDS + c] = rw[i];
        }
    };

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) acc[i][j][r] = 0.0f;

    load(0);
    store();
    __syncthreads();
    for (int k0 = 0; k0 < cols; k0 += BK) {
        const bool more = k0 + BK < cols;
        if (more) load(k0 + BK);
#pragma unroll
        for (int ks = 0; ks < BK; ks += 16) {
            u32 a[4][4], b[4][2];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const u16 *p = sx + (wm * 64 + i * 16 + g) * LDS + ks + 2 * t;
                a[i][0] = *(const u32 *)p;
                a[i][1] = *(const u32 *)(p + 8 * LDS);
                a[i][2] = *(const u32 *)(p + 8);
                a[i][3] = *(const u32 *)(p + 8 * LDS + 8);
            }
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const u16 *p = sw + (wn * 32 + j * 8 + g) * LDS + ks + 2 * t;
                b[j][0] = *(const u32 *)p;
                b[j][1] = *(const u32 *)(p + 8);
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) mma16816(acc[i][j], a[i], b[j]);
        }
        __syncthreads();
        if (more) {
            store();
            __syncthreads();
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int m = m0 + wm * 64 + i * 16 + g + (r >= 2 ? 8 : 0);
                const int n = n0 + wn * 32 + j * 8 + 2 * t + (r & 1);
                if (m < nt && n < rows) dst[(i64)m * rows + n] = bias ? acc[i][j][r] + bias[n] : acc[i][j][r];
            }
}
// The per-type instantiations (EMBED/DEQUANT/MMVQ lines) are appended at compile time
// from the weight-type table, core/backend/cuda/types.go.

// f16_from_f32: out[i] = x[i] rounded to f16 (the activations of the cuBLAS GEMM,
// core/backend/cuda/blas.go); grid ceil(n/256) × 256 threads.
extern "C" __global__ void f16_from_f32(const float *x, u16 *out, int n) {
    grid_dep_sync();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = f2h(x[i]);
}

// act_round_q8_0, act_round_q8_k: the GEMM's activations rounded as the CPU backend
// (core/backend/cpu, ggml's x86 code) rounds them for a dot with the weight's type, its
// vec-dot type: the value written is q·d, q the block's 8-bit level of x and d its
// scale, as f16 into o16 (cuBLAS's input) or, where o16 is null, as f32 into o32
// (gemm_f16w's input, which it rounds to the same f16 as it loads). One warp per block
// of 32·V values, V consecutive values per lane; nblocks blocks.
//   q8_0 (Q8_0 and Q8_1, blocks of 32): d = amax/127 stored as f16, q = rint(x·127/amax).
//   q8_k (Q8_K, blocks of 256): s = 127/amax, q = rint(x·s), d = 1/s in f32 (ggml's
//   quantize_row_q8_K_ref scales by −127/max with max the signed value of largest
//   magnitude: q and d both change sign, q·d does not).
// Rounding the activations to these levels first, not straight to f16, gives the GEMM
// the CPU's numbers: without it the trained target's perplexity was 0.126% off the CPU's
// (docs/perf-cuda.md).
template <int V, bool F16D>
static __device__ __forceinline__ void act_round(const float *x, u16 *o16, float *o32, int nblocks) {
    const int b = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP, l = threadIdx.x % WARP;
    if (b >= nblocks) return;
    const i64 i0 = (i64)b * (32 * V) + l * V;
    float v[V];
    float a = 0.0f;
#pragma unroll
    for (int k = 0; k < V; k++) {
        v[k] = x[i0 + k];
        a = fmaxf(a, fabsf(v[k]));
    }
    const float amax = warp_max(a);
    const float s = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
    float dd;
    if (F16D) dd = h2f(f2h(__fdiv_rn(amax, 127.0f)));
    else dd = amax != 0.0f ? __fdiv_rn(1.0f, s) : 0.0f;
#pragma unroll
    for (int k = 0; k < V; k++) {
        const float y = __fmul_rn((float)__float2int_rn(__fmul_rn(v[k], s)), dd);
        if (o16) o16[i0 + k] = f2h(y);
        else o32[i0 + k] = y;
    }
}

extern "C" __global__ void act_round_q8_0(const float *x, u16 *o16, float *o32, int nblocks) {
    grid_dep_sync();
    act_round<1, true>(x, o16, o32, nblocks);
}

extern "C" __global__ void act_round_q8_k(const float *x, u16 *o16, float *o32, int nblocks) {
    grid_dep_sync();
    act_round<8, false>(x, o16, o32, nblocks);
}
