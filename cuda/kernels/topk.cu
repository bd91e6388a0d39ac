// topk.cu: the k largest values of each row of logits[nt][n] and their ids, in
// descending order, ties to the lower id. One block (1024 threads) per row, k passes:
// pass j finds the best element strictly after pass j-1's pick in that order. k is
// small (the sampler's candidates), the row sits in L2 after the first pass.
#include "common.cuh"

// before: (v, i) ranks ahead of (bv, bi): the larger value, the lower id on ties, every
// number ahead of NaN (the CPU backend's order; NaNs among themselves by id).
static __device__ __forceinline__ bool before(float v, int i, float bv, int bi) {
    const bool vn = v != v, bn = bv != bv;
    if (vn || bn) return bn && (!vn || i < bi);
    return v > bv || (v == bv && i < bi);
}

extern "C" __global__ void topk(const float *logits, int n, int k, int *ids, float *vals) {
    grid_dep_sync();
    __shared__ float sv[32];
    __shared__ int si[32];
    __shared__ float pv;
    __shared__ int pi;
    const float *row = logits + (i64)blockIdx.x * n;
    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP, nw = blockDim.x / WARP;
    if (threadIdx.x == 0) { pv = POS_INF; pi = -1; }
    __syncthreads();
    for (int j = 0; j < k; j++) {
        const float prev_v = pv;
        const int prev_i = pi;
        float bv = NEG_INF;
        int bi = -1;
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            const float v = row[i];
            const bool after = before(prev_v, prev_i, v, i);
            if (after && (bi < 0 || before(v, i, bv, bi))) { bv = v; bi = i; }
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (oi >= 0 && (bi < 0 || before(ov, oi, bv, bi))) { bv = ov; bi = oi; }
        }
        __syncthreads();  // every thread has read pv/pi
        if (lane == 0) { sv[warp] = bv; si[warp] = bi; }
        __syncthreads();
        if (warp == 0) {
            bv = lane < nw ? sv[lane] : NEG_INF;
            bi = lane < nw ? si[lane] : -1;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) {
                const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
                const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
                if (oi >= 0 && (bi < 0 || before(ov, oi, bv, bi))) { bv = ov; bi = oi; }
            }
            if (lane == 0) {
                ids[(i64)blockIdx.x * k + j] = bi;
                vals[(i64)blockIdx.x * k + j] = bi >= 0 ? bv : NEG_INF;
                pv = bi >= 0 ? bv : NEG_INF;
                pi = bi >= 0 ? bi : 0x7fffffff;
            }
        }
        __syncthreads();
    }
}
