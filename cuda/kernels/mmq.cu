// mmq.cu: dst[j][row] = w[row] · x[j] for a few activation rows (nt = 2 … the tier's
// GEMMMinRows - 1) on the int8 tensor cores, for the quantized weight types. The weight
// rows are the M dimension of mma.sync (16 per block), the activation rows (8-bit blocks
// from quantize.cu, as the mat-vec kernels read them) the N dimension in tiles of 8 (up
// to G = 8 tiles, 64 rows, per block; the columns past nt are computed and dropped);
// each round of 32 weight units is staged through shared memory (Stage) or read from
// global memory, the round's activation scales are copied to shared memory during the
// round before (xs_fetch, cp.async), and each unit is unpacked into registers once and
// used for every activation tile of the block. Needs sm_80 (m16n8k32 / m16n8k16 .s8); the backend's
// chooser (planMatMul) never picks it below.
//
// Row identity with the mat-vec kernels (which serve nt = 1): integer dots are exact, and
// every output is summed exactly as mmvq_rows sums it. There lane l of a warp adds the
// units l, l+32, l+64, … of its row in that order (common.cuh's fold1/foldk), then the
// warp adds the 32 lane sums with the xor tree 16, 8, 4, 2, 1. Here the W warps of a
// block (8 or 16) share the units: warp w's slot s (of 32 / W) takes the units of lane
// l = w + W·s, in the same order, with the same fold; slots (the high bits of l: xor 16,
// and xor 8 when W = 8) are added in registers and the warps (the low bits) through
// shared memory, in the tree's order. Nothing depends on nt, on W, on the tile an
// activation row lands in, or on the other rows.
//
// Each type T has units (mmvq.cu's count), RQ, RD, RE (the bytes of a row's 32 units in
// its q, d, e arrays), STAGED (whether rounds go through shared memory), XS (activation
// scales a round), XSG (the most tiles whose kernel stages them), W and load (a unit of
// weight rows g and g+8, g = lane / 4, as mma A fragments and per-row factors, from RowP
// row pointers) and tile (one activation tile: B fragments, the mma, the fold into the
// lane's four outputs, the scales from X).
#include "common.cuh"

struct QArgs {
    const void *q, *d, *e;  // weight arrays (layout per type: common.cuh)
    const int *xq;          // quantized activations, as ints (4 values each)
    const float *xd;        // their scales, one per 32 values
    int cols, nt;
    // zero: columns past nt read zeros (a test per load) instead of the last row (a
    // clamp). The kernels of one or two tiles keep the test, as measured in v7 (with
    // the clamp their K-quant forms took 123-128 registers instead of 80-99: NVRTC 11.8,
    // sm_90); a kernel sets it from its G, a constant, so the other form compiles away.
    bool zero;
};

// c += a · b: a 16 × 32 int8 tile (row major: rows g, g+8 × k 4t…4t+3, 16+4t…), b 32 × 8
// (k 4t…, 16+4t… × column g), c 16 × 8 int32 (rows g, g+8 × columns 2t, 2t+1).
static __device__ __forceinline__ void mma_k32(int *c, u32 a0, u32 a1, u32 a2, u32 a3, u32 b0, u32 b1) {
#if __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#else
    asm volatile("trap;");
#endif
}

// c += a · b for k = 16 (a: rows g, g+8 × k 4t…4t+3; b: k 4t… × column g).
static __device__ __forceinline__ void mma_k16(int *c, u32 a0, u32 a1, u32 b0) {
#if __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(b0));
#else
    asm volatile("trap;");
#endif
}

#define ONES 0x01010101u

// RowP points at one weight row's arrays (or at its round of 32 units staged in shared
// memory); a type's load indexes them by unit (relative to the round when staged).
struct RowP { const u8 *q, *d, *e; };

// rowp is row r's RowP in global memory: each array holds R bytes per 32 units (the
// type's RQ, RD, RE), so a row of U units is U·R/32 bytes.
template <class T>
static __device__ __forceinline__ RowP rowp(const QArgs &a, i64 r, int U) {
    RowP p;
    p.q = (const u8 *)a.q + r * (U * T::RQ / 32);
    p.d = (const u8 *)a.d + r * (U * T::RD / 32);
    p.e = (const u8 *)a.e + r * (U * T::RE / 32);
    return p;
}

// sub4: each byte of v (each below 128) minus the byte of o4, as a signed byte.
static __device__ __forceinline__ u32 sub4(u32 v, u32 o4) { return ((v | 0x80808080u) - o4) ^ 0x80808080u; }

// xrow is the activation row that column j of a tile reads: j, or the last row past nt.
// A column past nt is computed but never stored (an mma's column depends on its own B
// column only), so it may read any row or zeros (QArgs.zero).
static __device__ __forceinline__ int xrow(const QArgs &a, int j) { return min(j, a.nt - 1); }
// xword is word k of unit u's 32-value block of activation row xrow(j).
static __device__ __forceinline__ u32 xword(const QArgs &a, int j, int blk32, int k) {
    if (a.zero) return j < a.nt ? (u32)a.xq[(i64)j * (a.cols / 4) + blk32 * 8 + k] : 0u;
    return (u32)a.xq[(i64)xrow(a, j) * (a.cols / 4) + blk32 * 8 + k];
}
// xword2 is words 2t and 2t+1 of unit blk32's 32-value block of activation row xrow(j),
// in one 8-byte load: the B fragment of a k = 32 mma whose k slots are permuted so that
// lane t's two words are adjacent (slot 4t…4t+3 holds word 2t, slot 16+4t… word 2t+1;
// the A fragments of the types that use it take the same permutation, and an integer dot
// does not depend on the order of its terms).
static __device__ __forceinline__ uint2 xword2(const QArgs &a, int j, int blk32, int t) {
    if (a.zero && j >= a.nt) return make_uint2(0u, 0u);
    return *(const uint2 *)(a.xq + (i64)xrow(a, j) * (a.cols / 4) + blk32 * 8 + 2 * t);
}
// xscale is the scale of 32-value block blk32 of activation row xrow(j).
static __device__ __forceinline__ float xscale(const QArgs &a, int j, int blk32) {
    if (a.zero) return j < a.nt ? a.xd[(i64)j * (a.cols / 32) + blk32] : 0.0f;
    return a.xd[(i64)xrow(a, j) * (a.cols / 32) + blk32];
}

// A tile reads its activation scales through one of two sources: XGlob (global memory,
// for the last, partial round) or XSmem (the round's scales staged in shared memory by
// xs_fetch: s[(blk32 - b0) * (8G + 1) + j - j0]).
struct XGlob {
    __device__ __forceinline__ float get(const QArgs &a, int j, int blk32) const { return xscale(a, j, blk32); }
};
template <int G>
struct XSmem {
    const float *s;
    int b0, j0;
    __device__ __forceinline__ float get(const QArgs &, int j, int blk32) const { return s[(blk32 - b0) * (8 * G + 1) + j - j0]; }
};

// cp_async4 copies 4 bytes from global to shared memory without passing through registers
// (sm_80; the kernels never run below it, the plain copy only keeps older arches compiling).
static __device__ __forceinline__ void cp_async4(float *dst, const float *src) {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"((u32)__cvta_generic_to_shared(dst)), "l"(src) : "memory");
#else
    *dst = *src;
#endif
}
// cp_async_wait waits for this thread's copies (a __syncthreads after it shows everyone's).
static __device__ __forceinline__ void cp_async_wait() {
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// xs_fetch starts copying the activation scales of a round (T::XS 32-value blocks from
// block b0) of the group's rows j00 … j00+8G-1 (xrow's clamp; the tiles past nt are not
// read and not copied) into s, transposed to [block][row] with an odd row stride: a
// warp's copies (consecutive blocks of one row) and its tile reads (rows 2t, 2t+1 of one
// block: four addresses) are conflict-free, where a tile read them from global memory as
// four-byte loads touching four rows each (perf-cuda.md v12).
template <class T, int G, int NTH>
static __device__ __forceinline__ void xs_fetch(const QArgs &a, float *s, int j00, int b0) {
    constexpr int R = 8 * G, N = R * T::XS;
    // the rows of the tiles a kernel of four or eight computes (those that hold a row below nt)
    const int lim = G <= 2 ? R : min(R, (a.nt - j00 + 7) / 8 * 8);
#pragma unroll
    for (int i = 0; i < (N + NTH - 1) / NTH; i++) {
        const int c = threadIdx.x + NTH * i, row = c / T::XS, k = c % T::XS;
        if ((N % NTH == 0 || c < N) && row < lim) cp_async4(s + k * (R + 1) + row, a.xd + (i64)xrow(a, j00 + row) * (a.cols / 32) + b0 + k);
    }
}

// Q4_0: unit = one block; a = nibbles - 8 (mmvq's s - 8·sum).
struct MQ4_0 {
    static __device__ int units(int cols) { return cols / 32; }
    struct W { u32 a[4]; float d[2]; };
    static constexpr int RQ = 512, RD = 64, RE = 0;  // bytes of a row's round of 32 units
    static constexpr int XS = 32;                    // activation scales of a round (32 units)
    static constexpr bool STAGED = true;             // through shared memory (Stage)
    // XSG: the kernels of up to XSG tiles stage each round's activation scales in shared
    // memory (xs_fetch) rather than reading them in every tile (perf-cuda.md v13).
    static constexpr int XSG = 8;
    static constexpr bool KS = false;  // (see MQ4_K)
    // The k slots of lane t are activation words 2t, 2t+1 (xword2): values 8t … 8t+7, the
    // low nibbles of q words 2t, 2t+1 for t < 2 and the high nibbles of words 2t-4, 2t-3.
    static __device__ W load(const RowP &pa, const RowP &pb, int u, int t) {
        const int o = u * 4 + 2 * (t & 1), sh = 4 * (t >> 1);
        const uint2 va = *(const uint2 *)((const u32 *)pa.q + o), vb = *(const uint2 *)((const u32 *)pb.q + o);
        W w;
        w.a[0] = sub4((va.x >> sh) & 0x0F0F0F0F, 0x08080808);
        w.a[1] = sub4((vb.x >> sh) & 0x0F0F0F0F, 0x08080808);
        w.a[2] = sub4((va.y >> sh) & 0x0F0F0F0F, 0x08080808);
        w.a[3] = sub4((vb.y >> sh) & 0x0F0F0F0F, 0x08080808);
        w.d[0] = h2f(((const u16 *)pa.d)[u]);
        w.d[1] = h2f(((const u16 *)pb.d)[u]);
        return w;
    }
    template <class X>
    static __device__ void tile(const QArgs &a, const X &xs, const W &w, int u, int j0, int g, int t, float *acc) {
        int c[4] = {0, 0, 0, 0};
        const uint2 x = xword2(a, j0 + g, u, t);
        mma_k32(c, w.a[0], w.a[1], w.a[2], w.a[3], x.x, x.y);
        const float dx0 = xs.get(a, j0 + 2 * t, u), dx1 = xs.get(a, j0 + 2 * t + 1, u);
        acc[0] = fold1(acc[0], w.d[0], dx0, c[0]);
        acc[1] = fold1(acc[1], w.d[0], dx1, c[1]);
        acc[2] = fold1(acc[2], w.d[1], dx0, c[2]);
        acc[3] = fold1(acc[3], w.d[1], dx1, c[3]);
    }
};

// Q5_0: unit = one block; a = (nibble | fifth bit) - 16 (mmvq's s - 16·sum).
struct MQ5_0 : MQ4_0 {
    static constexpr int RQ = 512, RD = 64, RE = 128;
    // (the k slots as MQ4_0's; the fifth bits of values 8t … 8t+7 are bits 8t … 8t+7)
    static __device__ W load(const RowP &pa, const RowP &pb, int u, int t) {
        const int o = u * 4 + 2 * (t & 1), sh = 4 * (t >> 1);
        const uint2 va = *(const uint2 *)((const u32 *)pa.q + o), vb = *(const uint2 *)((const u32 *)pb.q + o);
        const u32 ha = ((const u32 *)pa.e)[u], hb = ((const u32 *)pb.e)[u];
        W w;
        w.a[0] = sub4(((va.x >> sh) & 0x0F0F0F0F) | spread5(ha >> (8 * t)), 0x10101010);
        w.a[1] = sub4(((vb.x >> sh) & 0x0F0F0F0F) | spread5(hb >> (8 * t)), 0x10101010);
        w.a[2] = sub4(((va.y >> sh) & 0x0F0F0F0F) | spread5(ha >> (8 * t + 4)), 0x10101010);
        w.a[3] = sub4(((vb.y >> sh) & 0x0F0F0F0F) | spread5(hb >> (8 * t + 4)), 0x10101010);
        w.d[0] = h2f(((const u16 *)pa.d)[u]);
        w.d[1] = h2f(((const u16 *)pb.d)[u]);
        return w;
    }
};

// Q8_0: unit = one block of int8 values.
struct MQ8_0 : MQ4_0 {
    static constexpr int RQ = 1024, RD = 64, RE = 0;
    static __device__ W load(const RowP &pa, const RowP &pb, int u, int t) {
        // (the k slots as MQ4_0's: lane t's are words 2t, 2t+1 of the block)
        const uint2 qa = *(const uint2 *)((const u32 *)pa.q + u * 8 + 2 * t), qb = *(const uint2 *)((const u32 *)pb.q + u * 8 + 2 * t);
        W w;
        w.a[0] = qa.x;
        w.a[1] = qb.x;
        w.a[2] = qa.y;
        w.a[3] = qb.y;
        w.d[0] = h2f(((const u16 *)pa.d)[u]);
        w.d[1] = h2f(((const u16 *)pb.d)[u]);
        return w;
    }
};

// Q6_K: unit = 32 values (mmvq.cu TQ6_K): two halves of 16 with their own scale, each a
// k = 16 mma of (ql | qh << 4) - 32; the unit's integer is sc0·s0 + sc1·s1.
struct MQ6_K {
    static __device__ int units(int cols) { return cols / 32; }
    struct W { u32 lo[2], hi[2]; int sc[2][2]; float d[2]; };
    static constexpr int RQ = 832, RD = 8, RE = 0, XS = 32;
    static constexpr bool STAGED = true;
    static constexpr int XSG = 8;
    static constexpr bool KS = false;
    static __device__ W load(const RowP &pa, const RowP &pb, int u, int t) {
        const int b = u / 8, n = (u % 8) / 4, part = u % 4, shift = part >= 2 ? 4 : 0, hshift = 2 * part;
        W w;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const RowP &p = i ? pb : pa;
            const u8 *body = p.q + b * 208;
            const u32 *ql = (const u32 *)(body + n * 64 + (part & 1) * 32), *qh = (const u32 *)(body + 128 + n * 32);
            w.lo[i] = sub4(((ql[t] >> shift) & 0x0F0F0F0F) | (((qh[t] >> hshift) & 0x03030303) << 4), 0x20202020);
            w.hi[i] = sub4(((ql[4 + t] >> shift) & 0x0F0F0F0F) | (((qh[4 + t] >> hshift) & 0x03030303) << 4), 0x20202020);
            const u16 sc = *(const u16 *)(body + 192 + n * 8 + part * 2);
            w.sc[i][0] = (i8)(sc & 0xFF);
            w.sc[i][1] = (i8)(sc >> 8);
            w.d[i] = h2f(((const u16 *)p.d)[b]);
        }
        return w;
    }
    template <class X>
    static __device__ void tile(const QArgs &a, const X &xs, const W &w, int u, int j0, int g, int t, float *acc) {
        int c0[4] = {0, 0, 0, 0}, c1[4] = {0, 0, 0, 0};
        mma_k16(c0, w.lo[0], w.lo[1], xword(a, j0 + g, u, t));
        mma_k16(c1, w.hi[0], w.hi[1], xword(a, j0 + g, u, 4 + t));
        const float dx[2] = {xs.get(a, j0 + 2 * t, u), xs.get(a, j0 + 2 * t + 1, u)};
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int i = e >> 1;
            acc[e] = fold1(acc[e], w.d[i], dx[e & 1], w.sc[i][0] * c0[e] + w.sc[i][1] * c1[e]);
        }
    }
};

// Q4_K: unit = 32 values (mmvq.cu TQ4_K): 16 of sub-block 2j (low nibbles of half h of
// slice j) and 16 of 2j+1 (high nibbles), each a k = 16 mma, with the activation sums
// (an mma against ones) for the mins.
struct MQ4_K {
    static __device__ int units(int cols) { return cols / 32; }
    struct W { u32 lo[2], hi[2]; KScale k[2]; };
    static constexpr int RQ = 576, RD = 0, RE = 0, XS = 32;
    // Staged, Q4_K and Q5_K took 139-250 registers and ran 1.1-1.6× slower than from
    // global memory (H200, BenchmarkMatMul), so they read global memory.
    static constexpr bool STAGED = false;
    // Staged scales made the kernels of four and eight tiles 1.00-1.09× slower (H200,
    // perf-cuda.md v13): those read them in every tile, as before.
    static constexpr int XSG = 2;
    // KS: the kernels that stage the activation scales (one and two tiles) also decode
    // each round's KScales once per block into shared memory (KStage: 256 a round, one
    // per row and 64-value slice) and read them there (MQ4_KS), where each lane decoded
    // its two rows' itself, the four lanes of a quad the same ones: a round of four
    // units per warp took 710 instructions, 540 with KStage (SASS, NVRTC 11.8), and
    // 14336 × 4096 at nt 2-8 39.0-39.7 µs, 34.0-35.9 with it (nt 12-16: 51.9-54.2,
    // 45.8-48.4; H200, perf-cuda.md v15). The same kscale, so the same bits.
#ifdef MMQ_NO_KS
    static constexpr bool KS = false;
#else
    static constexpr bool KS = true;
#endif
    static __device__ W load(const RowP &pa, const RowP &pb, int u, int t) {
        const int b = u / 8, j = (u / 2) % 4, h = u % 2;
        W w;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const u8 *blk = (i ? pb : pa).q + b * 144;
            const u32 v = *(const u32 *)(blk + 16 + j * 32 + h * 16 + 4 * t);
            w.lo[i] = v & 0x0F0F0F0F;
            w.hi[i] = (v >> 4) & 0x0F0F0F0F;
            w.k[i] = khead(blk, j);
        }
        return w;
    }
    template <class X>
    static __device__ void tile(const QArgs &a, const X &xs, const W &w, int u, int j0, int g, int t, float *acc) {
        const int b = u / 8, j = (u / 2) % 4, h = u % 2;
        // activation word t of the unit's 16 values of sub-block 2j, and of 2j+1 (32 values on)
        u32 xa = 0, xb = 0;
        if (!a.zero || j0 + g < a.nt) {
            const int *xp = a.xq + (i64)xrow(a, j0 + g) * (a.cols / 4) + (b * 256 + j * 64 + h * 16) / 4;
            xa = (u32)xp[t];
            xb = (u32)xp[8 + t];
        }
        int sa[4] = {0, 0, 0, 0}, sb[4] = {0, 0, 0, 0}, ma[4] = {0, 0, 0, 0}, mb[4] = {0, 0, 0, 0};
        mma_k16(sa, w.lo[0], w.lo[1], xa);
        mma_k16(sb, w.hi[0], w.hi[1], xb);
        mma_k16(ma, ONES, ONES, xa);
        mma_k16(mb, ONES, ONES, xb);
        const int s32 = b * 8 + j * 2;
        const float da[2] = {xs.get(a, j0 + 2 * t, s32), xs.get(a, j0 + 2 * t + 1, s32)};
        const float db[2] = {xs.get(a, j0 + 2 * t, s32 + 1), xs.get(a, j0 + 2 * t + 1, s32 + 1)};
        // (rows g and g+8 of an mma against ones are the same sums: one pair serves both)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[e] = foldk(acc[e], w.k[e >> 1], sa[e], sb[e], ma[e & 1], mb[e & 1], da[e & 1], db[e & 1]);
    }
};

// MQ4_KS is MQ4_K reading its KScales from KStage's shared memory (RowP.e: the row's
// KScales of the round) instead of decoding them (KSOf picks it where KStage runs).
struct MQ4_KS : MQ4_K {
    static __device__ W load(const RowP &pa, const RowP &pb, int u, int t) {
        const int b = u / 8, j = (u / 2) % 4, h = u % 2;
        W w;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const RowP &p = i ? pb : pa;
            const u32 v = *(const u32 *)(p.q + b * 144 + 16 + j * 32 + h * 16 + 4 * t);
            w.lo[i] = v & 0x0F0F0F0F;
            w.hi[i] = (v >> 4) & 0x0F0F0F0F;
            w.k[i] = ((const KScale *)p.e)[u % 32 / 2];  // (rounds start at multiples of 32 units: b % 4 · 4 + j)
        }
        return w;
    }
};
template <class T> struct KSOf { using type = T; };
template <> struct KSOf<MQ4_K> { using type = MQ4_KS; };

// Q5_K: unit = 64 values (mmvq.cu TQ5_K): sub-blocks 2j and 2j+1 of one block, 32 values
// each, (nibble | fifth bit) as k = 32 mmas, with the activation sums for the mins.
struct MQ5_K {
    static __device__ int units(int cols) { return cols / 64; }
    struct W { u32 lo[4], hi[4]; KScale k[2]; };  // [row g, row g+8, row g k+16, row g+8 k+16]
    static constexpr int RQ = 1408, RD = 0, RE = 0, XS = 64;
    static constexpr bool STAGED = false;
    static constexpr int XSG = 8;  // (MQ5_K12 serves one and two tiles: MMQ_T)
    static constexpr bool KS = false;
    static __device__ W load(const RowP &pa, const RowP &pb, int u, int t) {
        const int b = u / 4, j = u % 4;
        W w;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const u8 *blk = (i ? pb : pa).q + b * 176;
            const u32 *qs = (const u32 *)(blk + 48 + j * 32), *qh = (const u32 *)(blk + 16);
            // (the k slots as MQ4_0's: lane t's are the values of words 2t, 2t+1)
            const uint2 q2 = *(const uint2 *)(qs + 2 * t), h2 = *(const uint2 *)(qh + 2 * t);
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const u32 q = half ? q2.y : q2.x, hb = half ? h2.y : h2.x;
                w.lo[2 * half + i] = (q & 0x0F0F0F0F) | (((hb >> (2 * j)) & 0x01010101) << 4);
                w.hi[2 * half + i] = ((q >> 4) & 0x0F0F0F0F) | (((hb >> (2 * j + 1)) & 0x01010101) << 4);
            }
            w.k[i] = khead(blk, j);
        }
        return w;
    }
    template <class X>
    static __device__ void tile(const QArgs &a, const X &xs, const W &w, int u, int j0, int g, int t, float *acc) {
        const int jb = j0 + g;
        int sa[4] = {0, 0, 0, 0}, sb[4] = {0, 0, 0, 0}, ma[4] = {0, 0, 0, 0}, mb[4] = {0, 0, 0, 0};
        const uint2 x2a = xword2(a, jb, 2 * u, t), x2b = xword2(a, jb, 2 * u + 1, t);
        const u32 xa0 = x2a.x, xa1 = x2a.y, xb0 = x2b.x, xb1 = x2b.y;
        mma_k32(sa, w.lo[0], w.lo[1], w.lo[2], w.lo[3], xa0, xa1);
        mma_k32(sb, w.hi[0], w.hi[1], w.hi[2], w.hi[3], xb0, xb1);
        mma_k32(ma, ONES, ONES, ONES, ONES, xa0, xa1);
        mma_k32(mb, ONES, ONES, ONES, ONES, xb0, xb1);
        const float da[2] = {xs.get(a, j0 + 2 * t, 2 * u), xs.get(a, j0 + 2 * t + 1, 2 * u)};
        const float db[2] = {xs.get(a, j0 + 2 * t, 2 * u + 1), xs.get(a, j0 + 2 * t + 1, 2 * u + 1)};
#pragma unroll
        for (int e = 0; e < 4; e++) acc[e] = foldk(acc[e], w.k[e >> 1], sa[e], sb[e], ma[e & 1], mb[e & 1], da[e & 1], db[e & 1]);
    }
};

// MQ5_K12 is MQ5_K as it was at v12 (perf-cuda.md): k slots in the mma's order, four-byte
// loads, the scales from global memory. MQ5_K's kernels of one and two tiles use it: the
// v13 form took 128 and 182 registers there (80 and 128 before) and ran 1.08-1.34× slower
// at 2-12 rows (H200, perf-cuda.md v13), though faster from 16 rows on.
struct MQ5_K12 {
    static __device__ int units(int cols) { return cols / 64; }
    struct W { u32 lo[4], hi[4]; KScale k[2]; };  // [row g, row g+8, row g k+16, row g+8 k+16]
    static constexpr int RQ = 1408, RD = 0, RE = 0, XS = 64;
    static constexpr bool STAGED = false;
    static constexpr int XSG = 0;
    static constexpr bool KS = false;
    static __device__ W load(const RowP &pa, const RowP &pb, int u, int t) {
        const int b = u / 4, j = u % 4;
        W w;
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const u8 *blk = (i ? pb : pa).q + b * 176;
            const u32 *qs = (const u32 *)(blk + 48 + j * 32), *qh = (const u32 *)(blk + 16);
#pragma unroll
            for (int half = 0; half < 2; half++) {
                const u32 q = qs[4 * half + t], hb = qh[4 * half + t];
                w.lo[2 * half + i] = (q & 0x0F0F0F0F) | (((hb >> (2 * j)) & 0x01010101) << 4);
                w.hi[2 * half + i] = ((q >> 4) & 0x0F0F0F0F) | (((hb >> (2 * j + 1)) & 0x01010101) << 4);
            }
            w.k[i] = khead(blk, j);
        }
        return w;
    }
    template <class X>
    static __device__ void tile(const QArgs &a, const X &xs, const W &w, int u, int j0, int g, int t, float *acc) {
        const int jb = j0 + g;
        int sa[4] = {0, 0, 0, 0}, sb[4] = {0, 0, 0, 0}, ma[4] = {0, 0, 0, 0}, mb[4] = {0, 0, 0, 0};
        const u32 xa0 = xword(a, jb, 2 * u, t), xa1 = xword(a, jb, 2 * u, 4 + t);
        const u32 xb0 = xword(a, jb, 2 * u + 1, t), xb1 = xword(a, jb, 2 * u + 1, 4 + t);
        mma_k32(sa, w.lo[0], w.lo[1], w.lo[2], w.lo[3], xa0, xa1);
        mma_k32(sb, w.hi[0], w.hi[1], w.hi[2], w.hi[3], xb0, xb1);
        mma_k32(ma, ONES, ONES, ONES, ONES, xa0, xa1);
        mma_k32(mb, ONES, ONES, ONES, ONES, xb0, xb1);
        const float da[2] = {xs.get(a, j0 + 2 * t, 2 * u), xs.get(a, j0 + 2 * t + 1, 2 * u)};
        const float db[2] = {xs.get(a, j0 + 2 * t, 2 * u + 1), xs.get(a, j0 + 2 * t + 1, 2 * u + 1)};
#pragma unroll
        for (int e = 0; e < 4; e++) acc[e] = foldk(acc[e], w.k[e >> 1], sa[e], sb[e], ma[e & 1], mb[e & 1], da[e & 1], db[e & 1]);
    }
};

// mmq_rows's block: W warps (8 or 16) over 16 weight rows; warp w's S = 32 / W slots
// take the units of mat-vec lanes w, w + W, … (see the file comment).
//
// Stage holds a block's 16 weight rows of one round (32 units) in shared memory: each
// array's R bytes a row plus padding (16 bytes for q, 4 for d and e), which spreads the
// fragment loads of rows g = 0 … 7 over the banks. The block copies a round with 16-byte
// loads of q and 2-byte loads of d and e, all its NTH threads at once, into registers a
// round ahead of its use, so the bytes in flight per block are the whole next round
// (one lane's fragment words a unit were too few: perf-cuda.md v7).
template <class T, int NTH>
struct Stage {
    static constexpr int SQ = T::RQ + 16, SD = T::RD ? T::RD + 4 : 0, SE = T::RE ? T::RE + 4 : 0;
    static constexpr int BYTES = 16 * (SQ + SD + SE);
    static constexpr int NQ = (T::RQ + NTH - 1) / NTH;      // 16-byte chunks a thread
    static constexpr int ND = (8 * T::RD + NTH - 1) / NTH;  // 2-byte pieces a thread
    static constexpr int NE = (8 * T::RE + NTH - 1) / NTH;
    int4 rq[NQ];
    u16 rd[ND ? ND : 1], re[NE ? NE : 1];
    // fetch loads round r0 of rows row0 … row0+15 (the last row repeated past rows).
    __device__ __forceinline__ void fetch(const QArgs &a, int row0, int rows, int U, int r0) {
        const int tid = threadIdx.x;
#pragma unroll
        for (int i = 0; i < NQ; i++) {
            const int c = tid + NTH * i;
            if (c < T::RQ) {  // 16 rows × RQ/16 chunks
                const int row = c / (T::RQ / 16), col = c % (T::RQ / 16);
                const RowP p = rowp<T>(a, min(row0 + row, rows - 1), U);
                rq[i] = *(const int4 *)(p.q + (i64)(r0 / 32) * T::RQ + col * 16);
            }
        }
        if constexpr (ND > 0) {
#pragma unroll
        for (int i = 0; i < ND; i++) {
            const int c = tid + NTH * i;
            if (c < 8 * T::RD) {  // 16 rows × RD/2 pieces
                const int row = c / (T::RD / 2), col = c % (T::RD / 2);
                const RowP p = rowp<T>(a, min(row0 + row, rows - 1), U);
                rd[i] = ((const u16 *)(p.d + (i64)(r0 / 32) * T::RD))[col];
            }
        }
        }
        if constexpr (NE > 0) {
#pragma unroll
        for (int i = 0; i < NE; i++) {
            const int c = tid + NTH * i;
            if (c < 8 * T::RE) {
                const int row = c / (T::RE / 2), col = c % (T::RE / 2);
                const RowP p = rowp<T>(a, min(row0 + row, rows - 1), U);
                re[i] = ((const u16 *)(p.e + (i64)(r0 / 32) * T::RE))[col];
            }
        }
        }
    }
    // store writes the fetched round into sm.
    __device__ __forceinline__ void store(u8 *sm) const {
        const int tid = threadIdx.x;
#pragma unroll
        for (int i = 0; i < NQ; i++) {
            const int c = tid + NTH * i;
            if (c < T::RQ) *(int4 *)(sm + (c / (T::RQ / 16)) * SQ + (c % (T::RQ / 16)) * 16) = rq[i];
        }
        if constexpr (ND > 0) {
#pragma unroll
        for (int i = 0; i < ND; i++) {
            const int c = tid + NTH * i;
            if (c < 8 * T::RD) *(u16 *)(sm + 16 * SQ + (c / (T::RD / 2)) * SD + (c % (T::RD / 2)) * 2) = rd[i];
        }
        }
        if constexpr (NE > 0) {
#pragma unroll
        for (int i = 0; i < NE; i++) {
            const int c = tid + NTH * i;
            if (c < 8 * T::RE) *(u16 *)(sm + 16 * (SQ + SD) + (c / (T::RE / 2)) * SE + (c % (T::RE / 2)) * 2) = re[i];
        }
        }
    }
    // row is staged row r's RowP (units relative to the round).
    static __device__ __forceinline__ RowP row(const u8 *sm, int r) {
        RowP p;
        p.q = sm + r * SQ;
        p.d = sm + 16 * SQ + r * SD;
        p.e = sm + 16 * (SQ + SD) + r * SE;
        return p;
    }
};

template <bool C, class A, class B> struct Cond { using type = A; };
template <class A, class B> struct Cond<false, A, B> { using type = B; };

// KStage decodes a round's KScales (a KS type: Q4_K) of the block's 16 weight rows into
// shared memory: thread c < 256 takes row c / 16, block (c / 4) % 4 and slice c % 4 of
// the round's four 256-value blocks, fetch loading the block's 16-byte head into a
// register a round ahead and store decoding it (khead's kscale, so the same bits) into
// ks[row · KSR + c % 16]. The row stride of 17 KScales spreads the rows g = 0 … 7 a warp
// reads at once over the banks.
struct KStage {
    static constexpr int KSR = 17, N = 16 * KSR;  // KScales a row, a round
    int4 h;
    template <class T>
    __device__ __forceinline__ void fetch(const QArgs &a, int row0, int rows, int U, int r0) {
        const int c = threadIdx.x;
        if (c < 256) h = *(const int4 *)((const u8 *)a.q + (i64)min(row0 + c / 16, rows - 1) * (U * T::RQ / 32) + (i64)(r0 / 8 + (c / 4) % 4) * 144);
    }
    __device__ __forceinline__ void store(KScale *ks) const {
        const int c = threadIdx.x, j = c % 4;
        if (c < 256) {
            int sca, ma, scb, mb;
            k_scale_min(2 * j, h.y, h.z, h.w, sca, ma);
            k_scale_min(2 * j + 1, h.y, h.z, h.w, scb, mb);
            ks[(c / 16) * KSR + c % 16] = kscale(h2f((u16)(h.x & 0xFFFF)), h2f((u16)((u32)h.x >> 16)), sca, ma, scb, mb);
        }
    }
};

// mmq_round adds a full round's units to the slots' accumulators: slot s takes unit
// u + W·s (lu + W·s in the rows pa, pb, relative to a staged round). With one or two
// tiles the slots' loads are issued together (more bytes in flight); with four or eight
// one slot's weights at a time are live, next to the 32-64 accumulators, and a tile that
// starts past nt is skipped (warp-uniform).
template <class T, int G, int W, class X>
static __device__ __forceinline__ void mmq_round(const QArgs &a, const X &xs, const RowP &pa, const RowP &pb, int lu, int u, int j00,
                                                 int g, int t, float (&acc)[G][WARP / W][4]) {
    constexpr int S = WARP / W;
    if constexpr (G <= 2) {
        typename T::W w[S];
#pragma unroll
        for (int s = 0; s < S; s++) w[s] = T::load(pa, pb, lu + W * s, t);
#pragma unroll
        for (int s = 0; s < S; s++)
#pragma unroll
            for (int n = 0; n < G; n++) T::tile(a, xs, w[s], u + W * s, j00 + 8 * n, g, t, acc[n][s]);
    } else {
#pragma unroll
        for (int s = 0; s < S; s++) {
            const typename T::W w = T::load(pa, pb, lu + W * s, t);
#pragma unroll
            for (int n = 0; n < G; n++)
                if (j00 + 8 * n < a.nt) T::tile(a, xs, w, u + W * s, j00 + 8 * n, g, t, acc[n][s]);
        }
    }
}

// mmq_rows: weight rows 16·tile … 16·tile+15 times activation tiles G·group … G·group+G-1
// (8 rows each), by W warps. See the file comment for the order of the sums. G = 8
// serves 33-64 rows at the cost of the tiles they fill (mmq_round skips the others).
template <class T, int G, int W>
static __device__ __forceinline__ void mmq_rows(const QArgs &a, float *dst, int rows, const float *bias, int tile, int group) {
    constexpr int S = WARP / W;  // slots: mat-vec lanes a warp takes
    constexpr int NTH = W * WARP;
    // One buffer for the staged rounds (the weights, Stage, for the types that stage them,
    // then two rounds of activation scales, xs_fetch) and, after them, the warp tree's
    // partial sums (the first level's W/2 warps × G·4 outputs × 32 lanes).
    constexpr int RED = W / 2 * G * 4 * WARP * 4;
    constexpr bool XST = G <= T::XSG;
    constexpr int WST = T::STAGED ? Stage<T, NTH>::BYTES : 0, XSN = XST ? T::XS * (8 * G + 1) : 0;
    constexpr bool KST = XST && T::KS;  // KScales staged (KStage)
    constexpr int KSB = KST ? 2 * KStage::N * (int)sizeof(KScale) : 0;
    constexpr int SMB = WST + 2 * XSN * 4 + KSB > RED ? WST + 2 * XSN * 4 + KSB : RED;
    __shared__ __align__(16) u8 sm[SMB];
    float *xsb = (float *)(sm + WST);  // round r's scales at xsb + (r % 2)·XSN
    KScale *ksb = (KScale *)(sm + WST + 2 * XSN * 4);  // round r's KScales at ksb + (r % 2)·KStage::N
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP, g = lane >> 2, t = lane & 3;
    const int row0 = tile * 16, j00 = group * G * 8;
    const int U = T::units(a.cols);
    float acc[G][S][4];
#pragma unroll
    for (int n = 0; n < G; n++)
#pragma unroll
        for (int s = 0; s < S; s++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[n][s][e] = 0.0f;
    // Full rounds: the weights through shared memory (Stage) for the types that gain from
    // it, else straight from global memory with the slots' loads issued together; the
    // activation scales of round r + 1 are copied (cp.async, xs_fetch) during round r.
    const int full = U / WARP * WARP;
    if constexpr (T::STAGED) {
        Stage<T, NTH> st;
        if (full > 0) st.fetch(a, row0, rows, U, 0);  // weights: before the wait, as in mmvq.cu
        grid_dep_sync();
        if (full > 0) {
            if constexpr (XST) xs_fetch<T, G, NTH>(a, xsb, j00, 0);
            st.store(sm);
        }
        const RowP sa = Stage<T, NTH>::row(sm, g), sb = Stage<T, NTH>::row(sm, g + 8);
        for (int r0 = 0, k = 0; r0 < full; r0 += WARP, k ^= 1) {
            const bool more = r0 + WARP < full;
            if constexpr (XST) cp_async_wait();
            __syncthreads();  // this round's weights and scales are in; the other scale buffer is free
            if (more) {
                st.fetch(a, row0, rows, U, r0 + WARP);  // in flight during this round
                if constexpr (XST) xs_fetch<T, G, NTH>(a, xsb + (k ^ 1) * XSN, j00, (r0 + WARP) * T::XS / 32);
            }
            if constexpr (XST) mmq_round<T, G, W>(a, XSmem<G>{xsb + k * XSN, r0 * T::XS / 32, j00}, sa, sb, warp, r0 + warp, j00, g, t, acc);
            else mmq_round<T, G, W>(a, XGlob{}, sa, sb, warp, r0 + warp, j00, g, t, acc);
            if (more) {
                __syncthreads();  // every warp has read this round's weights
                st.store(sm);
            }
        }
    } else {
        KStage kst;
        if constexpr (KST) {
            if (full > 0) kst.fetch<T>(a, row0, rows, U, 0);  // weights: before the wait
        }
        grid_dep_sync();
        const RowP ga = rowp<T>(a, min(row0 + g, rows - 1), U), gb = rowp<T>(a, min(row0 + g + 8, rows - 1), U);
        if constexpr (XST) {
            if (full > 0) {
                xs_fetch<T, G, NTH>(a, xsb, j00, 0);
                if constexpr (KST) kst.store(ksb);
            }
            for (int r0 = 0, k = 0; r0 < full; r0 += WARP, k ^= 1) {
                const bool more = r0 + WARP < full;
                cp_async_wait();
                __syncthreads();  // this round's scales are in; the other buffers are free
                if (more) {
                    xs_fetch<T, G, NTH>(a, xsb + (k ^ 1) * XSN, j00, (r0 + WARP) * T::XS / 32);
                    if constexpr (KST) kst.fetch<T>(a, row0, rows, U, r0 + WARP);  // in flight during this round
                }
                RowP ka = ga, kb = gb;
                if constexpr (KST) {
                    ka.e = (const u8 *)(ksb + k * KStage::N + g * KStage::KSR);
                    kb.e = (const u8 *)(ksb + k * KStage::N + (g + 8) * KStage::KSR);
                }
                using TK = typename Cond<KST, typename KSOf<T>::type, T>::type;
                mmq_round<TK, G, W>(a, XSmem<G>{xsb + k * XSN, r0 * T::XS / 32, j00}, ka, kb, r0 + warp, r0 + warp, j00, g, t, acc);
                if constexpr (KST) {
                    if (more) kst.store(ksb + (k ^ 1) * KStage::N);  // read after the next round's barrier
                }
            }
        } else {
            for (int r0 = 0; r0 < full; r0 += WARP) mmq_round<T, G, W>(a, XGlob{}, ga, gb, r0 + warp, r0 + warp, j00, g, t, acc);
        }
    }
    // The last, partial round (units of mmvq's lanes warp + W·s below U), from global memory.
    const RowP ga = rowp<T>(a, min(row0 + g, rows - 1), U), gb = rowp<T>(a, min(row0 + g + 8, rows - 1), U);
#pragma unroll
    for (int s = 0; s < S; s++) {
        const int u = full + warp + W * s;
        if (u < U) {  // warp-uniform
            const typename T::W w = T::load(ga, gb, u, t);
#pragma unroll
            for (int n = 0; n < G; n++)
                if (G <= 2 || j00 + 8 * n < a.nt) T::tile(a, XGlob{}, w, u, j00 + 8 * n, g, t, acc[n][s]);
        }
    }
    // The slots are the high bits of the lane index: xor 16 (and, with 4 slots, xor 8)
    // are slots s ^ (S/2) (and s ^ 1), added in registers.
    float v[G][4];
#pragma unroll
    for (int n = 0; n < G; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            if constexpr (S == 4) v[n][e] = fadd_rn(fadd_rn(acc[n][0][e], acc[n][2][e]), fadd_rn(acc[n][1][e], acc[n][3][e]));
            else if constexpr (S == 2) v[n][e] = fadd_rn(acc[n][0][e], acc[n][1][e]);
            else v[n][e] = acc[n][0][e];
        }
    // The warps are the low bits: xor h for h = W/2, …, 2, 1 is warp w ^ h; at each level
    // warps h … 2h-1 hand their sums to warps 0 … h-1 through shared memory.
    float *red = (float *)sm;
#pragma unroll
    for (int h = W / 2; h >= 1; h /= 2) {
        __syncthreads();  // the stage, or the previous level's sums, have been read
        if (warp >= h && warp < 2 * h) {
#pragma unroll
            for (int n = 0; n < G; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) red[((warp - h) * G * 4 + n * 4 + e) * WARP + lane] = v[n][e];
        }
        __syncthreads();
        if (warp < h) {
#pragma unroll
            for (int n = 0; n < G; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) v[n][e] = fadd_rn(v[n][e], red[(warp * G * 4 + n * 4 + e) * WARP + lane]);
        }
    }
    if (warp == 0) {
#pragma unroll
        for (int n = 0; n < G; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int row = row0 + g + (e >= 2 ? 8 : 0), j = j00 + 8 * n + 2 * t + (e & 1);
                if (row < rows && j < a.nt) dst[(i64)j * rows + row] = bias ? fadd_rn(v[n][e], bias[row]) : v[n][e];
            }
    }
}

// mmq_warps is the block's warps for G tiles: 8 (four slots) up to two tiles, where
// eight warps with 16·G accumulators each keep two blocks per SM; 16 (two slots) for
// four and eight, where four slots would take 64-128 accumulators a thread (G = 3, 4
// with eight warps ran 1.9-3× slower per row than G = 2 on the H200, perf-cuda.md v7).
#define MMQ_W(G) ((G) <= 2 ? 8 : 16)

// MinB<T, G>::v is the least resident blocks per SM in the __launch_bounds__ of type T's
// kernel of G tiles (the register cap that follows: 65536 / (MinB · threads)); 0 is the
// one-argument form, the compiler's choice, which takes 70-128 registers here and so one
// to three blocks per SM. The kernels are issue-bound (Nsight Compute, H200, Q4_K at
// nt 8: SM 64 %, L1 71 %, DRAM 14 % of peak, 16 warps per SM, registers the limit), and
// a block waits for its slowest warp at every round, so more blocks per SM help where
// the capped registers do not spill much. Measured (H200, perf-cuda.md v15: µs per
// 14336 × 4096 matmul, bound / 0): Q4_0 G 1 at 4: 15.9-16.5 / 17.6-18.8 (nt 2-8), G 2
// at 3: 25.2-25.9 / 28.7-29.4, G 4 at 2: 47.5-58.0 / 59.9-72.7; Q8_0 G 4 at 2:
// 57.6-69.3 / 66.5-80.3; Q4_K G 4 at 1 (not the one-argument form's code):
// 86.8-110.3 / 92.3-115.3; Q5_K G 1 at 3: 26.9-35.0 / 29.6-36.8; Q5_0 G 1 at 3 (7B
// layer, µs: 141-146 / 146-159). Q4_K G 2 at 2 keeps its 128 registers with KStage. The
// others lost with a bound (Q8_0 G 2 at 3: 50.6 / 30.3 at nt 12; every G 8 at 2:
// 1.03-1.6× slower) and keep 0.
template <class T, int G> struct MinB { static constexpr int v = 0; };
template <> struct MinB<MQ4_0, 1> { static constexpr int v = 4; };
template <> struct MinB<MQ4_0, 2> { static constexpr int v = 3; };
template <> struct MinB<MQ4_0, 4> { static constexpr int v = 2; };
template <> struct MinB<MQ5_0, 1> { static constexpr int v = 3; };
template <> struct MinB<MQ8_0, 4> { static constexpr int v = 2; };
template <> struct MinB<MQ4_K, 2> { static constexpr int v = 2; };  // (KS took it to 166 registers, one block)
template <> struct MinB<MQ4_K, 4> { static constexpr int v = 1; };
template <> struct MinB<MQ5_K, 1> { static constexpr int v = 3; };
// MMQ_MINB(T, G) is MinB's bound, or for measuring (MINFER_MMQ_DEFINES): 0 for every
// kernel with MMQ_MINB_OFF, MMQ_MINB8 for every kernel of eight warps, MMQ_MINB16 of
// sixteen.
#if defined(MMQ_MINB_OFF)
#define MMQ_MINB(T, G) 0
#elif defined(MMQ_MINB8) && defined(MMQ_MINB16)
#define MMQ_MINB(T, G) ((G) <= 2 ? MMQ_MINB8 : MMQ_MINB16)
#elif defined(MMQ_MINB8)
#define MMQ_MINB(T, G) ((G) <= 2 ? MMQ_MINB8 : MinB<T, G>::v)
#elif defined(MMQ_MINB16)
#define MMQ_MINB(T, G) ((G) <= 2 ? MinB<T, G>::v : MMQ_MINB16)
#else
#define MMQ_MINB(T, G) (MinB<T, G>::v)
#endif

// MMQ_T is the traits struct the kernel of G tiles of type T uses: T, except Q5_K's one-
// and two-tile kernels, which keep the v12 form (MQ5_K12).
template <class T, int G> struct Pick { using type = T; };
template <int G> struct Pick<MQ5_K, G> { using type = typename Cond<(G <= 2), MQ5_K12, MQ5_K>::type; };
#define MMQ_T(T, G) typename Pick<T, G>::type

// Each kernel multiplies one x by up to three weights of the same type (as mmvq.cu's):
// blocks [0, tiles(rows0)·groups) take set 0, then set 1, then set 2; block b of a set
// takes weight tile b / groups and activation group b % groups.
#define MMQ_SET(i) const void *q##i, const void *d##i, const void *e##i, float *dst##i, int rows##i, const float *bias##i
#define MMQ1(name, T, G)                                                                                        \
    extern "C" __global__ void __launch_bounds__(MMQ_W(G) * WARP, MMQ_MINB(T, G)) mmq_##name##_##G(                            \
        const int *xq, const float *xd, int cols, int nt, int groups, MMQ_SET(0), MMQ_SET(1), MMQ_SET(2)) {     \
        const int nb0 = (rows0 + 15) / 16 * groups, nb1 = (rows1 + 15) / 16 * groups;                           \
        int blk = blockIdx.x;                                                                                   \
        QArgs a = {q0, d0, e0, xq, xd, cols, nt, (G) <= 2};                                                     \
        float *dst = dst0;                                                                                      \
        int rows = rows0;                                                                                       \
        const float *bias = bias0;                                                                              \
        if (blk >= nb0) {                                                                                       \
            blk -= nb0;                                                                                         \
            if (blk < nb1) {                                                                                    \
                a.q = q1; a.d = d1; a.e = e1; dst = dst1; rows = rows1; bias = bias1;                           \
            } else {                                                                                            \
                blk -= nb1;                                                                                     \
                a.q = q2; a.d = d2; a.e = e2; dst = dst2; rows = rows2; bias = bias2;                           \
            }                                                                                                   \
        }                                                                                                       \
        mmq_rows<MMQ_T(T, G), G, MMQ_W(G)>(a, dst, rows, bias, blk / groups, blk % groups);                     \
    }
// MMQ(name, T): activation tiles per block G = 1, 2, 4, 8 (the backend's mmqGs; nt up to
// 64 in one group, so each weight unit is read and unpacked once for every row).
#define MMQ(name, T) MMQ1(name, T, 1) MMQ1(name, T, 2) MMQ1(name, T, 4) MMQ1(name, T, 8)
// The per-type instantiations (MMQ lines) are appended at compile time from the
// weight-type table, core/backend/cuda/types.go.
