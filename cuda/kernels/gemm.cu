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

// dequant: grid (rows, ceil(cols/2048)), 256 threads, 8 consecutive values per thread
// written as one 16-byte store (cols % 32 == 0).
template <int T>
static __device__ void dequant(const void *q, const void *d, const void *e, u16 *out, int rows, int cols) {
    const int row = blockIdx.x, c0 = (blockIdx.y * blockDim.x + threadIdx.x) * 8;
    if (c0 >= cols) return;
    u32 h[4];
#pragma unroll
    for (int k = 0; k < 4; k++)
        h[k] = (u32)f2h(wval<T>(q, d, e, row, c0 + 2 * k, cols)) |
               ((u32)f2h(wval<T>(q, d, e, row, c0 + 2 * k + 1, cols)) << 16);
    int4 v;
    v.x = (int)h[0];
    v.y = (int)h[1];
    v.z = (int)h[2];
    v.w = (int)h[3];
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
