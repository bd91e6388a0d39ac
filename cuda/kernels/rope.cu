// rope.cu: rotary embedding in place on q[nt][heads*hd] and k[nt][kvheads*hd], fused
// with the KV store: blocks of KV heads then write their rotated k and their v into the
// cache at pos[r]. Grid (nt, heads + kvheads); blockDim ≥ dims/2, a multiple of 32.
// theta follows ggml's rope cache (common.cuh rope_cs, which mmvq.cu's fused q/k/v
// kernel shares). rope_store_seqs does the same for the rows of several sequences, each
// with its own cache (seqs.cuh).
//
// Cache layouts (one layer): F16 [ctx][kvdim] halves; Q8_0 int8 [ctx][kvdim] plus f16
// scales [ctx][kvdim/32], quantized as ggml's quantize_row_q8_0_ref.
#include "common.cuh"
#include "seqs.cuh"

struct KVOut {
    void *kc, *vc;  // values (u16 for F16, i8 for Q8_0)
    u16 *kd, *vd;   // Q8_0 scales (null for F16)
};

static __device__ __forceinline__ void store_row(const float *src, void *c, u16 *cd, i64 base, int hd) {
    for (int i = threadIdx.x; i < hd; i += blockDim.x) {
        const float x = src[i];
        if (!cd) {
            ((u16 *)c)[base + i] = f2h(x);
            continue;
        }
        const float amax = warp_max(fabsf(x));  // hd % 32 == 0: whole warps
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        ((i8 *)c)[base + i] = (i8)roundf(x * id);
        if (threadIdx.x % WARP == 0) cd[(base + i) / 32] = f2h(d);
    }
}

// rope_store_row rotates row r's head h (a query head, or KV head h - heads) and, for a
// KV head, stores its key and value at pos[r].
static __device__ void rope_store_row(float *q, float *k, const float *v, const int *pos, const float *ff, int heads,
                                      int kvheads, int hd, int dims, int neox, float base, float freq_scale, void *kc,
                                      void *vc, u16 *kd, u16 *vd, int ctx, int *err, int r, int h) {
    const int i = threadIdx.x;
    const int p = pos[r];
    float *vec = h < heads ? q + ((i64)r * heads + h) * hd : k + ((i64)r * kvheads + (h - heads)) * hd;
    if (i < dims / 2) {
        float c, s;
        rope_cs(p, i, dims, base, ff, freq_scale, &c, &s);
        const int i0 = neox ? i : 2 * i, i1 = neox ? i + dims / 2 : 2 * i + 1;
        rope_rot(vec[i0], vec[i1], c, s, &vec[i0], &vec[i1]);
    }
    if (h < heads) return;
    if (p < 0 || p >= ctx) {
        if (i == 0 && h == heads) set_error(err, ERR_KV_POS, p);
        return;
    }
    __syncthreads();  // the rotated k row is complete
    const int kvh = h - heads, kvdim = kvheads * hd;
    const i64 off = (i64)p * kvdim + (i64)kvh * hd;
    store_row(vec, kc, kd, off, hd);
    store_row(v + ((i64)r * kvheads + kvh) * hd, vc, vd, off, hd);
}

extern "C" __global__ void rope_store(float *q, float *k, const float *v, const int *pos, const float *ff,
                                      int heads, int kvheads, int hd, int dims, int neox, float base,
                                      float freq_scale, void *kc, void *vc, u16 *kd, u16 *vd, int ctx, int *err) {
    grid_dep_sync();
    rope_store_row(q, k, v, pos, ff, heads, kvheads, hd, dims, neox, base, freq_scale, kc, vc, kd, vd, ctx, err,
                   blockIdx.x, blockIdx.y);
}

// rope_store_seqs is rope_store over the rows of nseq sequences (seqs.cuh), each row
// rotated and stored in its sequence's cache at layer. Grid (rows, heads + kvheads).
extern "C" __global__ void rope_store_seqs(const SeqDesc *seqs, int nseq, int layer, const float *ff, int heads,
                                           int kvheads, int hd, int dims, int neox, float base, float freq_scale,
                                           int *err) {
    grid_dep_sync();
    const SeqDesc &d = seqs[seq_of(seqs, nseq, blockIdx.x)];
    rope_store_row(d.q, d.k, d.v, d.pos, ff, heads, kvheads, hd, dims, neox, base, freq_scale,
                   layer_at(d.kc, layer, d.layer_vals), layer_at(d.vc, layer, d.layer_vals),
                   layer_at(d.kd, layer, d.layer_scales), layer_at(d.vd, layer, d.layer_scales), d.ctx, err,
                   blockIdx.x - d.first, blockIdx.y);
}
