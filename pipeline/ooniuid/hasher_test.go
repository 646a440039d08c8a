package ooniuid_test

import (
	"math/rand/v2"
	"testing"

	"github.com/backfill-dev/backfill/pipeline/ooniuid"
)

// A Hasher gives each message the hash one SHAKE128 state gives it, in
// batches of any size and whatever the lengths: across the block size,
// empty, and unequal in one batch. Batches of four or fewer, and the
// rest of a batch past its eights, take four lanes, so both widths are
// held to Sum.
func TestHasher_EqualsOneByOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	var h ooniuid.Hasher
	lengths := []int{0, 1, 15, 167, 168, 169, 335, 336, 337, 1000, 5000}
	for trial := range 400 {
		msgs := make([][]byte, 1+trial%19)
		for k := range msgs {
			l := lengths[rng.IntN(len(lengths))]
			if trial%3 == 0 {
				l = rng.IntN(3000)
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

func BenchmarkSum(b *testing.B) {
	msg := make([]byte, 4000)
	b.SetBytes(4 * int64(len(msg)))
	for b.Loop() {
		for range 4 {
			ooniuid.Sum(msg)
		}
	}
}
