// norm.cu: RMSNorm × weight, one block per row of n values: dst = x/sqrt(mean(x²)+eps)*w.
// The host picks blockDim from n alone, so a row's bits never depend on how many rows
// a call has. Also serves per-head q/k norm (rows = nt*heads, n = head_dim).
// When q is not null (n % 32 == 0) it also writes dst's 8-bit form for the next matmul.
#include "common.cuh"

// rms_store is the second loop of both kernels: given s, the row's Σ x² (block_sum's
// result), it writes dr = xr / sqrt(s/n + eps) * w and, when q is not null, its 8-bit
// form. Each thread reads and writes the indices it summed in the first loop.
static __device__ __forceinline__ void rms_store(const float *xr, const float *w, float *dr, int n, float s, float eps,
                                                 i8 *q, float *qd) {
    const float scale = rms_scale(s, n, eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = rms_val(xr[i], scale, w[i]);
        dr[i] = v;
        if (q) q8_store(v, q, qd, (i64)blockIdx.x * n + i);
    }
}

extern "C" __global__ void rmsnorm(const float *x, const float *w, float *dst, int n, float eps, i8 *q, float *qd) {
    grid_dep_sync();
    __shared__ float sh[32];
    const float *xr = x + (i64)blockIdx.x * n;
    float *dr = dst + (i64)blockIdx.x * n;
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s = rms_acc(s, xr[i]);
    s = block_sum(s, sh);
    rms_store(xr, w, dr, n, s, eps, q, qd);
}

// add_rmsnorm fuses the residual add with the RMSNorm that follows it: x += r, then
// dst = x / sqrt(mean(x²) + eps) * w (and its 8-bit form when q is not null). Each thread
// reads and writes the same indices in both loops, so dst may be r. Same operations, in
// the same order, as add followed by rmsnorm.
extern "C" __global__ void add_rmsnorm(float *x, const float *r, const float *w, float *dst, int n, float eps, i8 *q,
                                       float *qd) {
    grid_dep_sync();
    __shared__ float sh[32];
    float *xr = x + (i64)blockIdx.x * n;
    const float *rr = r + (i64)blockIdx.x * n;
    float *dr = dst + (i64)blockIdx.x * n;
    float s = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = __fadd_rn(xr[i], rr[i]);
        xr[i] = v;
        s = rms_acc(s, v);
    }
    s = block_sum(s, sh);
    rms_store(xr, w, dr, n, s, eps, q, qd);
}
