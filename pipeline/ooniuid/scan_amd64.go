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

// scanEscapes is scan64 of a line that is all UTF-8 (bytes past ASCII
// are plain): it returns the first off whose 64 bytes hold a quote, a
// backslash or a NUL, and sets m to the masks of those 64 bytes that are
// a quote, a backslash, a NUL, a byte that may follow a backslash
// (`"\/bfnrtu`) and a u; past the last whole 64 bytes, off with m all 0
// (scan_amd64.s, AVX2).
//
//go:noescape
func scanEscapes(b *byte, n int, m *[5]uint64) (off int)
