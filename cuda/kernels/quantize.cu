// quantize.cu: activations → 8-bit blocks of 32 for the mat-vec kernels: int8 values
// q and one float scale d per block (q8_store). One warp per block of 32; 256 threads
// per CUDA block. x is nblocks*32 floats.
#include "common.cuh"

extern "C" __global__ void quantize_q8(const float *x, i8 *q, float *d, int nblocks) {
    grid_dep_sync();
    const int b = blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP, l = threadIdx.x % WARP;
    if (b >= nblocks) return;
    q8_store(x[(i64)b * 32 + l], q, d, (i64)b * 32 + l);
}
