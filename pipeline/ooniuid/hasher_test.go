package ooniuid_test

import (
	"math/rand/v2"
	"testing"

	"github.com/backfill-dev/backfill/pipeline/ooniuid"
)

// A Hasher gives each message the hash one SHAKE128 state gives it, in
// batches of any size and whatever the lengths: across the block size,
// empty, and unequal in one batch, so that lanes take new messages while
// others still hash theirs. Batches of four or fewer take four lanes, so
// both widths are held to Sum.
func TestHasher_EqualsOneByOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	var h ooniuid.Hasher
	lengths := []int{0, 1, 15, 167, 168, 169, 335, 336, 337, 1000, 5000}
	for trial := range 400 {
		msgs := make([][]byte, 1+trial%41)
		for k := range msgs {
			l := lengths[rng.IntN(len(lengths))]
			switch trial % 3 {
			case 0:
				l = rng.IntN(3000)
			case 1:
				l = rng.IntN(3) * rng.IntN(20000) // some empty, some long
			}
			msgs[k] = make([]byte, l)
			for i := range msgs[k] {
				msgs[k][i] = byte(rng.Uint32())
			}
		}
		out := make([]ooniuid.Hash, len(msgs))
		h.Sum(msgs, out)
		for k := range msgs {
			if want := ooniuid.Sum(msgs[k]); out[k] != want {
				t.Fatalf("trial %d, message %d of %d (%d bytes, %d lanes): %s, want %s", trial, k, len(msgs), len(msgs[k]), ooniuid.Lanes(), out[k], want)
			}
		}
	}
}

func BenchmarkHasher(b *testing.B) {
	msgs := make([][]byte, ooniuid.Lanes())
	for k := range msgs {
		msgs[k] = make([]byte, 4000)
	}
	out := make([]ooniuid.Hash, len(msgs))
	var h ooniuid.Hasher
	b.SetBytes(int64(len(msgs)) * 4000)
	for b.Loop() {
		h.Sum(msgs, out)
	}
}

// BenchmarkHasherUnequal hashes 32 messages of 500 bytes to 60 KB, as
// the lines of a web_connectivity report come.
func BenchmarkHasherUnequal(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	msgs := make([][]byte, 32)
	var size int64
	for k := range msgs {
		msgs[k] = make([]byte, 500+rng.IntN(60000))
		size += int64(len(msgs[k]))
	}
	out := make([]ooniuid.Hash, len(msgs))
	var h ooniuid.Hasher
	b.Run("eights", func(b *testing.B) { // as batches of eight take them
		b.SetBytes(size)
		for b.Loop() {
			for i := 0; i < len(msgs); i += 8 {
				h.Sum(msgs[i:i+8], out[i:i+8])
			}
		}
	})
	b.Run("all", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			h.Sum(msgs, out)
		}
	})
}

func BenchmarkSum(b *testing.B) {
	msg := make([]byte, 4000)
	b.SetBytes(4 * int64(len(msg)))
	for b.Loop() {
		for range 4 {
			ooniuid.Sum(msg)
		}
	}
}
