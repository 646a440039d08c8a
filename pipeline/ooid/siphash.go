package ooid

import (
	"encoding/binary"
	"math/bits"
)

// Key is a 128-bit SipHash key, as two little-endian 64-bit words: k0 is
// bytes 0..7 of the key, k1 bytes 8..15.
type Key struct{ K0, K1 uint64 }

// KeyFromBytes reads a 16-byte key.
func KeyFromBytes(b [16]byte) Key {
	return Key{binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])}
}

// Bytes returns the key's 16 bytes.
func (k Key) Bytes() [16]byte {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], k.K0)
	binary.LittleEndian.PutUint64(b[8:], k.K1)
	return b
}

// SipHash24 returns SipHash-2-4 of msg under key k (Aumasson and
// Bernstein, "SipHash: a fast short-input PRF", 2012): two compression
// rounds per 8-byte word, four finalization rounds, 64-bit output. It does
// not allocate.
func SipHash24[T text](k Key, msg T) uint64 {
	v0 := k.K0 ^ 0x736f6d6570736575
	v1 := k.K1 ^ 0x646f72616e646f6d
	v2 := k.K0 ^ 0x6c7967656e657261
	v3 := k.K1 ^ 0x7465646279746573
	n := len(msg)
	i := 0
	for ; i+8 <= n; i += 8 {
		m := uint64(msg[i]) | uint64(msg[i+1])<<8 | uint64(msg[i+2])<<16 | uint64(msg[i+3])<<24 |
			uint64(msg[i+4])<<32 | uint64(msg[i+5])<<40 | uint64(msg[i+6])<<48 | uint64(msg[i+7])<<56
		v3 ^= m
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0 ^= m
	}
	m := uint64(n) << 56
	for j := 0; i+j < n; j++ {
		m |= uint64(msg[i+j]) << (8 * j)
	}
	v3 ^= m
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= m
	v2 ^= 0xff
	for range 4 {
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	}
	return v0 ^ v1 ^ v2 ^ v3
}

func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13)
	v1 ^= v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16)
	v3 ^= v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21)
	v3 ^= v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17)
	v1 ^= v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}
