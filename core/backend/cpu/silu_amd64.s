// SwiGLU with ggml_v_silu / ggml_v_expf (AVX-512 build of ggml-cpu), 16 values at a time:
// the same instruction sequence, so the same bits.

#include "textflag.h"

DATA expc<>+0(SB)/4, $0x3fb8aa3b  // 0x1.715476p+0 (log2 e)
DATA expc<>+4(SB)/4, $0x4b400000  // 0x1.8p23 (rounding shift)
DATA expc<>+8(SB)/4, $0x3f317200  // 0x1.62e4p-1 (ln2 hi)
DATA expc<>+12(SB)/4, $0x35bfbe8e // 0x1.7f7d1cp-20 (ln2 lo)
DATA expc<>+16(SB)/4, $0x3c072010 // 0x1.0e4020p-7
DATA expc<>+20(SB)/4, $0x3d2b9f17 // 0x1.573e2ep-5
DATA expc<>+24(SB)/4, $0x3e2aaf33 // 0x1.555e66p-3
DATA expc<>+28(SB)/4, $0x3efffedb // 0x1.fffdb6p-2
DATA expc<>+32(SB)/4, $0x3f7ffff6 // 0x1.ffffecp-1
DATA expc<>+36(SB)/4, $0x3f800000 // 1
DATA expc<>+40(SB)/4, $0x43400000 // 192
DATA expc<>+44(SB)/4, $0x7f800000 // +Inf
DATA expc<>+48(SB)/4, $0x7fffffff // abs mask
GLOBL expc<>(SB), RODATA|NOPTR, $52

// func swigluAVX512(dst, x, gate *float32, n int)
// dst[i] = x[i] / (1 + ggml_v_expf(0 - x[i])) * g[i]; n > 0, n%16 == 0.
TEXT ·swigluAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ gate+16(FP), DX
	MOVQ n+24(FP), CX
	LEAQ expc<>(SB), AX
	VBROADCASTSS 0(AX), Z16  // log2 e
	VBROADCASTSS 4(AX), Z17  // r
	VBROADCASTSS 8(AX), Z18  // ln2 hi
	VBROADCASTSS 12(AX), Z19 // ln2 lo
	VBROADCASTSS 16(AX), Z20
	VBROADCASTSS 20(AX), Z21
	VBROADCASTSS 24(AX), Z22
	VBROADCASTSS 28(AX), Z23
	VBROADCASTSS 32(AX), Z24
	VBROADCASTSS 36(AX), Z25 // 1
	VBROADCASTSS 40(AX), Z26 // 192
	VBROADCASTSS 44(AX), Z27 // +Inf
	VPBROADCASTD 48(AX), Z28 // abs mask
	VPXORD Z29, Z29, Z29     // 0
loop:
	VMOVUPS (SI), Z0         // x
	VSUBPS Z0, Z29, Z1       // a = 0 - x
	VMOVAPS Z1, Z4
	VFMADD213PS Z17, Z16, Z4 // z = a*log2e + r
	VSUBPS Z17, Z4, Z5       // n = z - r
	VMOVAPS Z1, Z6
	VFNMADD231PS Z18, Z5, Z6 // a - n*ln2hi
	VFNMADD231PS Z19, Z5, Z6 // b = (a - n*ln2hi) - n*ln2lo
	VMULPS Z6, Z6, Z7        // u = b*b
	VMOVAPS Z20, Z8
	VFMADD213PS Z21, Z6, Z8  // c4*b + c5
	VMOVAPS Z22, Z9
	VFMADD213PS Z23, Z6, Z9  // c6*b + c7
	VFMADD213PS Z9, Z7, Z8   // (c4*b+c5)*u + (c6*b+c7)
	VMOVAPS Z24, Z10
	VFMADD213PS Z25, Z6, Z10 // c8*b + 1
	VFMADD213PS Z10, Z7, Z8  // j
	VSCALEFPS Z5, Z8, Z11    // res = j * 2^n
	VPANDD Z28, Z5, Z12      // |n|
	VCMPPS $0x1e, Z26, Z12, K1 // |n| > 192 (GT_OQ)
	KORTESTW K1, K1
	JZ done_exp
	VCMPPS $0x12, Z29, Z5, K2  // n <= 0 (LE_OQ)
	VMOVAPS Z27, Z14
	VMOVAPS Z29, K2, Z14       // alt = n <= 0 ? 0 : +Inf
	VMOVAPS Z14, K1, Z11       // res = |n| > 192 ? alt : res
done_exp:
	VADDPS Z25, Z11, Z11     // 1 + e
	VDIVPS Z11, Z0, Z12      // x / (1 + e)
	VMULPS (DX), Z12, Z12    // · g
	VMOVUPS Z12, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ loop
	VZEROUPPER
	RET
