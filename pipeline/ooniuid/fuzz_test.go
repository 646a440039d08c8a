package ooniuid_test

import (
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/pipeline/ooniuid"
)

// JSONDate and Date never panic, whatever the bytes, and a date is
// NoDate or eight digits (five to seven for a year below 1000, which
// strftime writes without padding: year 1 is "10101"). JSONDate reads
// every line as it does with its strings read eight bytes at a time.
func FuzzJSONDate(f *testing.F) {
	for _, s := range []string{`{"measurement_start_time": "2017-06-01 10:11:12"}`, `{"a": [1, {"b": "\ud800"}], "measurement_start_time": "２０１７-6- 1\u00a01:2:3"}`,
		`{"a": -Infinity, "b": 01.e5}`, `{"measurement_start_time": "0999-01-01 00:00:00"}`, "{\"a\": \"\xed\xa0\x80\"}"} {
		f.Add([]byte(s))
	}
	// Strings over several 64-byte chunks, with escapes and bytes past ASCII.
	f.Add([]byte(`{"body": "` + strings.Repeat(`<a href=\"/x\">é</a>\n\t`, 12) + `", "measurement_start_time": "2017-06-01 10:11:12"}`))
	f.Add([]byte("{\"b\": \"\xed\xa0\x80" + strings.Repeat("€x\\u00e9", 20) + "\"}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		date, ok := ooniuid.JSONDate(b)
		if d, k := ooniuid.JSONDateBytewise(b); d != date || k != ok {
			t.Fatalf("%q: %q, %v; read eight bytes at a time %q, %v", b, date, ok, d, k)
		}
		if ok && date != ooniuid.NoDate && (len(date) < 5 || len(date) > 8 || strings.Trim(date, "0123456789") != "") {
			t.Fatalf("%q: date %q", b, date)
		}
		_ = ooniuid.Date(string(b))
	})
}

// A YAML report's uids never panic or run away, whatever its header and
// entries: recursive aliases and aliases of aliases included.
func FuzzYAMLUID(f *testing.F) {
	f.Add([]byte("---\nstart_time: 1388620800.0\nreport_id: r\n...\n"), []byte("---\ntest_start_time: 1.5\ninput: x\n...\n"))
	f.Add([]byte("---\na: &x [*x]\n...\n"), []byte("---\na: &a [1,2]\nb: &b [*a,*a,*a,*a]\nc: [*b,*b,*b,*b]\nrequests: *b\ntest_name: http_requests\n...\n"))
	f.Add([]byte("---\nreport_id: r\ntest_name: dns_consistency\n...\n"), []byte("---\nqueries: [{answers: [[x, 5]]}]\ntampering: {a: 1}\n...\n"))
	f.Fuzz(func(t *testing.T, header, doc []byte) {
		y := ooniuid.NewYAMLReport(header)
		for range 2 {
			if uid := y.UID(doc, ooniuid.Sum(doc)); uid != "" && (len(uid) < 37 || len(uid) > 40) {
				t.Fatalf("uid %q", uid)
			}
		}
	})
}

// Falsy never panics or runs away, whatever the document: the python/
// tags' constructors (a complex's text, an applied builtin) included.
func FuzzFalsy(f *testing.F) {
	for _, s := range []string{"---\n!!python/complex (1e+5-.5J)\n...\n", "---\n!!python/object/apply:builtins.int []\n...\n",
		"---\n!!python/bool maybe\n...\n", "---\n!!binary '  '\n...\n", "---\n&a [*a]\n...\n", "---\n!!python/complex +j\n...\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		_ = ooniuid.Falsy(doc)
	})
}

// FuzzJSONStream: a line given to JSONStream in pieces (cut where the
// fuzzer says) reads as JSONDate reads it whole.
func FuzzJSONStream(f *testing.F) {
	for _, s := range []string{`{"measurement_start_time": "2017-06-01 10:11:12"}`, `{"a": [1, {"b": "\ud800"}], "measurement_start_time": "２０１７-6- 1\u00a01:2:3"}`,
		`{"a": -Infinity, "b": 01.e5}`, `{"measurement_start_time": "\ud835\udfce017-06-01 10:11:12", "measurement_start_time": 5}`,
		"{\"a\": \"\xed\xa0\x80\", \"measurement\\u005fstart_time\": \"2017-06-01 10:11:12\"}", `[1, 2e5, -, -.5, true, null, NaN]`, `"x"`, `12`} {
		f.Add([]byte(s), uint64(0x0102030405060708))
	}
	f.Fuzz(func(t *testing.T, b []byte, cuts uint64) {
		var s ooniuid.JSONStream
		rest := b
		for len(rest) > 0 {
			n := min(len(rest), 1+int(cuts&15))
			cuts = cuts>>4 | cuts<<60
			s.Add(rest[:n])
			rest = rest[n:]
		}
		date, ok, unread := s.Date()
		wantDate, wantOK := ooniuid.JSONDate(b)
		if ok != wantOK || ok && !unread && date != wantDate || unread {
			t.Fatalf("%q: streamed %q %v (unread %v), whole %q %v", b, date, ok, unread, wantDate, wantOK)
		}
	})
}
