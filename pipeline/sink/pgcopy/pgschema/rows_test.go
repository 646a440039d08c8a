package pgschema

import (
	"encoding/binary"
	"testing"
)

// copyStream is COPY's binary format of the rows (day, report, ndx, ooid)
// as the server writes it.
func copyStream(rows [][4]int64) []byte {
	b := append([]byte(copySignature), 0, 0, 0, 0, 0, 0, 0, 0)
	for _, r := range rows {
		b = binary.BigEndian.AppendUint16(b, 4)
		for _, v := range r[:3] {
			b = binary.BigEndian.AppendUint32(b, 4)
			b = binary.BigEndian.AppendUint32(b, uint32(v))
		}
		b = binary.BigEndian.AppendUint32(b, 8)
		b = binary.BigEndian.AppendUint64(b, uint64(r[3]))
	}
	return binary.BigEndian.AppendUint16(b, 0xffff)
}

// The rows come out whole and in order however the stream is cut; a
// stream cut short is not ended, and one that is not binary COPY, or
// whose rows are not the four columns, is refused.
func TestCopyRows(t *testing.T) {
	want := [][4]int64{{6360, 0, 0, -1}, {6361, 7, 3, 0x592e0780f00333b0}, {-2, 1 << 30, 1<<31 - 1, 1}}
	stream := copyStream(want)
	for size := 1; size <= len(stream); size++ {
		var got [][4]int64
		c := &MeasurementRows{fn: func(day, report, ndx int32, id int64) error {
			got = append(got, [4]int64{int64(day), int64(report), int64(ndx), id})
			return nil
		}}
		for p := stream; len(p) > 0; p = p[min(size, len(p)):] {
			if n, err := c.Write(p[:min(size, len(p))]); err != nil || n != min(size, len(p)) {
				t.Fatalf("pieces of %d: %d, %v", size, n, err)
			}
		}
		if !c.ended || len(got) != len(want) {
			t.Fatalf("pieces of %d: ended %v, %v", size, c.ended, got)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("pieces of %d: row %d is %v, want %v", size, i, got[i], want[i])
			}
		}
	}
	short := &MeasurementRows{fn: func(int32, int32, int32, int64) error { return nil }}
	if _, err := short.Write(stream[:len(stream)-5]); err != nil || short.ended {
		t.Errorf("a stream cut short: %v, ended %v", err, short.ended)
	}
	bad := append([]byte(nil), stream...)
	bad[0] = 'X'
	if _, err := (&MeasurementRows{}).Write(bad); err == nil {
		t.Error("a stream that is not binary COPY was read")
	}
	null := append([]byte(nil), stream...)
	binary.BigEndian.PutUint32(null[len(copySignature)+8+2:], 0xffffffff) // the first row's bucket NULL
	if _, err := (&MeasurementRows{fn: func(int32, int32, int32, int64) error { return nil }}).Write(null); err == nil {
		t.Error("a row with a NULL was read")
	}
}
