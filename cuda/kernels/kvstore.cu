// kvstore.cu: store k and v rows [nt][kvdim] into one layer's cache at positions pos[i].
// F16 cache: [ctx][kvdim] halves. Q8_0 cache: int8 values [ctx][kvdim] plus f16 scales
// [ctx][kvdim/32], quantized as ggml's quantize_row_q8_0_ref (d = amax/127, round(x/d)).
#include "common.cuh"

// Grid (ceil(kvdim/256), nt, 2: k then v), 256 threads.
extern "C" __global__ void kv_store_f16(const float *k, const float *v, u16 *kc, u16 *vc, const int *pos,
                                        int kvdim, int ctx, int *err) {
    const int r = blockIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= kvdim) return;
    const int p = pos[r];
    if (p < 0 || p >= ctx) {
        if (c == 0) set_error(err, ERR_KV_POS, p);
        return;
    }
    const float *src = blockIdx.z == 0 ? k : v;
    u16 *dst = blockIdx.z == 0 ? kc : vc;
    dst[(i64)p * kvdim + c] = f2h(src[(i64)r * kvdim + c]);
}

// Grid (ceil(kvdim/256), nt, 2), 256 threads: one warp per 32-value block.
extern "C" __global__ void kv_store_q8(const float *k, const float *v, i8 *kq, u16 *kd, i8 *vq, u16 *vd,
                                       const int *pos, int kvdim, int ctx, int *err) {
    const int r = blockIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c - threadIdx.x % WARP >= kvdim) return;  // whole warps leave together
    const int p = pos[r];
    if (p < 0 || p >= ctx) {
        if (c == 0) set_error(err, ERR_KV_POS, p);
        return;
    }
    const float *src = blockIdx.z == 0 ? k : v;
    const float x = src[(i64)r * kvdim + c];
    const float amax = warp_max(fabsf(x));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    i8 *q = blockIdx.z == 0 ? kq : vq;
    u16 *dd = blockIdx.z == 0 ? kd : vd;
    q[(i64)p * kvdim + c] = (i8)roundf(x * id);
    if (threadIdx.x % WARP == 0) dd[((i64)p * kvdim + c) / 32] = f2h(d);
}
