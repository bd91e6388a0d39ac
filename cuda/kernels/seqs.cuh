// seqs.cuh: the per-sequence descriptors of the *_seqs kernels (rope.cu rope_store_seqs,
// attn.cu attn_part_seqs_*, attn_combine_seqs), which run the rows of several sequences,
// each with its own cache and positions, in one launch. The backend uploads a table of
// them (core/backend/cuda attnseqs.go seqDesc mirrors the layout); a launch's rows are
// numbered across the sequences in table order, sequence i owning rows first … first+nt-1.
#pragma once
#include "common.cuh"

struct SeqDesc {
    float *q, *k;         // the sequence's first row of queries and keys (rotated in place)
    const float *v;       // its first row of values
    float *dst;           // its first attention output row
    const int *pos;       // its first row's position
    void *kc, *vc;        // layer 0 of its cache's keys and values
    u16 *kd, *vd;         // layer 0's Q8_0 scales (null: an F16 cache)
    i64 layer_vals;       // bytes of one layer's keys (values alike)
    i64 layer_scales;     // bytes of one layer's key scales
    int first, nt;        // its rows in the launch
    int ctx;              // its cache's positions
    int chunk, nsplit;    // its attention splits (the one-sequence launch's)
    int dst_row;          // dst's row in its buffer (where the 8-bit shadow goes)
    int pad[4];
};
static_assert(sizeof(SeqDesc) == 128, "SeqDesc layout");

// seq_of is the sequence owning launch row r (the last whose first ≤ r).
static __device__ __forceinline__ int seq_of(const SeqDesc *s, int n, int r) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (s[mid].first <= r) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// layer_at is a cache array's address in layer l (null stays null).
template <typename T>
static __device__ __forceinline__ T *layer_at(T *p, int l, i64 bytes) {
    return p ? (T *)((char *)p + (i64)l * bytes) : p;
}
