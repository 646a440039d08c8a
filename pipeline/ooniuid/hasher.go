package ooniuid

import (
	"encoding/binary"

	"github.com/cloudflare/circl/simd/keccakf1600"
)

// rate is SHAKE128's block: 168 bytes, 21 lanes of the state.
const rate = 168

// Hasher hashes messages several at a time, each in a lane of a
// multi-way Keccak-f[1600]: eight where the processor has AVX-512F
// (keccakF1600x8), else four in AVX2 (circl's StateX4), else one by one.
// Not safe for concurrent use: keep one per goroutine.
type Hasher struct {
	x4    keccakf1600.StateX4
	x8    [200]uint64 // eight states, word i of state k at x8[8*i+k]
	block [rate]byte
}

// Lanes is how many messages a Hasher hashes at once here: the size of
// the batches to give Sum.
func Lanes() int {
	if hasX8 {
		return 8
	}
	return 4
}

// Sum sets out[i] to the hash of msgs[i], for every message.
func (h *Hasher) Sum(msgs [][]byte, out []Hash) {
	for len(msgs) > 0 {
		n := min(len(msgs), Lanes())
		switch {
		case n > 4:
			clear(h.x8[:])
			h.lanes(h.x8[:], 8, msgs[:n], out[:n], func() { keccakF1600x8(&h.x8) })
		case n == 1 || !keccakf1600.IsEnabledX4():
			for i := range n {
				out[i] = Sum(msgs[i])
			}
		default:
			st := h.x4.Initialize(false)
			clear(st)
			h.lanes(st, 4, msgs[:n], out[:n], h.x4.Permute)
		}
		msgs, out = msgs[n:], out[n:]
	}
}

// lanes hashes up to w messages in the w interleaved states st (word i of
// state k at st[w*i+k]), which permute permutes. Lane k takes its
// message's full blocks, then its padded last block; its output is read
// right after the permutation that took that block (a lane done goes on
// being permuted, to no effect on what was read).
func (h *Hasher) lanes(st []uint64, w int, msgs [][]byte, out []Hash, permute func()) {
	var blocks [8]int
	steps := 0
	for k, m := range msgs {
		blocks[k] = len(m) / rate
		steps = max(steps, blocks[k]+1)
	}
	for s := range steps {
		for k, m := range msgs {
			switch {
			case s < blocks[k]:
				absorb(st, w, k, m[s*rate:(s+1)*rate])
			case s == blocks[k]:
				rest := m[s*rate:]
				clear(h.block[:])
				copy(h.block[:], rest)
				h.block[len(rest)] ^= 0x1f
				h.block[rate-1] ^= 0x80
				absorb(st, w, k, h.block[:])
			}
		}
		permute()
		for k := range msgs {
			if s == blocks[k] {
				var lanes [16]byte
				binary.LittleEndian.PutUint64(lanes[:8], st[k])
				binary.LittleEndian.PutUint64(lanes[8:], st[w+k])
				copy(out[k][:], lanes[:15])
			}
		}
	}
}

// absorb XORs a block of rate bytes into lane k of w interleaved states.
func absorb(st []uint64, w, k int, b []byte) {
	b = b[:rate]
	for i := range rate / 8 {
		st[w*i+k] ^= binary.LittleEndian.Uint64(b[8*i:])
	}
}
