package lz4nocheck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/pierrec/lz4/v4"

	"github.com/backfill-dev/backfill/internal/lz4frame"
	"github.com/backfill-dev/backfill/internal/testutil"
)

// sample is compressible text with random stretches.
func sample(rng *rand.Rand, n int) []byte {
	out := make([]byte, 0, n)
	words := []string{"measurement", "report_id", "\"test_keys\": {", "2017-06-01 ", "probe_asn AS", "---\n", "...\n"}
	for len(out) < n {
		if rng.IntN(5) == 0 {
			for range rng.IntN(300) {
				out = append(out, byte(rng.Uint32()))
			}
		} else {
			out = append(out, words[rng.IntN(len(words))]...)
		}
	}
	return out[:n]
}

func decodeAll(r io.Reader) ([]byte, error) {
	d := NewDecoder()
	d.Reset(r)
	return io.ReadAll(d)
}

// The decoder gives pierrec/lz4's reader's bytes for every block size,
// with and without block and content checksums and content size, for
// empty and multi-block inputs and for frames back to back.
func TestDecoder_SameAsPierrec(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []lz4.BlockSize{lz4.Block64Kb, lz4.Block256Kb, lz4.Block1Mb, lz4.Block4Mb}
	for _, n := range []int{0, 1, 1000, 70_000, 1 << 20, 5 << 20} {
		data := sample(rng, n)
		for _, bs := range sizes {
			for _, sums := range []bool{false, true} {
				opts := []lz4.Option{lz4.BlockSizeOption(bs), lz4.ChecksumOption(sums), lz4.BlockChecksumOption(sums), lz4.ConcurrencyOption(1)}
				if sums {
					opts = append(opts, lz4.SizeOption(uint64(n)))
				}
				z := testutil.LZ4(t, data, opts...)
				got, err := decodeAll(bytes.NewReader(z))
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("%d bytes, %v, sums %v: %d bytes back, %v", n, bs, sums, len(got), err)
				}
			}
		}
		// Two frames and a skippable one between them.
		z := testutil.LZ4(t, data)
		skip := []byte{0x50, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 'x', 'y', 'z'}
		two := append(append(append([]byte{}, z...), skip...), z...)
		got, err := decodeAll(bytes.NewReader(two))
		if err != nil || !bytes.Equal(got, append(append([]byte{}, data...), data...)) {
			t.Fatalf("%d bytes, two frames: %d bytes back, %v", n, len(got), err)
		}
	}
}

// Every cut of a frame is an unexpected end (or a clean end at a frame
// boundary); every damaged byte gives an error or other bytes, never a
// panic; a wrong content size and linked blocks are refused.
func TestDecoder_BadInput(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	data := sample(rng, 200_000)
	z := testutil.LZ4(t, data, lz4.BlockSizeOption(lz4.Block64Kb), lz4.SizeOption(uint64(len(data))))
	for cut := 1; cut < len(z); cut += 1 + cut/50 {
		_, err := decodeAll(bytes.NewReader(z[:cut]))
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d of %d: %v, want an unexpected end", cut, len(z), err)
		}
	}
	for range 2000 {
		bad := bytes.Clone(z)
		bad[rng.IntN(len(bad))] ^= byte(1 + rng.IntN(255))
		decodeAll(bytes.NewReader(bad)) // must not panic
	}
	wrong := bytes.Clone(z)
	binary.LittleEndian.PutUint64(wrong[6:14], uint64(len(data))+1)
	wrong[14] = lz4frame.HeaderChecksum(wrong[4:14])
	if _, err := decodeAll(bytes.NewReader(wrong)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a wrong content size: %v", err)
	}
	linked := bytes.Clone(z)
	linked[4] &^= 0x20
	linked[6+8] = 0 // the header checksum no longer matters: it is checked first
	if _, err := decodeAll(bytes.NewReader(linked)); err == nil {
		t.Error("linked blocks accepted")
	}
	big := bytes.Clone(z)
	// The first block's size over the 64 KiB maximum, as a damaged file has it.
	big[4+2+8+1] = 0
	big[4+2+8+2] = 0
	big[4+2+8+3] = 0x50
	if _, err := decodeAll(bytes.NewReader(big)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("an oversized block: %v", err)
	}
}

func FuzzDecoder(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 100, 70_000} {
		f.Add(testutil.LZ4(f, sample(rng, n), lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(n > 0)))
	}
	f.Fuzz(func(t *testing.T, z []byte) {
		got, err := decodeAll(bytes.NewReader(z))
		want, werr := io.ReadAll(lz4.NewReader(bytes.NewReader(z)))
		if err == nil && werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("both decoders accept the input and give different bytes")
		}
	})
}

// BenchmarkDecode compares the decoder with pierrec/lz4's reader, which
// also computes the content checksum, on a 16 MiB frame of 4 MiB blocks.
//
//	go test -run '^$' -bench Decode ./internal/lz4nocheck/
func BenchmarkDecode(b *testing.B) {
	data := sample(rand.New(rand.NewPCG(7, 8)), 16<<20)
	z := testutil.LZ4(b, data, lz4.BlockSizeOption(lz4.Block4Mb))
	b.Run("impl=nocheck", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		d := NewDecoder()
		for b.Loop() {
			d.Reset(bytes.NewReader(z))
			io.Copy(io.Discard, d)
		}
	})
	b.Run("impl=pierrec", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		r := lz4.NewReader(nil)
		for b.Loop() {
			r.Reset(bytes.NewReader(z))
			io.Copy(io.Discard, r)
		}
	})
}
