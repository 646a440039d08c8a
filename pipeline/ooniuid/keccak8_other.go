//go:build !amd64 || purego

package ooniuid

func keccakF1600x8(a *[200]uint64) { panic("ooniuid: no eight-way Keccak here") }

const hasX8 = false
