// rope.cu: rotary embedding in place on q[nt][heads*hd] and k[nt][kvheads*hd].
// Grid (nt, heads + kvheads), hd/2 threads; thread i rotates pair i. theta follows
// ggml's rope cache: theta = pos * (base^(-2/dims))^i built by repeated multiplication,
// times freq_scale, divided by freq_factors[i] when given.
#include "common.cuh"

extern "C" __global__ void rope(float *q, float *k, const int *pos, const float *ff, int heads, int kvheads,
                                int hd, int dims, int neox, float base, float freq_scale) {
    const int r = blockIdx.x, h = blockIdx.y, i = threadIdx.x;
    if (i >= dims / 2) return;
    float *v = h < heads ? q + ((i64)r * heads + h) * hd : k + ((i64)r * kvheads + (h - heads)) * hd;
    const float theta_scale = powf(base, -2.0f / (float)dims);
    float theta = (float)pos[r];
    for (int t = 0; t < i; t++) theta *= theta_scale;
    if (ff) theta /= ff[i];
    theta *= freq_scale;
    const float c = cosf(theta), s = sinf(theta);
    const int i0 = neox ? i : 2 * i, i1 = neox ? i + dims / 2 : 2 * i + 1;
    const float x0 = v[i0], x1 = v[i1];
    v[i0] = x0 * c - x1 * s;
    v[i1] = x0 * s + x1 * c;
}
