package ooniuid

import (
	"encoding/binary"

	"github.com/cloudflare/circl/simd/keccakf1600"
)

// rate is SHAKE128's block: 168 bytes, 21 lanes of the state.
const rate = 168

// X4 hashes up to four messages at once, each in a lane of a four-way
// Keccak-f[1600] (AVX2): about three times the bytes a second of one
// SHAKE128 state. Where the processor has no AVX2 it hashes them one by
// one. Not safe for concurrent use: keep one per goroutine.
type X4 struct {
	st    keccakf1600.StateX4
	block [rate]byte
}

// SumX4 sets out[i] to the hash of msgs[i], for the first n messages
// (n <= 4).
func (x *X4) SumX4(msgs *[4][]byte, n int, out *[4]Hash) {
	if n == 1 || !keccakf1600.IsEnabledX4() {
		for i := range n {
			out[i] = Sum(msgs[i])
		}
		return
	}
	a := x.st.Initialize(false)
	clear(a)
	// Lane k takes full blocks, then its padded last block; the output
	// is read right after the permutation that took the last block (the
	// lanes done go on being permuted, to no effect on what was read).
	var blocks [4]int // full blocks of each message
	steps := 0
	for k := range n {
		blocks[k] = len(msgs[k]) / rate
		steps = max(steps, blocks[k]+1)
	}
	for s := range steps {
		for k := range n {
			switch {
			case s < blocks[k]:
				absorb(a, k, msgs[k][s*rate:(s+1)*rate])
			case s == blocks[k]:
				rest := msgs[k][s*rate:]
				clear(x.block[:])
				copy(x.block[:], rest)
				x.block[len(rest)] ^= 0x1f
				x.block[rate-1] ^= 0x80
				absorb(a, k, x.block[:])
			}
		}
		x.st.Permute()
		for k := range n {
			if s == blocks[k] {
				var lanes [16]byte
				binary.LittleEndian.PutUint64(lanes[:8], a[k])
				binary.LittleEndian.PutUint64(lanes[8:], a[4+k])
				copy(out[k][:], lanes[:15])
			}
		}
	}
}

// absorb XORs a block of rate bytes into lane k of the interleaved state.
func absorb(a []uint64, k int, b []byte) {
	for i := range rate / 8 {
		a[4*i+k] ^= binary.LittleEndian.Uint64(b[8*i:])
	}
}
