//go:build amd64 && !purego

#include "textflag.h"

// BCAST sets every byte of y to c (through R8 and x).
#define BCAST(c, x, y) MOVL $c, R8; MOVQ R8, x; VPBROADCASTB x, y

// MASK64 sets r to the 64-bit mask of the high bits of the bytes of lo
// and hi, the two halves of a chunk (through R8).
#define MASK64(lo, hi, r) VPMOVMSKB lo, r; VPMOVMSKB hi, R8; SHLQ $32, R8; ORQ R8, r

// SPECIALS sets the quotes', backslashes' and NULs' bytes of the chunk at
// (SI)(AX*1) (Y0, Y1) to all ones in Y2 and Y5, Y3 and Y6, Y4 and Y7 (its
// halves), against '"' in Y12, '\\' in Y11 and NUL in Y10.
#define SPECIALS \
	VMOVDQU (SI)(AX*1), Y0; VMOVDQU 32(SI)(AX*1), Y1; \
	VPCMPEQB Y0, Y12, Y2; VPCMPEQB Y0, Y11, Y3; VPCMPEQB Y0, Y10, Y4; \
	VPCMPEQB Y1, Y12, Y5; VPCMPEQB Y1, Y11, Y6; VPCMPEQB Y1, Y10, Y7

// SPECIALCONSTS sets what SPECIALS compares with.
#define SPECIALCONSTS BCAST(0x22, X12, Y12); BCAST(0x5c, X11, Y11); VPXOR Y10, Y10, Y10

// func scan64(b *byte, n int, high uint64) (off int, mask uint64)
TEXT ·scan64(SB), NOSPLIT, $0-40
	MOVQ b+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ high+16(FP), DX
	XORQ AX, AX
	SPECIALCONSTS

loop:
	LEAQ 64(AX), R9
	CMPQ R9, CX
	JA   none
	SPECIALS
	VPOR Y2, Y3, Y2
	VPOR Y2, Y4, Y2
	VPOR Y5, Y6, Y5
	VPOR Y5, Y7, Y5
	MASK64(Y2, Y5, R10)
	MASK64(Y0, Y1, R12) // bytes past ASCII
	ANDQ DX, R12
	ORQ  R12, R10
	JNZ  found
	MOVQ R9, AX
	JMP  loop

found:
	VZEROUPPER
	MOVQ AX, off+24(FP)
	MOVQ R10, mask+32(FP)
	RET

none:
	VZEROUPPER
	MOVQ AX, off+24(FP)
	MOVQ $0, mask+32(FP)
	RET

// The escapes' classes (scanEscapes): a byte may follow a backslash when
// escLo[its low nibble] & escHi[its high nibble] is not 0.
DATA escLo<>+0(SB)/8, $0x00040808000d0000
DATA escLo<>+8(SB)/8, $0x0104000200000000
DATA escLo<>+16(SB)/8, $0x00040808000d0000
DATA escLo<>+24(SB)/8, $0x0104000200000000
GLOBL escLo<>(SB), RODATA|NOPTR, $32
DATA escHi<>+0(SB)/8, $0x0804020000010000
DATA escHi<>+8(SB)/8, $0x0000000000000000
DATA escHi<>+16(SB)/8, $0x0804020000010000
DATA escHi<>+24(SB)/8, $0x0000000000000000
GLOBL escHi<>(SB), RODATA|NOPTR, $32

// func skipString(b *byte, n int) (pos int, status int)
//
// Reads a string of a line that is all UTF-8 from b (no escape open
// there) while 64 bytes remain, a chunk at a time: a chunk with no quote,
// backslash or NUL is passed at once; in one with a backslash, a byte is
// escaped when an odd run of backslashes comes before it (a run that
// starts on an even bit and ends on an odd one is odd, and the other way
// round; adding a run's first bit to the run carries to the bit after
// it). An odd run at the chunk's end leaves its last backslash to the
// next chunk, which so starts with no escape open.
TEXT ·skipString(SB), NOSPLIT, $0-32
	MOVQ b+0(FP), SI
	MOVQ n+8(FP), CX
	XORQ AX, AX
	SPECIALCONSTS
	BCAST(0x75, X9, Y9)   // 'u'
	BCAST(0x0f, X15, Y15) // low nibble
	VMOVDQU escLo<>(SB), Y14
	VMOVDQU escHi<>(SB), Y13

sloop:
	LEAQ 64(AX), R9
	CMPQ R9, CX
	JA   sshort
	SPECIALS
	VPOR Y2, Y3, Y8
	VPOR Y8, Y4, Y8
	VPOR Y8, Y5, Y8
	VPOR Y8, Y6, Y8
	VPOR Y8, Y7, Y8
	VPTEST Y8, Y8
	JNZ  sspecial
	MOVQ R9, AX
	JMP  sloop

sspecial:
	MASK64(Y2, Y5, R10) // quotes
	MASK64(Y3, Y6, R11) // backslashes
	MASK64(Y4, Y7, R12) // NULs
	TESTQ R11, R11
	JNZ  sescapes

	// No backslash: the first quote or NUL decides.
	MOVQ R10, R8
	ORQ  R12, R8
	BSFQ R8, R8
	BTQ  R8, R12
	JCS  srefused
	LEAQ 1(AX)(R8*1), AX
	JMP  sended

sescapes:
	// R13: the bytes that may follow a backslash (the classes of their
	// two nibbles meet); BX: the u's.
	VPAND    Y0, Y15, Y2
	VPSHUFB  Y2, Y14, Y2
	VPSRLW   $4, Y0, Y3
	VPAND    Y3, Y15, Y3
	VPSHUFB  Y3, Y13, Y3
	VPAND    Y2, Y3, Y2
	VPCMPEQB Y2, Y10, Y2
	VPAND    Y1, Y15, Y5
	VPSHUFB  Y5, Y14, Y5
	VPSRLW   $4, Y1, Y6
	VPAND    Y6, Y15, Y6
	VPSHUFB  Y6, Y13, Y6
	VPAND    Y5, Y6, Y5
	VPCMPEQB Y5, Y10, Y5
	MASK64(Y2, Y5, R13)
	NOTQ R13
	VPCMPEQB Y0, Y9, Y2
	VPCMPEQB Y1, Y9, Y5
	MASK64(Y2, Y5, BX)

	// DX: the escaped bytes.
	MOVQ R11, R8
	SHLQ $1, R8
	NOTQ R8
	ANDQ R11, R8 // the runs' first bits
	MOVQ $0x5555555555555555, R9
	MOVQ R8, DX
	ANDQ R9, DX // those on even bits
	NOTQ R9
	ANDQ R9, R8 // those on odd bits
	ADDQ R11, DX
	ADDQ R11, R8
	MOVQ R11, DI
	NOTQ DI
	ANDQ DI, DX // after the runs that start on even bits
	ANDQ DI, R8 // after those that start on odd bits
	ANDQ R9, DX
	NOTQ R9
	ANDQ R9, R8
	ORQ  R8, DX

	// R9: the bytes read here, 64 or 63; DI: their mask.
	MOVQ $64, R9
	MOVQ $-1, DI
	BTQ  $63, R11
	JCC  slimit
	MOVQ R11, R8
	NOTQ R8
	TESTQ R8, R8
	JZ   slimit // 64 backslashes: an even run
	BSRQ R8, R8 // the last byte that is not a backslash: the run is 63-R8 long
	BTQ  $0, R8
	JCS  slimit
	MOVQ $63, R9
	MOVQ $0x7fffffffffffffff, DI

slimit:
	// R10: the closing quote, if here; DI: the bits before it.
	MOVQ DX, R8
	NOTQ R8
	ANDQ R8, R10
	ANDQ DI, R10
	JZ   scheck
	MOVQ R10, DI
	SUBQ $1, DI
	MOVQ R10, R8
	NOTQ R8
	ANDQ R8, DI

scheck:
	// An escaped byte that may not follow a backslash, or a NUL.
	MOVQ R13, R8
	NOTQ R8
	ANDQ DX, R8
	ORQ  R12, R8
	ANDQ DI, R8
	JNZ  srefused
	// A \u escape: its digits are checked by the caller.
	MOVQ DX, R8
	ANDQ BX, R8
	ANDQ DI, R8
	JNZ  su
	TESTQ R10, R10
	JZ   snext
	BSFQ R10, R8
	LEAQ 1(AX)(R8*1), AX
	JMP  sended

snext:
	ADDQ R9, AX
	JMP  sloop

su:
	BSFQ R8, R8
	LEAQ -1(AX)(R8*1), AX
	MOVQ $3, DX // strEscapeU
	JMP  sreturn

sended:
	MOVQ $0, DX // strEnd
	JMP  sreturn

srefused:
	MOVQ $1, DX // strRefused
	JMP  sreturn

sshort:
	MOVQ $2, DX // strShort

sreturn:
	VZEROUPPER
	MOVQ AX, pos+16(FP)
	MOVQ DX, status+24(FP)
	RET
