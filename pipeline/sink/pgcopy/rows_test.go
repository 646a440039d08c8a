package pgcopy

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// The binary COPY stream holds every row of every report once, in
// ascending OOID order, wrapped counters included; the rows are those a
// plain loop over the reports' measurements makes.
func TestMeasurementRows_SortedAndComplete(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, bits := range []int{20, 24, 28} {
		size := uint32(1) << uint(bits)
		var reports []copyReport
		type row struct {
			id       int64
			seq, ndx int32
		}
		var want []row
		var kept []collisions.Range
		for seq := range int32(300) {
			// Kept reports never overlap: draw until this one does not.
			var r copyReport
			for {
				r = copyReport{ts: 1_500_000_000 + uint32(rng.IntN(5)), base: rng.Uint32() & (size - 1), n: uint32(1 + rng.IntN(50)), seq: seq}
				if seq%7 == 0 {
					// wraps past 2^bits - 1, beside the others' ranges
					r.ts, r.base = 1_500_000_000+uint32(rng.IntN(50)), size-uint32(rng.IntN(10))-1
				}
				rg := collisions.Range{TS: r.ts, Base: r.base, N: r.n}
				if !slices.ContainsFunc(kept, func(k collisions.Range) bool { return k.Overlaps(rg, bits) }) {
					kept = append(kept, rg)
					break
				}
			}
			reports = append(reports, r)
			for ndx := range r.n {
				want = append(want, row{ooid.NewBackfilledID(r.ts, (r.base+ndx)&(size-1)).Int64(), seq, int32(ndx)})
			}
		}
		src := &measurementRows{ctx: t.Context(), segs: segments(reports, bits), day: 6000}
		raw, err := io.ReadAll(src)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(raw, copyHeader) || !bytes.HasSuffix(raw, []byte{0xFF, 0xFF}) {
			t.Fatalf("bits %d: no COPY header or trailer", bits)
		}
		body := raw[len(copyHeader) : len(raw)-2]
		if len(body)%rowSize != 0 {
			t.Fatalf("bits %d: %d bytes of rows, not a multiple of %d", bits, len(body), rowSize)
		}
		var got []row
		for b := body; len(b) > 0; b = b[rowSize:] {
			if binary.BigEndian.Uint16(b) != 4 || binary.BigEndian.Uint32(b[18:]) != 6000 {
				t.Fatalf("bits %d: a row's field count or day is wrong: % x", bits, b[:rowSize])
			}
			got = append(got, row{int64(binary.BigEndian.Uint64(b[6:])), int32(binary.BigEndian.Uint32(b[26:])), int32(binary.BigEndian.Uint32(b[34:]))})
		}
		if !slices.IsSortedFunc(got, func(a, b row) int { return cmpUnsigned(a.id, b.id) }) {
			t.Errorf("bits %d: rows not in OOID order", bits)
		}
		slices.SortFunc(got, func(a, b row) int { return cmpUnsigned(a.id, b.id) })
		slices.SortFunc(want, func(a, b row) int { return cmpUnsigned(a.id, b.id) })
		if !slices.Equal(got, want) {
			t.Errorf("bits %d: %d rows, want %d, or rows differ", bits, len(got), len(want))
		}
	}
}

// cmpUnsigned orders OOIDs as the unsigned 64-bit values they are.
func cmpUnsigned(a, b int64) int {
	switch {
	case uint64(a) < uint64(b):
		return -1
	case uint64(a) > uint64(b):
		return 1
	}
	return 0
}
