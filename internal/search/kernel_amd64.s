//go:build amd64 && !purego

#include "textflag.h"

// func dotF32AVX2(q, v *float32, n int) float32
// n is a multiple of 32. The arithmetic is dotF32Go's: four accumulators of eight lanes, products
// rounded on their own (VMULPS, then VADDPS), then the same reduction tree.
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ q+0(FP), SI
	MOVQ v+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	SHRQ $5, CX
	JZ   f32reduce

f32loop:
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VMULPS  (DI), Y4, Y4
	VMULPS  32(DI), Y5, Y5
	VMULPS  64(DI), Y6, Y6
	VMULPS  96(DI), Y7, Y7
	VADDPS  Y4, Y0, Y0
	VADDPS  Y5, Y1, Y1
	VADDPS  Y6, Y2, Y2
	VADDPS  Y7, Y3, Y3
	ADDQ    $128, SI
	ADDQ    $128, DI
	DECQ    CX
	JNZ     f32loop

f32reduce:
	VADDPS       Y1, Y0, Y0
	VADDPS       Y3, Y2, Y2
	VADDPS       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+24(FP)
	RET

// func dotsI8AVX2(q *int16, data *int8, stride, count int, out *int32)
// stride is a multiple of 64 and at least 64; count is at least 1. out[i] is the dot product of
// the int16 query with vector i of data (int8, sign-extended to int16, VPMADDWD pairs into int32).
// The data streams from memory: the prefetch asks for it a few cache lines ahead.
TEXT ·dotsI8AVX2(SB), NOSPLIT, $0-40
	MOVQ q+0(FP), SI
	MOVQ data+8(FP), DI
	MOVQ stride+16(FP), BX
	MOVQ count+24(FP), CX
	MOVQ out+32(FP), R8
	SHRQ $6, BX

i8vec:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	MOVQ  SI, R9
	MOVQ  BX, DX

i8loop:
	PREFETCHT0 256(DI)
	VPMOVSXBW (DI), Y4
	VPMOVSXBW 16(DI), Y5
	VPMOVSXBW 32(DI), Y6
	VPMOVSXBW 48(DI), Y7
	VPMADDWD  (R9), Y4, Y4
	VPMADDWD  32(R9), Y5, Y5
	VPMADDWD  64(R9), Y6, Y6
	VPMADDWD  96(R9), Y7, Y7
	VPADDD    Y4, Y0, Y0
	VPADDD    Y5, Y1, Y1
	VPADDD    Y6, Y2, Y2
	VPADDD    Y7, Y3, Y3
	ADDQ      $64, DI
	ADDQ      $128, R9
	DECQ      DX
	JNZ       i8loop

	VPADDD       Y1, Y0, Y0
	VPADDD       Y3, Y2, Y2
	VPADDD       Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPADDD       X1, X0, X0
	VMOVD        X0, (R8)
	ADDQ         $4, R8
	DECQ         CX
	JNZ          i8vec

	VZEROUPPER
	RET
