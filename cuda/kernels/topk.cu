// topk.cu: the k largest values of each row of logits[nt][n] and their ids, in
// descending order, ties to the lower id. One block (1024 threads) per row, k passes:
// pass j finds the best element strictly after pass j-1's pick in that order. k is
// small (the sampler's candidates), the row sits in L2 after the first pass.
#include "common.cuh"

extern "C" __global__ void topk(const float *logits, int n, int k, int *ids, float *vals) {
    grid_dep_sync();
    __shared__ float sv[32];
    __shared__ int si[32];
    __shared__ float pv;
    __shared__ int pi;
    const float *row = logits + (i64)blockIdx.x * n;
    if (threadIdx.x == 0) { pv = POS_INF; pi = -1; }
    __syncthreads();
    for (int j = 0; j < k; j++) {
        const float prev_v = pv;
        const int prev_i = pi;
        float bv = NEG_INF;
        int bi = -1;
        for (int i = threadIdx.x; i < n; i += blockDim.x) {
            const float v = row[i];
            const bool after = ranks_before(prev_v, prev_i, v, i);
            if (after) better(v, i, bv, bi);
        }
        block_best(bv, bi, sv, si);  // its first barrier: every thread has read pv/pi
        if (threadIdx.x == 0) {
            ids[(i64)blockIdx.x * k + j] = bi;
            vals[(i64)blockIdx.x * k + j] = bi >= 0 ? bv : NEG_INF;
            pv = bi >= 0 ? bv : NEG_INF;
            pi = bi >= 0 ? bi : 0x7fffffff;
        }
        __syncthreads();
    }
}
