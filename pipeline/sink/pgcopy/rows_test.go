package pgcopy

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/ooniuid"
	"github.com/backfill-dev/backfill/pipeline/stamped"
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
		src := &measurementRows{chunks: chunks{ctx: t.Context()}, segs: segments(reports, bits), day: 6000}
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

// The reports' binary COPY stream is, field by field, what pgx's own
// codecs make of the same values (the way the rows were sent before):
// NULLs where a report has no SHA-1 or no winner, and spans that wrap
// past 2^bits - 1, that are whole, and that are empty.
func TestReportRows_AsPgxEncodes(t *testing.T) {
	scheme := ooid.Scheme{CounterBits: 20, SHA1Offset: 33}
	size := uint32(1) << scheme.CounterBits
	var reports []stamped.Report
	var winners []string
	wraps := 0
	for i := range 400 {
		name := fmt.Sprintf("2017-%02d-%02d/2017%02d%02dT%02d%02d%02dZ-IT-AS%d-web_connectivity-%020d-0.2.0-probe.json", 1+i%12, 1+i%28, 1+i%12, 1+i%28, i%24, i%60, (7*i)%60, i, i*7919)
		ids, err := scheme.Report(name)
		if err != nil {
			t.Fatal(err)
		}
		r := stamped.Report{Textname: name, Container: fmt.Sprintf("c%d.tar.lz4", i%3), Offset: int64(i) << 33, Size: int64(i) * 1001, ID: ids, N: uint32(i % 50)}
		if i%5 == 0 {
			r.N = size - ids.CounterBase() + uint32(i%7) // up to the end of the counters, or past it
		}
		if ids.CounterBase()+r.N > size {
			wraps++
		}
		if i%3 != 0 {
			sum := [20]byte{byte(i), 1, 2, 3}
			r.SHA1 = &sum
		}
		w := ""
		if i%4 == 1 {
			w = "20170101T000000Z-XX-AS1-winner-" + name
		}
		reports, winners = append(reports, r), append(winners, w)
	}
	if wraps == 0 {
		t.Fatal("no report's counters wrap")
	}
	day := int32(6361)
	got := reportRows(day, reports, winners, scheme.CounterBits)
	// Sized once: growing the stream as it is made cost more than making it.
	if n := testing.AllocsPerRun(3, func() { reportRows(day, reports, winners, scheme.CounterBits) }); n != 1 {
		t.Errorf("reportRows allocates %v times, want once", n)
	}

	ps := newPgxStream(t)
	field := ps.field
	for i, r := range reports {
		ps.row(len(reportColumns))
		field(pgtype.DateOID, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(day)))
		field(pgtype.Int4OID, int32(i))
		field(pgtype.TextOID, r.Textname)
		field(pgtype.Int8OID, int64(r.ID.TS))
		field(pgtype.TextOID, r.ID.Source.String())
		field(pgtype.Int4OID, int32(r.ID.CounterBase()))
		field(pgtype.Int4OID, int32(r.N))
		span := pgtype.Multirange[pgtype.Range[pgtype.Int4]]{}
		first, second, wrapped := collisions.RangeOf(r.ID, r.N).Spans(scheme.CounterBits)
		for _, s := range [][2]uint32{second, first} {
			if s[1] > s[0] && (wrapped || s == first) {
				span = append(span, pgtype.Range[pgtype.Int4]{Lower: pgtype.Int4{Int32: int32(s[0]), Valid: true}, Upper: pgtype.Int4{Int32: int32(s[1]), Valid: true},
					LowerType: pgtype.Inclusive, UpperType: pgtype.Exclusive, Valid: true})
			}
		}
		field(pgtype.Int4multirangeOID, span)
		field(pgtype.TextOID, r.Container)
		field(pgtype.Int8OID, r.Offset)
		field(pgtype.Int8OID, r.Size)
		if r.SHA1 != nil {
			field(pgtype.ByteaOID, r.SHA1[:])
		} else {
			field(pgtype.ByteaOID, nil)
		}
		if winners[i] != "" {
			field(pgtype.TextOID, winners[i])
		} else {
			field(pgtype.TextOID, nil)
		}
	}
	want := ps.end()
	if !bytes.Equal(got, want) {
		t.Fatalf("the stream differs from pgx's encoding at byte %d of %d (want %d bytes)", firstDiff(got, want), len(got), len(want))
	}
}

// The identities' binary COPY stream is, field by field, what pgx's own
// codecs make of the same values, however small the reads that take it:
// a NULL hash where it is unknown, a NULL date where a measurement has no
// measurement_uid, reports of no measurement, and more rows than one
// chunk of the stream holds.
func TestIdentityRows_AsPgxEncodes(t *testing.T) {
	var reports []stamped.Report
	for i := range 30 {
		r := stamped.Report{N: uint32((i * 97) % 300)}
		for ndx := range int(r.N) {
			var id ooniuid.ID
			if (i+ndx)%11 != 0 {
				id.Hash = ooniuid.Sum([]byte(fmt.Sprint(i, ndx)))
			}
			if (i+ndx)%7 != 0 && id.Hash.Known() {
				id.UID = ooniuid.UID(fmt.Sprintf("2017%04d", 100+i), id.Hash)
			}
			r.IDs = append(r.IDs, id)
		}
		reports = append(reports, r)
	}
	day := int32(6361)
	ps := newPgxStream(t)
	field := ps.field
	rows := 0
	for i, r := range reports {
		for ndx, id := range r.IDs {
			rows++
			ps.row(len(identityColumns))
			field(pgtype.DateOID, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, int(day)))
			field(pgtype.Int4OID, int32(i))
			field(pgtype.Int4OID, int32(ndx))
			if id.Hash.Known() {
				field(pgtype.ByteaOID, id.Hash[:])
			} else {
				field(pgtype.ByteaOID, nil)
			}
			if id.UID != "" {
				field(pgtype.TextOID, strings.TrimSuffix(strings.TrimPrefix(id.UID, "01"), id.Hash.String()))
			} else {
				field(pgtype.TextOID, nil)
			}
		}
	}
	want := ps.end()
	if len(want) < 2*(64<<10) {
		t.Fatalf("%d rows make %d bytes: fewer than two chunks", rows, len(want))
	}
	for _, size := range []int{1, 1000, 1 << 20} {
		src := &identityRows{chunks: chunks{ctx: t.Context()}, day: day, reports: reports}
		var got []byte
		buf := make([]byte, size)
		for len(got) <= len(want) {
			n, err := src.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("reads of %d bytes: the stream differs from pgx's encoding at byte %d of %d (want %d bytes)", size, firstDiff(got, want), len(got), len(want))
		}
	}
}

// pgxStream is a binary COPY stream made with pgx's own codecs: what the
// streams the sink makes are held to.
type pgxStream struct {
	t *testing.T
	m *pgtype.Map
	b []byte
}

func newPgxStream(t *testing.T) *pgxStream {
	return &pgxStream{t: t, m: pgtype.NewMap(), b: append([]byte(nil), copyHeader...)}
}

// row starts a row of n fields.
func (s *pgxStream) row(n int) { s.b = binary.BigEndian.AppendUint16(s.b, uint16(n)) }

// field appends v as the type of oid has it in binary; nil is NULL.
func (s *pgxStream) field(oid uint32, v any) {
	if v == nil {
		s.b = binary.BigEndian.AppendUint32(s.b, 0xFFFFFFFF)
		return
	}
	at := len(s.b)
	s.b = append(s.b, 0, 0, 0, 0)
	var err error
	if s.b, err = s.m.Encode(oid, pgtype.BinaryFormatCode, v, s.b); err != nil {
		s.t.Fatal(err)
	}
	binary.BigEndian.PutUint32(s.b[at:], uint32(len(s.b)-at-4))
}

// end ends the stream and returns it.
func (s *pgxStream) end() []byte { return binary.BigEndian.AppendUint16(s.b, 0xFFFF) }

// firstDiff is the offset of the first byte where a and b differ.
func firstDiff(a, b []byte) int {
	at := 0
	for at < min(len(a), len(b)) && a[at] == b[at] {
		at++
	}
	return at
}
