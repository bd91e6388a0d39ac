// topk.cu: the k largest values of each row of logits[nt][n] and their ids, in
// descending order, ties to the lower id. One block (1024 threads) per row, k passes
// (select_k): pass j finds the best element strictly after pass j-1's pick in that order.
// k is small (the sampler's candidates), the row sits in L2 after the first pass. The
// host keeps 1 ≤ k ≤ n, so every pass finds an element.
#include "common.cuh"

extern "C" __global__ void topk(const float *logits, int n, int k, int *ids, float *vals) {
    grid_dep_sync();
    const i64 r = blockIdx.x;
    RowCand c = {logits + r * n, 0};
    select_k(c, n, k, ids + r * k, vals + r * k);
}
