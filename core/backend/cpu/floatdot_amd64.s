// AVX-512 float kernels with exactly the operation order of ggml's AVX-512 code (see
// floatdot.go): hardware float32 FMA per lane, so the results are ggml's bits.

#include "textflag.h"

// func lanes16F16AVX512(w, x *uint16, n int, acc *[16]float32)
// acc[l] = fma(w[16c+l], x[16c+l], acc[l]) for c = 0..n/16-1; n > 0, n%16 == 0.
TEXT ·lanes16F16AVX512(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ acc+24(FP), DX
	VMOVUPS (DX), Z0
loopf16:
	VCVTPH2PS (SI), Z1
	VCVTPH2PS (DI), Z2
	VFMADD231PS Z2, Z1, Z0
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $16, CX
	JNZ loopf16
	VMOVUPS Z0, (DX)
	VZEROUPPER
	RET

// func lanes16F16x4AVX512(w *uint16, stride int, x *uint16, n int, acc *[4][16]float32)
// Four weight rows (w, w+stride, w+2·stride, w+3·stride elements) against one x: the
// same per-row lane chains as lanes16F16AVX512, interleaved to hide FMA latency.
TEXT ·lanes16F16x4AVX512(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), BX
	SHLQ $1, BX
	MOVQ x+16(FP), DI
	MOVQ n+24(FP), CX
	MOVQ acc+32(FP), DX
	LEAQ (SI)(BX*1), R8
	LEAQ (R8)(BX*1), R9
	LEAQ (R9)(BX*1), R10
	VMOVUPS (DX), Z0
	VMOVUPS 64(DX), Z1
	VMOVUPS 128(DX), Z2
	VMOVUPS 192(DX), Z3
loopf16x4:
	VCVTPH2PS (DI), Z8
	VCVTPH2PS (SI), Z4
	VCVTPH2PS (R8), Z5
	VCVTPH2PS (R9), Z6
	VCVTPH2PS (R10), Z7
	VFMADD231PS Z8, Z4, Z0
	VFMADD231PS Z8, Z5, Z1
	VFMADD231PS Z8, Z6, Z2
	VFMADD231PS Z8, Z7, Z3
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, R10
	ADDQ $32, DI
	SUBQ $16, CX
	JNZ loopf16x4
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, 192(DX)
	VZEROUPPER
	RET

// func lanes16F32AVX512(w, x *float32, n int, acc *[16]float32)
TEXT ·lanes16F32AVX512(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ acc+24(FP), DX
	VMOVUPS (DX), Z0
loopf32:
	VMOVUPS (SI), Z1
	VFMADD231PS (DI), Z1, Z0
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ loopf32
	VMOVUPS Z0, (DX)
	VZEROUPPER
	RET

// func vecF16AVX512(x, y *uint16, np int, acc *[4][16]float32)
// ggml_vec_dot_f16's SIMD part: acc[j] = fma(x[i+16j:], y[i+16j:], acc[j]) for steps
// of 64; np > 0, np%64 == 0.
TEXT ·vecF16AVX512(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ np+16(FP), CX
	MOVQ acc+24(FP), DX
	VMOVUPS (DX), Z0
	VMOVUPS 64(DX), Z1
	VMOVUPS 128(DX), Z2
	VMOVUPS 192(DX), Z3
loopv16:
	VCVTPH2PS (SI), Z4
	VCVTPH2PS (DI), Z5
	VFMADD231PS Z5, Z4, Z0
	VCVTPH2PS 32(SI), Z6
	VCVTPH2PS 32(DI), Z7
	VFMADD231PS Z7, Z6, Z1
	VCVTPH2PS 64(SI), Z4
	VCVTPH2PS 64(DI), Z5
	VFMADD231PS Z5, Z4, Z2
	VCVTPH2PS 96(SI), Z6
	VCVTPH2PS 96(DI), Z7
	VFMADD231PS Z7, Z6, Z3
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $64, CX
	JNZ loopv16
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, 192(DX)
	VZEROUPPER
	RET

// func vecF32AVX512(x, y *float32, np int, acc *[4][16]float32)
TEXT ·vecF32AVX512(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ np+16(FP), CX
	MOVQ acc+24(FP), DX
	VMOVUPS (DX), Z0
	VMOVUPS 64(DX), Z1
	VMOVUPS 128(DX), Z2
	VMOVUPS 192(DX), Z3
loopv32:
	VMOVUPS (SI), Z4
	VFMADD231PS (DI), Z4, Z0
	VMOVUPS 64(SI), Z5
	VFMADD231PS 64(DI), Z5, Z1
	VMOVUPS 128(SI), Z6
	VFMADD231PS 128(DI), Z6, Z2
	VMOVUPS 192(SI), Z7
	VFMADD231PS 192(DI), Z7, Z3
	ADDQ $256, SI
	ADDQ $256, DI
	SUBQ $64, CX
	JNZ loopv32
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, 192(DX)
	VZEROUPPER
	RET

// func madF16AVX512(acc *float32, v *uint16, n int, s float32)
// acc[i] = f16(fma(v[i], s, acc[i])) (ggml_vec_mad_f16 with the accumulator held as
// float32 values); n > 0, n%16 == 0.
TEXT ·madF16AVX512(SB), NOSPLIT, $0-28
	MOVQ acc+0(FP), DX
	MOVQ v+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS s+24(FP), Z3
loopmad:
	VMOVUPS (DX), Z0
	VCVTPH2PS (SI), Z1
	VFMADD231PS Z3, Z1, Z0
	VCVTPS2PH $0, Z0, Y2
	VCVTPH2PS Y2, Z0
	VMOVUPS Z0, (DX)
	ADDQ $64, DX
	ADDQ $32, SI
	SUBQ $16, CX
	JNZ loopmad
	VZEROUPPER
	RET

// func scaleF16AVX512(acc *float32, n int, s float32)
// acc[i] = f16(acc[i]·s) (ggml_vec_scale_f16); n > 0, n%16 == 0.
TEXT ·scaleF16AVX512(SB), NOSPLIT, $0-20
	MOVQ acc+0(FP), DX
	MOVQ n+8(FP), CX
	VBROADCASTSS s+16(FP), Z3
loopscale:
	VMULPS (DX), Z3, Z0
	VCVTPS2PH $0, Z0, Y2
	VCVTPH2PS Y2, Z0
	VMOVUPS Z0, (DX)
	ADDQ $64, DX
	SUBQ $16, CX
	JNZ loopscale
	VZEROUPPER
	RET

// func scoresF16AVX512(k *uint16, q *float32, hd, n int, scale float32, out *float32)
// out[i] = ggml_vec_dot_f16(k[i·hd:], q)·scale for i < n: per key the four 16-lane
// chains of vecF16AVX512 from zero, GGML_F32x16_REDUCE ((0+2)+(1+3), then
// _mm512_reduce_add_ps's halving), then one float32 multiply. q holds the F16 query's
// values as float32 (exact); hd > 0, hd%64 == 0; n > 0.
TEXT ·scoresF16AVX512(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), SI
	MOVQ q+8(FP), DI
	MOVQ hd+16(FP), R8
	MOVQ n+24(FP), BX
	VMOVSS scale+32(FP), X9
	MOVQ out+40(FP), DX
loopkey:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ DI, AX
	MOVQ R8, CX
loopkeyblk:
	VCVTPH2PS (SI), Z4
	VFMADD231PS (AX), Z4, Z0
	VCVTPH2PS 32(SI), Z5
	VFMADD231PS 64(AX), Z5, Z1
	VCVTPH2PS 64(SI), Z6
	VFMADD231PS 128(AX), Z6, Z2
	VCVTPH2PS 96(SI), Z7
	VFMADD231PS 192(AX), Z7, Z3
	ADDQ $128, SI
	ADDQ $256, AX
	SUBQ $64, CX
	JNZ loopkeyblk
	VADDPS Z2, Z0, Z0
	VADDPS Z3, Z1, Z1
	VADDPS Z1, Z0, Z0
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VADDPS X1, X0, X0
	VMOVSHDUP X0, X1
	VADDSS X1, X0, X0
	VMULSS X9, X0, X0
	VMOVSS X0, (DX)
	ADDQ $4, DX
	DECQ BX
	JNZ loopkey
	VZEROUPPER
	RET

// func accumVF16AVX512(acc *float32, v *uint16, hd, n int, ms, vs *float32)
// For i < n: when ms[i] is not 1.0 (bitwise), acc = f16(acc·ms[i]) (ggml_vec_scale_f16);
// then acc = f16(fma(v[i·hd:], vs[i], acc)) (ggml_vec_mad_f16). The same bits as
// scaleF16AVX512 and madF16AVX512 called in turn; hd > 0, hd%16 == 0; n > 0.
TEXT ·accumVF16AVX512(SB), NOSPLIT, $0-48
	MOVQ acc+0(FP), DI
	MOVQ v+8(FP), SI
	MOVQ hd+16(FP), R8
	MOVQ n+24(FP), BX
	MOVQ ms+32(FP), R9
	MOVQ vs+40(FP), R10
loopacc:
	CMPL (R9), $0x3f800000
	JEQ accmad
	VBROADCASTSS (R9), Z3
	MOVQ DI, DX
	MOVQ R8, CX
loopaccscale:
	VMULPS (DX), Z3, Z0
	VCVTPS2PH $0, Z0, Y2
	VCVTPH2PS Y2, Z0
	VMOVUPS Z0, (DX)
	ADDQ $64, DX
	SUBQ $16, CX
	JNZ loopaccscale
accmad:
	VBROADCASTSS (R10), Z3
	MOVQ DI, DX
	MOVQ R8, CX
loopaccmad:
	VMOVUPS (DX), Z0
	VCVTPH2PS (SI), Z1
	VFMADD231PS Z3, Z1, Z0
	VCVTPS2PH $0, Z0, Y2
	VCVTPH2PS Y2, Z0
	VMOVUPS Z0, (DX)
	ADDQ $64, DX
	ADDQ $32, SI
	SUBQ $16, CX
	JNZ loopaccmad
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ BX
	JNZ loopacc
	VZEROUPPER
	RET

// func accumVF16x64AVX512(acc *float32, v *uint16, n int, ms, vs *float32)
// accumVF16AVX512 for hd == 64 with the accumulator in Z0-Z3 throughout (acc holds the
// starting values and receives the result).
TEXT ·accumVF16x64AVX512(SB), NOSPLIT, $0-40
	MOVQ acc+0(FP), DI
	MOVQ v+8(FP), SI
	MOVQ n+16(FP), BX
	MOVQ ms+24(FP), R9
	MOVQ vs+32(FP), R10
	VMOVUPS (DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
loopacc64:
	CMPL (R9), $0x3f800000
	JEQ accmad64
	VBROADCASTSS (R9), Z8
	VMULPS Z8, Z0, Z0
	VMULPS Z8, Z1, Z1
	VMULPS Z8, Z2, Z2
	VMULPS Z8, Z3, Z3
	VCVTPS2PH $0, Z0, Y0
	VCVTPS2PH $0, Z1, Y1
	VCVTPS2PH $0, Z2, Y2
	VCVTPS2PH $0, Z3, Y3
	VCVTPH2PS Y0, Z0
	VCVTPH2PS Y1, Z1
	VCVTPH2PS Y2, Z2
	VCVTPH2PS Y3, Z3
accmad64:
	VBROADCASTSS (R10), Z8
	VCVTPH2PS (SI), Z4
	VCVTPH2PS 32(SI), Z5
	VCVTPH2PS 64(SI), Z6
	VCVTPH2PS 96(SI), Z7
	VFMADD231PS Z8, Z4, Z0
	VFMADD231PS Z8, Z5, Z1
	VFMADD231PS Z8, Z6, Z2
	VFMADD231PS Z8, Z7, Z3
	VCVTPS2PH $0, Z0, Y0
	VCVTPS2PH $0, Z1, Y1
	VCVTPS2PH $0, Z2, Y2
	VCVTPS2PH $0, Z3, Y3
	VCVTPH2PS Y0, Z0
	VCVTPH2PS Y1, Z1
	VCVTPH2PS Y2, Z2
	VCVTPH2PS Y3, Z3
	ADDQ $128, SI
	ADDQ $4, R9
	ADDQ $4, R10
	DECQ BX
	JNZ loopacc64
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VZEROUPPER
	RET

// func roundF16AVX512(dst, src *float32, n int)
// dst[i] = f16(src[i]) as a float32 (round to nearest even, as F32ToF16); n > 0, n%16 == 0.
TEXT ·roundF16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
loopround:
	VMOVUPS (SI), Z0
	VCVTPS2PH $0, Z0, Y0
	VCVTPH2PS Y0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JNZ loopround
	VZEROUPPER
	RET
