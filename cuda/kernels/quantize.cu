// quantize.cu: activations → 8-bit blocks of 32 for the mat-vec kernels: int8 values
// q and one float scale d per block (amax/127, rounding as ggml's q8 reference).
// One warp per block of 32; 256 threads per CUDA block. x is nblocks*32 floats.
#include "common.cuh"

extern "C" __global__ void quantize_q8(const float *x, i8 *q, float *d, int nblocks) {
    const int b = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP, l = threadIdx.x % WARP;
    if (b >= nblocks) return;
    const float v = x[(i64)b * 32 + l];
    const float amax = warp_max(fabsf(v));
    const float dd = amax / 127.0f;
    const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
    q[(i64)b * 32 + l] = (i8)roundf(v * id);
    if (l == 0) d[b] = dd;
}
