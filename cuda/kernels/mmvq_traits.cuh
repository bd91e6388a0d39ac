// mmvq_traits.cuh: the mat-vec traits of mmvq.cu's types (see mmvq.cu), in a header so
// mmvp.cu (their one-row prologue kernels) instantiates the same code beside it.
#pragma once
#include "mmvq.cuh"


// Q4_0: unit = one 32-value block.
struct TQ4_0 {
    struct R { int q[4]; float d; };
    static __device__ int units(int cols) { return cols / 32; }
    static __device__ R load(const Args &a, i64 row, int u) {
        const i64 b = row * (a.cols / 32) + u;
        R r; load4(a.q, b, r.q);
        r.d = h2f(((const u16 *)a.d)[b]);
        return r;
    }
    typedef XBlock X;
    static __device__ X loadx(const Args &a, int j, int u) { return xblock(a, j, u); }
    static __device__ float fold(float acc, const R &r, const X &x) {
        const int s = q4_dot(r.q, x.x);
        return fold1(acc, r.d, x.d, s - 8 * x.sum);
    }
};

// Q5_0: unit = one 32-value block; the fifth bits come from e.
struct TQ5_0 {
    struct R { int q[4]; u32 h; float d; };
    static __device__ int units(int cols) { return cols / 32; }
    static __device__ R load(const Args &a, i64 row, int u) {
        const i64 b = row * (a.cols / 32) + u;
        R r; load4(a.q, b, r.q);
        r.h = ((const u32 *)a.e)[b];
        r.d = h2f(((const u16 *)a.d)[b]);
        return r;
    }
    typedef XBlock X;
    static __device__ X loadx(const Args &a, int j, int u) { return xblock(a, j, u); }
    static __device__ float fold(float acc, const R &r, const X &x) {
        int s = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            s = dp4a(nib_lo(r.q[k]) | spread5(r.h >> (4 * k)), x.x[k], s);
            s = dp4a(nib_hi(r.q[k]) | spread5(r.h >> (16 + 4 * k)), x.x[k + 4], s);
        }
        return fold1(acc, r.d, x.d, s - 16 * x.sum);
    }
};

// Q8_0: unit = one 32-value block.
struct TQ8_0 {
    struct R { int q[8]; float d; };
    static __device__ int units(int cols) { return cols / 32; }
    static __device__ R load(const Args &a, i64 row, int u) {
        const i64 b = row * (a.cols / 32) + u;
        R r;
        load8((const int *)a.q + b * 8, r.q);
        r.d = h2f(((const u16 *)a.d)[b]);
        return r;
    }
    typedef XBlock X;
    static __device__ X loadx(const Args &a, int j, int u) { return xblock(a, j, u); }
    static __device__ float fold(float acc, const R &r, const X &x) {
        int s = 0;
#pragma unroll
        for (int k = 0; k < 8; k++) s = dp4a(r.q[k], x.x[k], s);
        return fold1(acc, r.d, x.d, s);
    }
};

// KX is a K-quant unit's activations: N words (4N values) of each of its two sub-blocks
// (the second 32 values after the first), their scales and their sums.
template <int N>
struct KX { int xa[N], xb[N]; float da, db; int suma, sumb; };
template <int N>
static __device__ __forceinline__ KX<N> kx(const int *xp, const float *xd) {
    KX<N> x;
    if (N == 4) {
        const int4 va = *(const int4 *)xp, vb = *(const int4 *)(xp + 8);
        x.xa[0] = va.x; x.xa[1] = va.y; x.xa[2] = va.z; x.xa[3] = va.w;
        x.xb[0] = vb.x; x.xb[1] = vb.y; x.xb[2] = vb.z; x.xb[3] = vb.w;
    } else {
        load8(xp, x.xa);
        load8(xp + 8, x.xb);
    }
    x.da = xd[0];
    x.db = xd[1];
    x.suma = sum8(x.xa, N);
    x.sumb = sum8(x.xb, N);
    return x;
}

// Q4_K: unit = 32 values, half h of the 32-byte slice j of a block's qs (values 16h …
// 16h+15 of sub-blocks 2j, the low nibbles, and 2j+1, the high ones): two lanes share a
// slice, so a warp's loads of qs and of x cover contiguous bytes. (With one lane per
// slice, each lane read 32 bytes of qs and 64 of x at a stride: the L1 was the busiest
// unit at 79% and the kernel streamed 2.8 TB/s.)
struct TQ4_K {
    struct R { int q[4]; KScale k; };
    static __device__ int units(int cols) { return cols / 32; }
    static __device__ R load(const Args &a, i64 row, int u) {
        const int j = (u / 2) % 4, h = u % 2;
        const u8 *blk = (const u8 *)a.q + (row * (a.cols / 256) + u / 8) * 144;
        R r;
        const int4 v = *(const int4 *)(blk + 16 + j * 32 + h * 16);
        r.q[0] = v.x; r.q[1] = v.y; r.q[2] = v.z; r.q[3] = v.w;
        r.k = khead(blk, j);
        return r;
    }
    // X: the unit's 16 activations of each sub-block, their scales and sums.
    typedef KX<4> X;
    static __device__ X loadx(const Args &a, int jrow, int u) {
        const int b = u / 8, j = (u / 2) % 4, h = u % 2;
        return kx<4>(a.xq + ((i64)jrow * a.cols + b * 256 + j * 64 + h * 16) / 4,
                     a.xd + (i64)jrow * (a.cols / 32) + b * 8 + j * 2);
    }
    static __device__ float fold(float acc, const R &r, const X &x) {
        int sa = 0, sb = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            sa = dp4a(nib_lo(r.q[k]), x.xa[k], sa);
            sb = dp4a(nib_hi(r.q[k]), x.xb[k], sb);
        }
        return foldk(acc, r.k, sa, sb, x.suma, x.sumb, x.da, x.db);
    }
};

// Q5_K: unit = 64 values (one 32-byte slice of qs, sub-blocks 2j and 2j+1, and the 32
// bytes of fifth bits). Two lanes per slice as in Q4_K measured 6% slower at nt = 1
// (the fifth bits' 32 bytes are read by every lane of the block either way).
struct TQ5_K {
    struct R { int q[8]; int h[8]; KScale k; int j; };
    static __device__ int units(int cols) { return cols / 64; }
    static __device__ R load(const Args &a, i64 row, int u) {
        const int j = u % 4;
        const u8 *blk = (const u8 *)a.q + (row * (a.cols / 256) + u / 4) * 176;
        R r;
        load8((const int *)(blk + 48 + j * 32), r.q);
        load8((const int *)(blk + 16), r.h);
        r.k = khead(blk, j);
        r.j = j;
        return r;
    }
    // X: the unit's two 32-value blocks of activation row jrow. (Not two xblock calls:
    // addressing the second block on its own adds integer work to the issue-bound loop.)
    typedef KX<8> X;
    static __device__ X loadx(const Args &a, int jrow, int u) {
        return kx<8>(a.xq + ((i64)jrow * a.cols + u * 64) / 4, a.xd + (i64)jrow * (a.cols / 32) + u * 2);
    }
    static __device__ float fold(float acc, const R &r, const X &x) {
        int sa = 0, sb = 0;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int lo = nib_lo(r.q[k]) | (((r.h[k] >> (2 * r.j)) & 0x01010101) << 4);
            const int hi = nib_hi(r.q[k]) | (((r.h[k] >> (2 * r.j + 1)) & 0x01010101) << 4);
            sa = dp4a(lo, x.xa[k], sa);
            sb = dp4a(hi, x.xb[k], sb);
        }
        return foldk(acc, r.k, sa, sb, x.suma, x.sumb, x.da, x.db);
    }
};

// Q6_K: unit = 32 values (quarter of a 128-value half: ql slice, qh bit pair, 2 scales).
struct TQ6_K {
    struct R { int ql[8]; int qh[8]; float d; int sc0, sc1, shift, hshift; };
    static __device__ int units(int cols) { return cols / 32; }
    static __device__ R load(const Args &a, i64 row, int u) {
        const i64 b = row * (a.cols / 256) + u / 8;
        const int n = (u % 8) / 4, part = u % 4;
        const u8 *body = (const u8 *)a.q + b * 208;
        R r;
        load8((const int *)(body + n * 64 + (part & 1) * 32), r.ql);
        load8((const int *)(body + 128 + n * 32), r.qh);
        const u16 sc = *(const u16 *)(body + 192 + n * 8 + part * 2);  // both scales in one load
        r.sc0 = (i8)(sc & 0xFF);
        r.sc1 = (i8)(sc >> 8);
        r.shift = part >= 2 ? 4 : 0;
        r.hshift = 2 * part;
        r.d = h2f(((const u16 *)a.d)[b]);
        return r;
    }
    // X: the unit's 32 activations and the sums of their two halves.
    struct X { int x[8]; float d; int x0, x1; };
    static __device__ X loadx(const Args &a, int j, int u) {
        X x;
        load8(a.xq + ((i64)j * a.cols + u * 32) / 4, x.x);
        x.d = a.xd[(i64)j * (a.cols / 32) + u];
        x.x0 = sum8(x.x, 4);
        x.x1 = sum8(x.x + 4, 4);
        return x;
    }
    static __device__ float fold(float acc, const R &r, const X &x) {
        int s0 = 0, s1 = 0;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int v = ((r.ql[k] >> r.shift) & 0x0F0F0F0F) | (((r.qh[k] >> r.hshift) & 0x03030303) << 4);
            if (k < 4) s0 = dp4a(v, x.x[k], s0);
            else s1 = dp4a(v, x.x[k], s1);
        }
        return fold1(acc, r.d, x.d, r.sc0 * (s0 - 32 * x.x0) + r.sc1 * (s1 - 32 * x.x1));
    }
};

// F16 (VEC: 8 values per unit, needs cols % 8 == 0) and F32 (VEC: 4 per unit); the
// scalar forms take one value per unit for any cols.
template <bool VEC>
struct TF16 {
    struct R { float w[8]; };
    static constexpr int N = VEC ? 8 : 1;
    static __device__ int units(int cols) { return cols / N; }
    static __device__ R load(const Args &a, i64 row, int u) {
        R r;
        const u16 *p = (const u16 *)a.q + row * a.cols + (i64)u * N;
        if (VEC) {
            const int4 v = *(const int4 *)p;
            const u32 w4[4] = {(u32)v.x, (u32)v.y, (u32)v.z, (u32)v.w};
#pragma unroll
            for (int k = 0; k < 4; k++) { r.w[2 * k] = h2f((u16)(w4[k] & 0xFFFF)); r.w[2 * k + 1] = h2f((u16)(w4[k] >> 16)); }
        } else {
            r.w[0] = h2f(p[0]);
        }
        return r;
    }
    struct X { float v[8]; };
    static __device__ X loadx(const Args &a, int j, int u) {
        const float *x = a.xf + (i64)j * a.cols + (i64)u * N;
        X xv;
        if (VEC) {  // two 16-byte loads instead of eight 4-byte ones (x rows are 32-byte aligned)
            const float4 x0 = ((const float4 *)x)[0], x1 = ((const float4 *)x)[1];
            xv.v[0] = x0.x; xv.v[1] = x0.y; xv.v[2] = x0.z; xv.v[3] = x0.w;
            xv.v[4] = x1.x; xv.v[5] = x1.y; xv.v[6] = x1.z; xv.v[7] = x1.w;
        } else {
            xv.v[0] = x[0];
        }
        return xv;
    }
    static __device__ float fold(float acc, const R &r, const X &xv) {
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < N; k++) s += r.w[k] * xv.v[k];
        return acc + s;
    }
};

template <bool VEC>
struct TF32 {
    struct R { float w[4]; };
    static constexpr int N = VEC ? 4 : 1;
    static __device__ int units(int cols) { return cols / N; }
    static __device__ R load(const Args &a, i64 row, int u) {
        R r;
        const float *p = (const float *)a.q + row * a.cols + (i64)u * N;
        if (VEC) { const float4 v = *(const float4 *)p; r.w[0] = v.x; r.w[1] = v.y; r.w[2] = v.z; r.w[3] = v.w; }
        else r.w[0] = p[0];
        return r;
    }
    struct X { float v[4]; };
    static __device__ X loadx(const Args &a, int j, int u) {
        const float *x = a.xf + (i64)j * a.cols + (i64)u * N;
        X xv;
        if (VEC) {  // one 16-byte load (x rows are 16-byte aligned)
            const float4 x0 = *(const float4 *)x;
            xv.v[0] = x0.x; xv.v[1] = x0.y; xv.v[2] = x0.z; xv.v[3] = x0.w;
        } else {
            xv.v[0] = x[0];
        }
        return xv;
    }
    static __device__ float fold(float acc, const R &r, const X &xv) {
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < N; k++) s += r.w[k] * xv.v[k];
        return acc + s;
    }
};
