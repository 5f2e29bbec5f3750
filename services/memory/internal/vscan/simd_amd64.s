#include "textflag.h"

// func dotFMA(a, b *float32, n int) float32
// n is a multiple of 8, at least 8. Four accumulators of eight lanes.
TEXT ·dotFMA(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	CMPQ CX, $32
	JLT dot8

dot32:
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	CMPQ CX, $32
	JGE dot32

dot8:
	CMPQ CX, $8
	JLT dotsum
	VMOVUPS (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP dot8

dotsum:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func distAVX512(codes, qc *uint64, words int, dist *uint16, blocks int)
// Per block: word w of its 8 codes is one 64-byte line; XOR with the query's word w,
// VPOPCNTQ, sum over the words, and the 8 sums stored as uint16.
TEXT ·distAVX512(SB), NOSPLIT, $0-40
	MOVQ codes+0(FP), SI
	MOVQ qc+8(FP), DX
	MOVQ words+16(FP), R8
	MOVQ dist+24(FP), DI
	MOVQ blocks+32(FP), CX

d512block:
	VPXORQ Z0, Z0, Z0
	MOVQ DX, BX
	MOVQ R8, R9

d512word:
	VPBROADCASTQ (BX), Z1
	VPXORQ (SI), Z1, Z1
	VPOPCNTQ Z1, Z1
	VPADDQ Z1, Z0, Z0
	ADDQ $64, SI
	ADDQ $8, BX
	DECQ R9
	JNZ d512word
	VPMOVQW Z0, (DI)
	ADDQ $16, DI
	DECQ CX
	JNZ d512block
	VZEROUPPER
	RET

// The popcount of each nibble value, for VPSHUFB (once per 128-bit lane).
DATA nibbleCount<>+0(SB)/8, $0x0302020102010100
DATA nibbleCount<>+8(SB)/8, $0x0403030203020201
DATA nibbleCount<>+16(SB)/8, $0x0302020102010100
DATA nibbleCount<>+24(SB)/8, $0x0403030203020201
GLOBL nibbleCount<>(SB), RODATA|NOPTR, $32

DATA lowNibbles<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA lowNibbles<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA lowNibbles<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA lowNibbles<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL lowNibbles<>(SB), RODATA|NOPTR, $32

// Bytes 0, 1, 8 and 9 of each lane (the low 16 bits of its two sums) to its first dword.
DATA packBytes<>+0(SB)/8, $0x8080808009080100
DATA packBytes<>+8(SB)/8, $0x8080808080808080
DATA packBytes<>+16(SB)/8, $0x8080808009080100
DATA packBytes<>+24(SB)/8, $0x8080808080808080
GLOBL packBytes<>(SB), RODATA|NOPTR, $32

// Dwords 0 and 4 (each lane's first) side by side.
DATA packDwords<>+0(SB)/8, $0x0000000400000000
DATA packDwords<>+8(SB)/8, $0
DATA packDwords<>+16(SB)/8, $0
DATA packDwords<>+24(SB)/8, $0
GLOBL packDwords<>(SB), RODATA|NOPTR, $32

// func distAVX2(codes, qc *uint64, words int, dist *uint16, blocks int)
// distAVX512 with two 4-lane registers per word and a nibble table's popcount: each byte's
// bits are counted in a byte over all the words (at most 31 of them), then summed per
// 64-bit lane (VPSADBW).
TEXT ·distAVX2(SB), NOSPLIT, $0-40
	MOVQ codes+0(FP), SI
	MOVQ qc+8(FP), DX
	MOVQ words+16(FP), R8
	MOVQ dist+24(FP), DI
	MOVQ blocks+32(FP), CX
	VMOVDQU nibbleCount<>(SB), Y15
	VMOVDQU lowNibbles<>(SB), Y14
	VMOVDQU packBytes<>(SB), Y13
	VMOVDQU packDwords<>(SB), Y11
	VPXOR Y12, Y12, Y12

d2block:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	MOVQ DX, BX
	MOVQ R8, R9

d2word:
	VPBROADCASTQ (BX), Y2
	VPXOR (SI), Y2, Y3
	VPXOR 32(SI), Y2, Y4
	VPAND Y14, Y3, Y5
	VPSRLW $4, Y3, Y3
	VPAND Y14, Y3, Y3
	VPSHUFB Y5, Y15, Y5
	VPSHUFB Y3, Y15, Y3
	VPADDB Y5, Y0, Y0
	VPADDB Y3, Y0, Y0
	VPAND Y14, Y4, Y6
	VPSRLW $4, Y4, Y4
	VPAND Y14, Y4, Y4
	VPSHUFB Y6, Y15, Y6
	VPSHUFB Y4, Y15, Y4
	VPADDB Y6, Y1, Y1
	VPADDB Y4, Y1, Y1
	ADDQ $64, SI
	ADDQ $8, BX
	DECQ R9
	JNZ d2word
	VPSADBW Y12, Y0, Y0
	VPSADBW Y12, Y1, Y1
	VPSHUFB Y13, Y0, Y0
	VPSHUFB Y13, Y1, Y1
	VPERMD Y0, Y11, Y0
	VPERMD Y1, Y11, Y1
	VMOVQ X0, (DI)
	VMOVQ X1, 8(DI)
	ADDQ $16, DI
	DECQ CX
	JNZ d2block
	VZEROUPPER
	RET
