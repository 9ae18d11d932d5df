//go:build linux && amd64

#include "textflag.h"
#include "go_asm.h"

// ccallTrampoline is called by runtime.asmcgocall on the system stack, with the C calling
// convention: DI holds a *cframe (ccall.go). It passes a[0..5] in registers and a[6..11] on
// the stack, calls fn and stores its result in r. BX (callee-saved in C) holds the frame across
// the call and is restored, as is BP. On entry SP is 8 mod 16; after the two pushes and 48
// bytes of stack arguments it is 0 mod 16 at the CALL, as the ABI requires.
TEXT ccallTrampoline<>(SB), NOSPLIT|NOFRAME, $0
	PUSHQ BP
	MOVQ  SP, BP
	PUSHQ BX
	SUBQ  $56, SP
	MOVQ  DI, BX

	MOVQ (cframe_a+6*8)(BX), AX
	MOVQ AX, 0(SP)
	MOVQ (cframe_a+7*8)(BX), AX
	MOVQ AX, 8(SP)
	MOVQ (cframe_a+8*8)(BX), AX
	MOVQ AX, 16(SP)
	MOVQ (cframe_a+9*8)(BX), AX
	MOVQ AX, 24(SP)
	MOVQ (cframe_a+10*8)(BX), AX
	MOVQ AX, 32(SP)
	MOVQ (cframe_a+11*8)(BX), AX
	MOVQ AX, 40(SP)

	MOVQ (cframe_a+0*8)(BX), DI
	MOVQ (cframe_a+1*8)(BX), SI
	MOVQ (cframe_a+2*8)(BX), DX
	MOVQ (cframe_a+3*8)(BX), CX
	MOVQ (cframe_a+4*8)(BX), R8
	MOVQ (cframe_a+5*8)(BX), R9
	XORL AX, AX // no vector registers used (for a variadic callee)
	MOVQ cframe_fn(BX), R10
	CALL R10
	MOVQ AX, cframe_r(BX)

	ADDQ $56, SP
	POPQ BX
	POPQ BP
	RET

GLOBL ·ccallTrampolineABI0(SB), NOPTR|RODATA, $8
DATA ·ccallTrampolineABI0(SB)/8, $ccallTrampoline<>(SB)
