//go:build amd64 && !purego

package ooniuid

import "golang.org/x/sys/cpu"

// scan64 looks at b[off:off+64] for off = 0, 64, … while off+64 <= n,
// and returns the first off whose 64 bytes hold a quote, a backslash or
// a NUL, or (high all ones) a byte past ASCII, with the mask of those
// bytes (bit j for byte off+j); past the last whole 64 bytes, off with a
// mask of 0 (scan_amd64.s, AVX2).
//
//go:noescape
func scan64(b *byte, n int, high uint64) (off int, mask uint64)

// hasScan64 tells whether scan64 runs here.
var hasScan64 = cpu.X86.HasAVX2

// skipString reads a string of a line that is all UTF-8 from b (just
// past its opening quote, or past a character of it) while 64 bytes
// remain, and returns where it stopped and why: strEnd, pos just past the
// closing quote; strRefused, ujson refuses the string (a NUL, a backslash
// before a byte that may not follow one); strShort, fewer than 64 bytes
// remain from pos; strEscapeU, a \u escape's backslash at pos, whose four
// hex digits are left to the caller (scan_amd64.s, AVX2).
//
//go:noescape
func skipString(b *byte, n int) (pos int, status int)
