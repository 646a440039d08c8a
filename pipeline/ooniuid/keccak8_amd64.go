//go:build amd64 && !purego

package ooniuid

import "golang.org/x/sys/cpu"

//go:generate go run keccak8_gen.go

// keccakF1600x8 permutes eight Keccak-f[1600] states, word i of state k
// at a[8*i+k] (keccak8_amd64.s, AVX-512F).
//
//go:noescape
func keccakF1600x8(a *[200]uint64)

// hasX8 tells whether keccakF1600x8 runs here.
var hasX8 = cpu.X86.HasAVX512F
