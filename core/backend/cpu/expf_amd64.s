// glibc's expf (see expf.go) on eight float32 values at a time, in double precision
// with the same operations: the same bits, special cases included.

#include "textflag.h"

DATA exp2ftab<>+0(SB)/8, $0x3ff0000000000000
DATA exp2ftab<>+8(SB)/8, $0x3fefd9b0d3158574
DATA exp2ftab<>+16(SB)/8, $0x3fefb5586cf9890f
DATA exp2ftab<>+24(SB)/8, $0x3fef9301d0125b51
DATA exp2ftab<>+32(SB)/8, $0x3fef72b83c7d517b
DATA exp2ftab<>+40(SB)/8, $0x3fef54873168b9aa
DATA exp2ftab<>+48(SB)/8, $0x3fef387a6e756238
DATA exp2ftab<>+56(SB)/8, $0x3fef1e9df51fdee1
DATA exp2ftab<>+64(SB)/8, $0x3fef06fe0a31b715
DATA exp2ftab<>+72(SB)/8, $0x3feef1a7373aa9cb
DATA exp2ftab<>+80(SB)/8, $0x3feedea64c123422
DATA exp2ftab<>+88(SB)/8, $0x3feece086061892d
DATA exp2ftab<>+96(SB)/8, $0x3feebfdad5362a27
DATA exp2ftab<>+104(SB)/8, $0x3feeb42b569d4f82
DATA exp2ftab<>+112(SB)/8, $0x3feeab07dd485429
DATA exp2ftab<>+120(SB)/8, $0x3feea47eb03a5585
DATA exp2ftab<>+128(SB)/8, $0x3feea09e667f3bcd
DATA exp2ftab<>+136(SB)/8, $0x3fee9f75e8ec5f74
DATA exp2ftab<>+144(SB)/8, $0x3feea11473eb0187
DATA exp2ftab<>+152(SB)/8, $0x3feea589994cce13
DATA exp2ftab<>+160(SB)/8, $0x3feeace5422aa0db
DATA exp2ftab<>+168(SB)/8, $0x3feeb737b0cdc5e5
DATA exp2ftab<>+176(SB)/8, $0x3feec49182a3f090
DATA exp2ftab<>+184(SB)/8, $0x3feed503b23e255d
DATA exp2ftab<>+192(SB)/8, $0x3feee89f995ad3ad
DATA exp2ftab<>+200(SB)/8, $0x3feeff76f2fb5e47
DATA exp2ftab<>+208(SB)/8, $0x3fef199bdd85529c
DATA exp2ftab<>+216(SB)/8, $0x3fef3720dcef9069
DATA exp2ftab<>+224(SB)/8, $0x3fef5818dcfba487
DATA exp2ftab<>+232(SB)/8, $0x3fef7c97337b9b5f
DATA exp2ftab<>+240(SB)/8, $0x3fefa4afa2a490da
DATA exp2ftab<>+248(SB)/8, $0x3fefd0765b6e4540
GLOBL exp2ftab<>(SB), RODATA|NOPTR, $256

DATA expfc<>+0(SB)/8, $0x40471547652b82fe // invLn2N: 0x1.71547652b82fep+0 · 32
DATA expfc<>+8(SB)/8, $0x4338000000000000 // shift: 0x1.8p+52
DATA expfc<>+16(SB)/8, $0x3ebc6af84b912394 // c0: 0x1.c6af84b912394p-5 / 32³
DATA expfc<>+24(SB)/8, $0x3f2ebfce50fac4f3 // c1: 0x1.ebfce50fac4f3p-3 / 32²
DATA expfc<>+32(SB)/8, $0x3f962e42ff0c52d6 // c2: 0x1.62e42ff0c52d6p-1 / 32
DATA expfc<>+40(SB)/8, $0x3ff0000000000000 // one: 1
DATA expfc<>+48(SB)/8, $0x40562e42e0000000 // ovf: 0x1.62e42ep6: above, +Inf
DATA expfc<>+56(SB)/8, $0xc059fe3680000000 // ufl: -0x1.9fe368p6: below, 0
DATA expfc<>+64(SB)/8, $0x0000000000000010 // sixteen: table index bit 4
DATA expfc<>+72(SB)/8, $0x7f8000007f800000 // inf: two float32 +Inf
DATA expfc<>+80(SB)/8, $0x000000000000001f // mask31: table index (AVX2)
DATA expfc<>+88(SB)/4, $0x42b17217 // ovf as float32 (AVX2)
DATA expfc<>+92(SB)/4, $0xc2cff1b4 // ufl as float32 (AVX2)
DATA expfc<>+96(SB)/4, $0x7f800000 // +Inf as float32 (AVX2)
GLOBL expfc<>(SB), RODATA|NOPTR, $100

// func expfAVX512(dst, src *float32, n int)
// dst[i] = expf(src[i]) for i < n; n > 0, n%8 == 0.
TEXT ·expfAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSD expfc<>+0(SB), Z16
	VBROADCASTSD expfc<>+8(SB), Z17
	VBROADCASTSD expfc<>+16(SB), Z18
	VBROADCASTSD expfc<>+24(SB), Z19
	VBROADCASTSD expfc<>+32(SB), Z20
	VBROADCASTSD expfc<>+40(SB), Z21
	VBROADCASTSD expfc<>+48(SB), Z27
	VBROADCASTSD expfc<>+56(SB), Z28
	VPBROADCASTQ expfc<>+64(SB), Z26
	VBROADCASTSD expfc<>+72(SB), Z29
	VMOVDQU64 exp2ftab<>+0(SB), Z22
	VMOVDQU64 exp2ftab<>+64(SB), Z23
	VMOVDQU64 exp2ftab<>+128(SB), Z24
	VMOVDQU64 exp2ftab<>+192(SB), Z25
	VPXORD Z30, Z30, Z30
loopexpf:
	VCVTPS2PD (SI), Z0           // xd
	VMOVAPD Z17, Z1
	VFMADD231PD Z16, Z0, Z1      // kd = fma(InvLn2N, xd, shift); its bits are ki
	VSUBPD Z17, Z1, Z2           // kd -= shift
	VMOVAPD Z2, Z3
	VFMSUB231PD Z16, Z0, Z3      // r = fma(InvLn2N, xd, -kd)
	VMOVDQA64 Z22, Z4
	VPERMT2Q Z23, Z1, Z4         // tab[ki%32] for ki%32 < 16
	VMOVDQA64 Z24, Z5
	VPERMT2Q Z25, Z1, Z5         // tab[ki%32] for ki%32 ≥ 16
	VPTESTMQ Z26, Z1, K1
	VPBLENDMQ Z5, Z4, K1, Z4
	VPSLLQ $47, Z1, Z6
	VPADDQ Z6, Z4, Z4            // s = asdouble(tab[ki%32] + ki<<47)
	VMOVAPD Z19, Z7
	VFMADD231PD Z18, Z3, Z7      // z = fma(C0, r, C1)
	VMULPD Z3, Z3, Z8            // r2 = r·r
	VMOVAPD Z21, Z9
	VFMADD231PD Z20, Z3, Z9      // y = fma(C2, r, 1)
	VFMADD231PD Z8, Z7, Z9       // y = fma(z, r2, y)
	VMULPD Z4, Z9, Z9            // y·s
	VCVTPD2PS Z9, Y10
	VCMPPD $0x1e, Z27, Z0, K2    // x > 0x1.62e42ep6: +Inf
	VCMPPD $0x11, Z28, Z0, K3    // x < -0x1.9fe368p6 (-Inf too): 0
	VCMPPD $0x03, Z0, Z0, K4     // NaN: x + x
	VMOVAPS Y29, K2, Y10
	VMOVAPS Y30, K3, Y10
	VMOVUPS (SI), Y11
	VADDPS Y11, Y11, Y11
	VMOVAPS Y11, K4, Y10
	VMOVUPS Y10, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ loopexpf
	VZEROUPPER
	RET

// func expfAVX2(dst, src *float32, n int)
// dst[i] = expf(src[i]) for i < n; n > 0, n%4 == 0. expfAVX512's steps on four values
// at a time (four doubles a ymm): the table entries gathered (VPGATHERQQ) instead of
// permuted, the special cases compared on the float32 inputs (the bounds are float32
// values) and blended.
TEXT ·expfAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	LEAQ exp2ftab<>+0(SB), R8
	VBROADCASTSD expfc<>+0(SB), Y12  // invLn2N
	VBROADCASTSD expfc<>+8(SB), Y13  // shift
	VBROADCASTSD expfc<>+16(SB), Y14 // c0
	VBROADCASTSD expfc<>+24(SB), Y15 // c1
loopexpf2:
	VCVTPS2PD (SI), Y0           // xd
	VMOVAPD Y13, Y1
	VFMADD231PD Y12, Y0, Y1      // kd = fma(InvLn2N, xd, shift); its bits are ki
	VSUBPD Y13, Y1, Y2           // kd -= shift
	VMOVAPD Y2, Y3
	VFMSUB231PD Y12, Y0, Y3      // r = fma(InvLn2N, xd, -kd)
	VPBROADCASTQ expfc<>+80(SB), Y4
	VPAND Y4, Y1, Y4             // ki%32
	VPCMPEQQ Y5, Y5, Y5          // gather every lane
	VPXOR Y6, Y6, Y6
	VPGATHERQQ Y5, (R8)(Y4*8), Y6 // tab[ki%32]
	VPSLLQ $47, Y1, Y7
	VPADDQ Y7, Y6, Y6            // s = asdouble(tab[ki%32] + ki<<47)
	VMOVAPD Y15, Y7
	VFMADD231PD Y14, Y3, Y7      // z = fma(C0, r, C1)
	VMULPD Y3, Y3, Y8            // r2 = r·r
	VBROADCASTSD expfc<>+40(SB), Y9
	VBROADCASTSD expfc<>+32(SB), Y10
	VFMADD231PD Y10, Y3, Y9      // y = fma(C2, r, 1)
	VFMADD231PD Y8, Y7, Y9       // y = fma(z, r2, y)
	VMULPD Y6, Y9, Y9            // y·s
	VCVTPD2PSY Y9, X10
	VMOVUPS (SI), X11            // x
	VBROADCASTSS expfc<>+88(SB), X4
	VCMPPS $0x1e, X4, X11, X5    // x > 0x1.62e42ep6: +Inf
	VBROADCASTSS expfc<>+96(SB), X6
	VBLENDVPS X5, X6, X10, X10
	VBROADCASTSS expfc<>+92(SB), X4
	VCMPPS $0x11, X4, X11, X5    // x < -0x1.9fe368p6 (-Inf too): 0
	VANDNPS X10, X5, X10
	VCMPPS $0x03, X11, X11, X5   // NaN: x + x
	VADDPS X11, X11, X6
	VBLENDVPS X5, X6, X10, X10
	VMOVUPS X10, (DI)
	ADDQ $16, SI
	ADDQ $16, DI
	SUBQ $4, CX
	JNZ loopexpf2
	VZEROUPPER
	RET
