// mmvk.cu: the mat-vec kernels of the types added for issue 25 (Q4_1, Q5_1, IQ4_NL,
// IQ4_XS, MXFP4, IQ3_S, IQ3_XXS, IQ2_XXS, IQ2_XS, IQ2_S, Q3_K, Q2_K, BF16), on mmvq.cuh's machinery: see mmvq.cu for the design and
// the traits' contract (R/load, X/loadx, fold). A separate source so that NVRTC
// compiles it beside mmvq.cu (the backend compiles sources in parallel).
//
// Every fold writes its float arithmetic with common.cuh's explicit-rounding helpers,
// so the compiler cannot contract it differently in the NT and two-row instantiations
// (each row keeps its single-row bits).
#include "mmvq.cuh"

// Q4_1: unit = one 32-value block, x = d·q + m.
struct TQ4_1 {
    struct R { int q[4]; float d, m; };
    static __device__ int units(int cols) { return cols / 32; }
    static __device__ R load(const Args &a, i64 row, int u) {
        const i64 b = row * (a.cols / 32) + u;
        R r; load4(a.q, b, r.q);
        const u32 dm = ((const u32 *)a.d)[b];
        r.d = h2f((u16)(dm & 0xFFFF));
        r.m = h2f((u16)(dm >> 16));
        return r;
    }
    typedef XBlock X;
    static __device__ X loadx(const Args &a, int j, int u) { return xblock(a, j, u); }
    static __device__ float fold(float acc, const R &r, const X &x) {
        const int s = q4_dot(r.q, x.x);
        return ffma_rn(fmul_rn(r.d, x.d), i2f_rn(s), ffma_rn(fmul_rn(r.m, x.d), i2f_rn(x.sum), acc));
    }
};

// Q5_1: unit = one 32-value block, the fifth bits from e, x = d·q + m.
struct TQ5_1 {
    struct R { int q[4]; u32 h; float d, m; };
    static __device__ int units(int cols) { return cols / 32; }
    static __device__ R load(const Args &a, i64 row, int u) {
        const i64 b = row * (a.cols / 32) + u;
        R r; load4(a.q, b, r.q);
        const u32 dm = ((const u32 *)a.d)[b];
        r.h = ((const u32 *)a.e)[b];
        r.d = h2f((u16)(dm & 0xFFFF));
        r.m = h2f((u16)(dm >> 16));
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
        return ffma_rn(fmul_rn(r.d, x.d), i2f_rn(s), ffma_rn(fmul_rn(r.m, x.d), i2f_rn(x.sum), acc));
    }
};

// lut_dot is the integer dot of 32 4-bit level indices into the table T0 … T3 (16 bytes)
// with a 32-value activation block, the indices in pack's halves order (word k: values
// 4k … 4k+3 in its low 16 bits, 16+4k … 16+4k+3 in its high ones; types.go's
// blockSplit.halves). Each half is four levels in the activations' order: two table
// lookups on the index's low three bits, then a select by its bit 3 — one index mask
// and one select mask a word, 12 operations for 8 values.
template <u32 T0, u32 T1, u32 T2, u32 T3>
static __device__ __forceinline__ int lut_dot(const int *q, const int *x) {
    int s = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const u32 w = (u32)q[k], i = w & 0x77777777u, sel = 0x32103210u | ((w & 0x88888888u) >> 1);
        const u32 lo = prmt(prmt(T0, T1, i), prmt(T2, T3, i), sel);
        const u32 i2 = i >> 16, sel2 = sel >> 16;
        const u32 hi = prmt(prmt(T0, T1, i2), prmt(T2, T3, i2), sel2);
        s = dp4a((int)lo, x[k], s);
        s = dp4a((int)hi, x[k + 4], s);
    }
    return s;
}
static __device__ __forceinline__ int iq4_dot(const int *q, const int *x) { return lut_dot<IQ4_T0, IQ4_T1, IQ4_T2, IQ4_T3>(q, x); }

// IQ4_NL: unit = one 32-value block, x = d·level.
struct TIQ4_NL {
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
    static __device__ float fold(float acc, const R &r, const X &x) { return fold1(acc, r.d, x.d, iq4_dot(r.q, x.x)); }
};

// IQ4_XS: unit = one 32-value group g of a block (its 16 bytes of indices), x =
// d·ls·level with the group's scale ls − 32 from e (pack decodes it from the block's
// two scale fields once, at load).
struct TIQ4_XS {
    struct R { int q[4]; float d; };
    static __device__ int units(int cols) { return cols / 32; }
    static __device__ R load(const Args &a, i64 row, int u) {
        const i64 b = row * (a.cols / 256) + u / 8;
        R r; load4(a.q, b * 8 + u % 8, r.q);
        r.d = fmul_rn(h2f(((const u16 *)a.d)[b]), i2f_rn(((const i8 *)a.e)[b * 8 + u % 8]));
        return r;
    }
    typedef XBlock X;
    static __device__ X loadx(const Args &a, int j, int u) { return xblock(a, j, u); }
    static __device__ float fold(float acc, const R &r, const X &x) { return fold1(acc, r.d, x.d, iq4_dot(r.q, x.x)); }
};

// MXFP4: unit = one 32-value block, x = level·2^(e−128) (the doubled E2M1 levels).
struct TMXFP4 {
    struct R { int q[4]; float d; };
    static __device__ int units(int cols) { return cols / 32; }
    static __device__ R load(const Args &a, i64 row, int u) {
        const i64 b = row * (a.cols / 32) + u;
        R r; load4(a.q, b, r.q);
        r.d = e8m0_half(((const u8 *)a.d)[b]);
        return r;
    }
    typedef XBlock X;
    static __device__ X loadx(const Args &a, int j, int u) { return xblock(a, j, u); }
    static __device__ float fold(float acc, const R &r, const X &x) {
        return fold1(acc, r.d, x.d, lut_dot<FP4_T0, FP4_T1, FP4_T2, FP4_T3>(r.q, x.x));
    }
};

// IQ3_S: unit = one 32-value group g of a block: eight runs of four values whose
// magnitudes are iq3s_grid[qs[8g + r] | (bit r of qh[g]) << 8], the signs in word g of
// signs, the scale d·(1 + 2s) with s the nibble g%2 of scales[g/2]. The grid words are
// read at load (the 2 KiB table stays in L1).
struct TIQ3_S {
    struct R { u32 w[8]; u32 sn; float d; };
    static __device__ int units(int cols) { return cols / 32; }
    static __device__ R load(const Args &a, i64 row, int u) {
        const i64 b = row * (a.cols / 256) + u / 8;
        const int g = u % 8;
        const int2 qs = *(const int2 *)((const u8 *)a.q + b * 64 + 8 * g);
        const u8 *x = (const u8 *)a.e + b * 44;  // qh[8], signs[32], scales[4]
        const u32 qh = x[g];
        R r;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const u32 lo = ((u32)(k < 4 ? qs.x : qs.y) >> (8 * (k % 4))) & 0xFF;
            r.w[k] = iq3s_grid[lo | (((qh >> k) & 1) << 8)];
        }
        r.sn = *(const u32 *)(x + 8 + 4 * g);
        r.d = fmul_rn(h2f(((const u16 *)a.d)[b]), i2f_rn(1 + 2 * ((x[40 + g / 2] >> (4 * (g % 2))) & 0xF)));
        return r;
    }
    typedef XBlock X;
    static __device__ X loadx(const Args &a, int j, int u) { return xblock(a, j, u); }
    static __device__ float fold(float acc, const R &r, const X &x) {
        int s = 0;
#pragma unroll
        for (int k = 0; k < 8; k++) s = iq3s_dot4(r.w[k], r.sn >> (4 * k), x.x[k], s);
        return fold1(acc, r.d, x.d, s);
    }
};

// TIQG: the codebook types IQ2_XXS, IQ2_XS, IQ2_S and IQ3_XXS (W), unit = one
// 32-value group (common.cuh's iqg decodes it: magnitudes from the grid, signs, the
// half groups' odd scales 2s+1); x = d·fscale/2·(2s+1)·mag·sign, so the integer dot
// takes the odd scales and d·fscale/2 (exact) multiplies at the end. Signs as IQ3_S's.
template <int W>
struct TIQG {
    struct R { IQG v; float d; };
    static __device__ int units(int cols) { return cols / 32; }
    static __device__ R load(const Args &a, i64 row, int u) {
        const i64 b = row * (a.cols / 256) + u / 8;
        R r;
        r.v = iqg<W>(a.q, a.e, b, u % 8);
        r.d = fmul_rn(h2f(((const u16 *)a.d)[b]), 0.5f * iqg_fscale<W>());
        return r;
    }
    typedef XBlock X;
    static __device__ X loadx(const Args &a, int j, int u) { return xblock(a, j, u); }
    static __device__ float fold(float acc, const R &r, const X &x) {
        int lo = 0, hi = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) lo = iq3s_dot4(r.v.w[k], r.v.sn >> (4 * k), x.x[k], lo);
#pragma unroll
        for (int k = 4; k < 8; k++) hi = iq3s_dot4(r.v.w[k], r.v.sn >> (4 * k), x.x[k], hi);
        return fold1(acc, r.d, x.d, r.v.s0 * lo + r.v.s1 * hi);
    }
};

// K2X is the activations of a Q2_K/Q3_K unit: 16 values (4 words) of each of the four
// 32-value blocks 4n … 4n+3 of the super-block, at offset 16h, their scales and sums.
struct K2X { int x[4][4]; float d[4]; int sum[4]; };
static __device__ __forceinline__ K2X k2x(const Args &a, int jrow, int u) {
    const int b = u / 4, n = (u % 4) / 2, h = u % 2;
    const int *xp = a.xq + ((i64)jrow * a.cols + b * 256 + n * 128 + h * 16) / 4;
    const float4 d = *(const float4 *)(a.xd + (i64)jrow * (a.cols / 32) + b * 8 + n * 4);
    K2X x;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const int4 v = *(const int4 *)(xp + j * 8);
        x.x[j][0] = v.x; x.x[j][1] = v.y; x.x[j][2] = v.z; x.x[j][3] = v.w;
        x.sum[j] = sum8(x.x[j], 4);
    }
    x.d[0] = d.x; x.d[1] = d.y; x.d[2] = d.z; x.d[3] = d.w;
    return x;
}

// Q3_K: unit = 64 values of a super-block: half n (values 128n …), positions 16h …
// 16h+15 of each of its four 32-value rows j (qs bits 2j, hmask bit 4n + j; value
// 128n + 32j + 16h + i), which share the row's scale is = 8n + 2j + h. Four lanes take
// a block: their qs loads cover its 64 bytes, the hmask ones its 32 (twice), their x
// loads 256 contiguous values. (A 32-value unit, 8 positions a row, decoded the four
// scales for half as many values.) A value is (qs bits) − 4 where its hmask bit is
// clear: the dot is that of the qs bits less 4 × that of the clear bits.
struct TQ3_K {
    struct R { int qs[4], nh[4]; int sc[4]; float d; };
    static __device__ int units(int cols) { return cols / 64; }
    static __device__ R load(const Args &a, i64 row, int u) {
        const i64 b = row * (a.cols / 256) + u / 4;
        const int n = (u % 4) / 2, h = u % 2;
        const u8 *body = (const u8 *)a.q + b * 96;
        const int4 qs = *(const int4 *)(body + 32 + 32 * n + 16 * h), hm = *(const int4 *)(body + 16 * h);
        const u32 *s = (const u32 *)((const u8 *)a.e + b * 12);
        const u32 w0 = s[0], w1 = s[1], w2 = s[2];
        R r;
        r.qs[0] = qs.x; r.qs[1] = qs.y; r.qs[2] = qs.z; r.qs[3] = qs.w;
        // the clear hmask bits of half n, rows j at bits j of each byte
        r.nh[0] = (int)((~(u32)hm.x >> (4 * n)) & 0x0F0F0F0Fu);
        r.nh[1] = (int)((~(u32)hm.y >> (4 * n)) & 0x0F0F0F0Fu);
        r.nh[2] = (int)((~(u32)hm.z >> (4 * n)) & 0x0F0F0F0Fu);
        r.nh[3] = (int)((~(u32)hm.w >> (4 * n)) & 0x0F0F0F0Fu);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int by = 8 * (h + 2 * (j % 2));  // bit offset of byte h + 2(j%2) in its word
            const u32 lo = ((j < 2 ? w0 : w1) >> (by + 4 * n)) & 0xF;
            const u32 hi = (w2 >> (by + 2 * (2 * n + j / 2))) & 3;
            r.sc[j] = (int)(lo | (hi << 4)) - 32;
        }
        r.d = h2f(((const u16 *)a.d)[b]);
        return r;
    }
    typedef K2X X;
    static __device__ X loadx(const Args &a, int j, int u) { return k2x(a, j, u); }
    static __device__ float fold(float acc, const R &r, const X &x) {
        float t = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int sq = 0, sh = 0;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                sq = dp4a((r.qs[k] >> (2 * j)) & 0x03030303, x.x[j][k], sq);
                sh = dp4a((r.nh[k] >> j) & 0x01010101, x.x[j][k], sh);
            }
            const int s = r.sc[j] * (sq - 4 * sh);
            t = j == 0 ? fmul_rn(x.d[0], i2f_rn(s)) : ffma_rn(x.d[j], i2f_rn(s), t);
        }
        return ffma_rn(r.d, t, acc);
    }
};

// Q2_K: unit as Q3_K's (the 2-bit qs alone); x = d·(sc & 15)·q − dmin·(sc >> 4) with
// the byte sc = scales[8n + 2j + h].
struct TQ2_K {
    struct R { int qs[4]; int sc[4], m[4]; float d, dmin; };
    static __device__ int units(int cols) { return cols / 64; }
    static __device__ R load(const Args &a, i64 row, int u) {
        const i64 b = row * (a.cols / 256) + u / 4;
        const int n = (u % 4) / 2, h = u % 2;
        const int4 qs = *(const int4 *)((const u8 *)a.q + b * 64 + 32 * n + 16 * h);
        const int4 s = ((const int4 *)a.e)[b];
        const u32 wa = (u32)(n ? s.z : s.x), wb = (u32)(n ? s.w : s.y);  // scale bytes 8n … 8n+3, 8n+4 … 8n+7
        const u32 dm = ((const u32 *)a.d)[b];
        R r;
        r.qs[0] = qs.x; r.qs[1] = qs.y; r.qs[2] = qs.z; r.qs[3] = qs.w;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const u32 sc = ((j < 2 ? wa : wb) >> (8 * (h + 2 * (j % 2)))) & 0xFF;
            r.sc[j] = (int)(sc & 0xF);
            r.m[j] = (int)(sc >> 4);
        }
        r.d = h2f((u16)(dm & 0xFFFF));
        r.dmin = h2f((u16)(dm >> 16));
        return r;
    }
    typedef K2X X;
    static __device__ X loadx(const Args &a, int j, int u) { return k2x(a, j, u); }
    static __device__ float fold(float acc, const R &r, const X &x) {
        float ta = 0.0f, tb = 0.0f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int s = 0;
#pragma unroll
            for (int k = 0; k < 4; k++) s = dp4a((r.qs[k] >> (2 * j)) & 0x03030303, x.x[j][k], s);
            ta = ffma_rn(x.d[j], i2f_rn(r.sc[j] * s), ta);
            tb = ffma_rn(x.d[j], i2f_rn(r.m[j] * x.sum[j]), tb);
        }
        return ffma_rn(r.d, ta, ffma_rn(-r.dmin, tb, acc));
    }
};

// BF16 (VEC: 8 values per unit, needs cols % 8 == 0; else one per unit), f32
// activations; the products are summed per unit in order, as TF16 does.
template <bool VEC>
struct TBF16 {
    struct R { float w[8]; };
    static constexpr int N = VEC ? 8 : 1;
    static __device__ int units(int cols) { return cols / N; }
    static __device__ float bf(u32 h) { return __int_as_float((int)(h << 16)); }
    static __device__ R load(const Args &a, i64 row, int u) {
        R r;
        const u16 *p = (const u16 *)a.q + row * a.cols + (i64)u * N;
        if (VEC) {
            const int4 v = *(const int4 *)p;
            const u32 w4[4] = {(u32)v.x, (u32)v.y, (u32)v.z, (u32)v.w};
#pragma unroll
            for (int k = 0; k < 4; k++) { r.w[2 * k] = bf(w4[k] & 0xFFFF); r.w[2 * k + 1] = bf(w4[k] >> 16); }
        } else {
            r.w[0] = bf(p[0]);
        }
        return r;
    }
    struct X { float v[8]; };
    static __device__ X loadx(const Args &a, int j, int u) {
        const float *x = a.xf + (i64)j * a.cols + (i64)u * N;
        X xv;
        if (VEC) {
            const float4 x0 = ((const float4 *)x)[0], x1 = ((const float4 *)x)[1];
            xv.v[0] = x0.x; xv.v[1] = x0.y; xv.v[2] = x0.z; xv.v[3] = x0.w;
            xv.v[4] = x1.x; xv.v[5] = x1.y; xv.v[6] = x1.z; xv.v[7] = x1.w;
        } else {
            xv.v[0] = x[0];
        }
        return xv;
    }
    static __device__ float fold(float acc, const R &r, const X &xv) {
        float s = fmul_rn(r.w[0], xv.v[0]);
#pragma unroll
        for (int k = 1; k < N; k++) s = ffma_rn(r.w[k], xv.v[k], s);
        return fadd_rn(acc, s);
    }
};

// The per-type instantiations (MMVQ/MMVQR lines) are appended at compile time from the
// weight-type table, core/backend/cuda/types.go.
