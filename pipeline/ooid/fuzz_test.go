package ooid

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// addRealTextnames seeds a fuzzer with the real textnames and a few broken
// variants of them.
func addRealTextnames(f *testing.F, add func(name string)) {
	file, err := os.Open(testdata + "textnames.txt")
	if err != nil {
		f.Fatal(err)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		name := sc.Text()
		add(name)
		add(strings.Replace(name, "-0.", "-1.", 1))
		add(strings.Replace(name, "T", "T2", 1))
		add(name[:len(name)/2])
	}
	add("2012-12-05/20121305T071421Z-MM-AS18399-tcp_connect-no_report_id-0.1.0-probe.yaml")
	add("2017-11-14/20171113T151300Z-IQ-AS50710-ndt-20171113T151305Z_AS50711_" + rid50 + "-0.2.0-probe.json")
}

// FuzzParseTextname compares the hand-written parser and OOID computation
// with the regexp/crypto/hex reference for arbitrary input.
func FuzzParseTextname(f *testing.F) {
	addRealTextnames(f, func(name string) { f.Add(name, uint32(0), uint8(28), uint8(33)) })
	f.Fuzz(func(t *testing.T, name string, ndx uint32, bits, off uint8) {
		s := Scheme{CounterBits: MinCounterBits + int(bits)%(MaxCounterBits-MinCounterBits+1), SHA1Offset: int(off) % (MaxSHA1Offset + 1)}
		got, err := ParseTextname(name)
		wantTS, wantSrc, wantErr := refParse(name)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("ParseTextname(%q) err = %v, reference err = %v", name, err, wantErr)
		}
		if err != nil {
			return
		}
		if got.TS != wantTS || got.Source != wantSrc {
			t.Fatalf("ParseTextname(%q) = %d %v, reference %d %v", name, got.TS, got.Source, wantTS, wantSrc)
		}
		r, err := s.ReportBytes([]byte(name))
		if err != nil {
			t.Fatalf("ReportBytes(%q): %v", name, err)
		}
		want, _ := refOOID(name, uint64(ndx), s)
		if id := r.ID(ndx); id != want || id.String() != refFormat(want) {
			t.Fatalf("%v ID(%q, %d) = %s, reference %s", s, name, ndx, id, refFormat(want))
		}
	})
}

// FuzzID checks that the text forms and the decoders round-trip.
func FuzzID(f *testing.F) {
	f.Add(uint64(0x50bef44df29c69e2))
	f.Add(uint64(0x6021b60e2aabcdef))
	f.Add(uint64(0))
	f.Add(^uint64(0))
	f.Fuzz(func(t *testing.T, v uint64) {
		id := ID(v)
		s := id.String()
		if s != refFormat(id) {
			t.Fatalf("String() = %s, want %s", s, refFormat(id))
		}
		back, err := Parse(s)
		if err != nil || back != id {
			t.Fatalf("Parse(%q) = %v, %v", s, back, err)
		}
		if FromInt64(id.Int64()) != id {
			t.Fatalf("Int64 round trip of %s", s)
		}
		d := id.Decode()
		if d.Unix != uint32(v>>32) {
			t.Fatalf("Decode(%s).Unix = %d", s, d.Unix)
		}
		var rebuilt ID
		switch d.Namespace {
		case Backfilled:
			rebuilt = ID(uint64(d.Unix)<<32 | backfillNibble | uint64(d.Counter))
		case Collector:
			rebuilt, err = NewCollectorID(d.Unix, d.CollectorID, d.Counter)
			if err != nil {
				t.Fatalf("NewCollectorID from Decode(%s): %v", s, err)
			}
		}
		if rebuilt != id {
			t.Fatalf("Decode(%s) = %+v rebuilds %s", s, d, rebuilt)
		}
	})
}

// FuzzParse feeds arbitrary text to Parse: no panic, and whatever it
// accepts formats back to the same digits.
func FuzzParse(f *testing.F) {
	f.Add("50bef44df29c69e2")
	f.Add("50BEF44DF29C69E2")
	f.Add("zz")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			return
		}
		if id.String() != strings.ToLower(s) {
			t.Fatalf("Parse(%q) = %s", s, id)
		}
	})
}

// FuzzParseAny feeds arbitrary text to ParseAny: no panic, and whatever it
// accepts is the value strconv reads from the same text in the form the
// rule says (16 hex digits, 0x hex, or a decimal, spaces around ignored).
func FuzzParseAny(f *testing.F) {
	for _, s := range []string{"50bef44df29c69e2", "0x1f", "  5818356384229255650", "-1", "+5", "18446744073709551615", "0x", "1234567890123456"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseAny([]byte(s))
		if err != nil {
			return
		}
		v := strings.Trim(s, " \t\r")
		var want uint64
		var perr error
		switch {
		case len(v) == 16 && !strings.ContainsAny(v, "+-xX"):
			want, perr = strconv.ParseUint(v, 16, 64)
		case strings.HasPrefix(v, "0x") || strings.HasPrefix(v, "0X"):
			want, perr = strconv.ParseUint(v[2:], 16, 64)
		case strings.HasPrefix(v, "-"):
			var n int64
			n, perr = strconv.ParseInt(v, 10, 64)
			want = uint64(n)
		default:
			want, perr = strconv.ParseUint(strings.TrimPrefix(v, "+"), 10, 64)
		}
		if perr != nil || uint64(id) != want {
			t.Fatalf("ParseAny(%q) = %x; strconv says %x, %v", s, uint64(id), want, perr)
		}
	})
}
