package ooniuid_test

import (
	"math/rand/v2"
	"testing"

	"github.com/backfill-dev/backfill/pipeline/ooniuid"
)

// SumX4 gives each of up to four messages the hash one SHAKE128 state
// gives it, whatever their lengths: across the block size, empty, and
// unequal in one batch.
func TestSumX4_EqualsOneByOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	var x ooniuid.X4
	lengths := []int{0, 1, 15, 167, 168, 169, 335, 336, 337, 1000, 5000}
	for trial := range 400 {
		n := 1 + trial%4
		var msgs [4][]byte
		for k := range n {
			l := lengths[rng.IntN(len(lengths))]
			if trial%3 == 0 {
				l = rng.IntN(3000)
			}
			msgs[k] = make([]byte, l)
			for i := range msgs[k] {
				msgs[k][i] = byte(rng.Uint32())
			}
		}
		var out [4]ooniuid.Hash
		x.SumX4(&msgs, n, &out)
		for k := range n {
			if want := ooniuid.Sum(msgs[k]); out[k] != want {
				t.Fatalf("trial %d, message %d of %d (%d bytes): %s, want %s", trial, k, n, len(msgs[k]), out[k], want)
			}
		}
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

func BenchmarkSumX4(b *testing.B) {
	var msgs [4][]byte
	for k := range msgs {
		msgs[k] = make([]byte, 4000)
	}
	var out [4]ooniuid.Hash
	var x ooniuid.X4
	b.SetBytes(4 * 4000)
	for b.Loop() {
		x.SumX4(&msgs, 4, &out)
	}
}
