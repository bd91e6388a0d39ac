// elementwise.cu: SwiGLU, residual add and bias add over flat arrays, 256 threads per block.
#include "common.cuh"

// swiglu also writes dst's 8-bit form when q is not null (n % 32 == 0).
extern "C" __global__ void swiglu(float *dst, const float *g, const float *u, int n, i8 *q, float *qd) {
    grid_dep_sync();
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float v = silu_mul(g[i], u[i]);
    dst[i] = v;
    if (q) q8_store(v, q, qd, i);
}

extern "C" __global__ void add(float *dst, const float *x, int n) {
    grid_dep_sync();
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    dst[i] = __fadd_rn(dst[i], x[i]);
}

// add_bias: x[r][c] += b[c] for n = rows*cols elements.
extern "C" __global__ void add_bias(float *x, const float *b, int n, int cols) {
    grid_dep_sync();
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    x[i] += b[i % cols];
}
