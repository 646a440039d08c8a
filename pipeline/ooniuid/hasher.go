package ooniuid

import "encoding/binary"

// Hasher hashes messages several at a time: eight, each in a lane of an
// eight-way Keccak-f[1600] (AVX-512), where the processor has AVX-512F,
// else four (X4). Not safe for concurrent use: keep one per goroutine.
type Hasher struct {
	x4    X4
	st    [200]uint64 // eight states, word i of state k at st[8*i+k]
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
		if hasX8 && len(msgs) > 4 {
			n := min(len(msgs), 8)
			h.sum8(msgs[:n], out[:n])
			msgs, out = msgs[n:], out[n:]
			continue
		}
		var m [4][]byte
		var o [4]Hash
		n := copy(m[:], msgs)
		h.x4.SumX4(&m, n, &o)
		copy(out, o[:n])
		msgs, out = msgs[n:], out[n:]
	}
}

// sum8 hashes up to eight messages in the lanes of h.st. Lane k takes
// its full blocks, then its padded last block; its output is read right
// after the permutation that took that block (a lane done goes on being
// permuted, to no effect on what was read).
func (h *Hasher) sum8(msgs [][]byte, out []Hash) {
	clear(h.st[:])
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
				absorb8(&h.st, k, m[s*rate:(s+1)*rate])
			case s == blocks[k]:
				rest := m[s*rate:]
				clear(h.block[:])
				copy(h.block[:], rest)
				h.block[len(rest)] ^= 0x1f
				h.block[rate-1] ^= 0x80
				absorb8(&h.st, k, h.block[:])
			}
		}
		keccakF1600x8(&h.st)
		for k := range msgs {
			if s == blocks[k] {
				var lanes [16]byte
				binary.LittleEndian.PutUint64(lanes[:8], h.st[k])
				binary.LittleEndian.PutUint64(lanes[8:], h.st[8+k])
				copy(out[k][:], lanes[:15])
			}
		}
	}
}

// absorb8 XORs a block of rate bytes into lane k of the eight states.
func absorb8(st *[200]uint64, k int, b []byte) {
	b = b[:rate]
	for i := range rate / 8 {
		st[8*i+k] ^= binary.LittleEndian.Uint64(b[8*i:])
	}
}
