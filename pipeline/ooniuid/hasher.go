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

// Sum sets out[i] to the hash of msgs[i], for every message. The
// messages go through the lanes in turn: a lane that has taken the last
// block of its message takes the next message at once, so messages of
// unequal lengths keep every lane busy but at the end.
func (h *Hasher) Sum(msgs [][]byte, out []Hash) {
	switch {
	case len(msgs) > 4 && hasX8:
		clear(h.x8[:])
		h.lanes(h.x8[:], 8, msgs, out, func() { keccakF1600x8(&h.x8) })
	case len(msgs) > 1 && keccakf1600.IsEnabledX4():
		st := h.x4.Initialize(false)
		clear(st)
		h.lanes(st, 4, msgs, out, h.x4.Permute)
	default:
		for i, m := range msgs {
			out[i] = Sum(m)
		}
	}
}

// lanes hashes msgs in the w interleaved states st (word i of state k at
// st[w*i+k]), which permute permutes, all zero to begin with. Lane k
// takes its message's full blocks, then its padded last block; its
// output is read right after the permutation that took that block, and
// the lane is cleared for the next message. A lane left without one goes
// on being permuted, to no effect.
func (h *Hasher) lanes(st []uint64, w int, msgs [][]byte, out []Hash, permute func()) {
	var msg, block [8]int // lane k: the message it hashes (-1: none) and its next block
	next := 0
	for k := range w {
		msg[k] = -1
		if next < len(msgs) {
			msg[k] = next
			next++
		}
	}
	for busy := min(w, len(msgs)); busy > 0; {
		for k := range w {
			if msg[k] < 0 {
				continue
			}
			m, s := msgs[msg[k]], block[k]
			if s < len(m)/rate {
				absorb(st, w, k, m[s*rate:(s+1)*rate])
				continue
			}
			rest := m[s*rate:]
			clear(h.block[:])
			copy(h.block[:], rest)
			h.block[len(rest)] ^= 0x1f
			h.block[rate-1] ^= 0x80
			absorb(st, w, k, h.block[:])
		}
		permute()
		for k := range w {
			i := msg[k]
			if i < 0 {
				continue
			}
			if block[k] < len(msgs[i])/rate {
				block[k]++
				continue
			}
			var lanes [16]byte
			binary.LittleEndian.PutUint64(lanes[:8], st[k])
			binary.LittleEndian.PutUint64(lanes[8:], st[w+k])
			copy(out[i][:], lanes[:15])
			for j := range 25 {
				st[w*j+k] = 0
			}
			block[k], msg[k] = 0, -1
			if next < len(msgs) {
				msg[k] = next
				next++
			} else {
				busy--
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
