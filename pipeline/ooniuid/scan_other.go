//go:build !amd64 || purego

package ooniuid

func scan64(b *byte, n int, high uint64) (int, uint64) { panic("ooniuid: no scan64 here") }

const hasScan64 = false

func skipString(b *byte, n int) (int, int) { panic("ooniuid: no skipString here") }
