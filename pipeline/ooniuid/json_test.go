package ooniuid_test

import (
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/pipeline/ooniuid"
)

// TestJSONDate_StringsAcrossChunks puts each thing a string's reading
// must look at (escapes, a NUL, bytes past ASCII, the closing quote, the
// end of the line) at every place around the first two 64-byte chunks of
// a long string, in a line that is all UTF-8 and in one that is not, and
// holds JSONDate to what it must say and to its reading eight bytes at a
// time.
func TestJSONDate_StringsAcrossChunks(t *testing.T) {
	cases := []struct {
		mid  string
		want bool
	}{
		{`\"`, true}, {`\\`, true}, {`\\\"`, true}, {`\/\b\f\n\r\t`, true}, {`\u00e9`, true}, {`\ud800\udc00`, true}, {`\uDBFF`, true},
		{`\x`, false}, {`\u12`, false}, {`\u12g4`, false}, {`\`, false}, {"\x00", false},
		{`\n` + "\x00", false}, {"\x00" + `\"`, false}, {`\u00e9x\x`, false}, {`\\\u00e9` + "\x00", false}, // with escapes in the same chunk
		{"\t\x01\x1f", true}, {"é€😀", true}, {"\xed\xa0\x80", true}, {"\xc0\xaf", false}, {"\xf4\x90\x80\x80", false}, {"\xe2\x82", false},
		{`"`, false}, // the string ends early: what follows is no JSON
	}
	for _, c := range cases {
		// A UTF-8-encoded surrogate, which ujson takes, makes a line not all UTF-8.
		for _, other := range []string{"", "\xed\xa0\x80"} {
			for at := 0; at < 140; at++ {
				line := `{"a": "` + strings.Repeat("x", at) + c.mid + strings.Repeat("y", 140-at) + `", "b": "` + other + `"}` + "\n"
				date, ok := ooniuid.JSONDate([]byte(line))
				if ok != c.want {
					t.Errorf("%q at %d: ok %v, want %v", c.mid, at, ok, c.want)
				}
				if d, k := ooniuid.JSONDateBytewise([]byte(line)); d != date || k != ok {
					t.Errorf("%q at %d: %q %v, read eight bytes at a time %q %v", c.mid, at, date, ok, d, k)
				}
				if d, k := streamed(line, 7); d != date || k != ok {
					t.Errorf("%q at %d: %q %v, streamed %q %v", c.mid, at, date, ok, d, k)
				}
			}
		}
	}
	// A string the line ends in, at every length around the chunks.
	for n := 0; n < 140; n++ {
		line := `{"a": "` + strings.Repeat("x", n)
		if _, ok := ooniuid.JSONDate([]byte(line)); ok {
			t.Errorf("a line that ends inside a string of %d bytes reads", n)
		}
		if _, ok := ooniuid.JSONDate([]byte(line + `"}`)); !ok {
			t.Errorf("a string of %d plain bytes does not read", n)
		}
	}
	if !ooniuid.HasScan64 {
		t.Log("scan64 does not run here: both readings are the bytewise one")
	}
}

// TestJSONDate_Escapes puts every byte after a backslash, and runs of one
// to five backslashes before a quote, at every place across the first two
// 64-byte chunks of a string: ujson takes a byte of "\\/bfnrt" and a u
// with four hex digits, and an odd run escapes the quote.
func TestJSONDate_Escapes(t *testing.T) {
	check := func(line string, want bool) {
		t.Helper()
		date, ok := ooniuid.JSONDate([]byte(line))
		if ok != want {
			t.Fatalf("%q: ok %v, want %v", line, ok, want)
		}
		if d, k := ooniuid.JSONDateBytewise([]byte(line)); d != date || k != ok {
			t.Fatalf("%q: %q %v, read eight bytes at a time %q %v", line, date, ok, d, k)
		}
		if d, k := streamed(line, 5); d != date || k != ok {
			t.Fatalf("%q: %q %v, streamed %q %v", line, date, ok, d, k)
		}
	}
	for at := 50; at < 140; at++ {
		pad := strings.Repeat("x", at)
		for c := range 256 {
			want := strings.IndexByte(`"\/bfnrt`, byte(c)) >= 0
			if c == 'u' {
				check(`{"a": "`+pad+`\u00e9`+strings.Repeat("y", 80)+`"}`, true)
				check(`{"a": "`+pad+`\u0"`+strings.Repeat("y", 80)+`"}`, false)
				continue
			}
			check(`{"a": "`+pad+"\\"+string([]byte{byte(c)})+strings.Repeat("y", 80)+`"}`, want)
		}
		for n := 1; n <= 5; n++ {
			// An odd run escapes the quote: the string goes on to the next one.
			run := strings.Repeat("\\", n)
			check(`{"a": "`+pad+run+`"}`, n%2 == 0)
			check(`{"a": "`+pad+run+`"x"}`, n%2 == 1)
		}
	}
}

// streamed is what JSONStream says of line, given in pieces of n bytes.
func streamed(line string, n int) (string, bool) {
	var s ooniuid.JSONStream
	for len(line) > 0 {
		k := min(n, len(line))
		s.Add([]byte(line[:k]))
		line = line[k:]
	}
	date, ok, _ := s.Date()
	return date, ok
}

// A measurement_start_time longer than JSONStream reads is named as
// unread, not given a date; a later one that is short is read.
func TestJSONStream_LongDateValue(t *testing.T) {
	long := `{"measurement_start_time": "2017-06-01` + strings.Repeat(" ", ooniuid.MaxDateValue) + `10:11:12"`
	for _, c := range []struct {
		line   string
		date   string
		unread bool
	}{
		{long + "}", "", true},
		{long + `, "measurement_start_time": "2016-02-29 23:59:59"}`, "20160229", false},
		{long + `, "measurement_start_time": 7}`, ooniuid.NoDate, false},
	} {
		var s ooniuid.JSONStream
		for b := []byte(c.line); len(b) > 0; b = b[min(len(b), 4096):] {
			s.Add(b[:min(len(b), 4096)])
		}
		date, ok, unread := s.Date()
		if !ok || unread != c.unread || !unread && date != c.date {
			t.Errorf("%q…: %q %v unread %v, want %q unread %v", c.line[:40], date, ok, unread, c.date, c.unread)
		}
		if whole, _ := ooniuid.JSONDate([]byte(c.line)); !c.unread && whole != date {
			t.Errorf("%q…: whole %q, streamed %q", c.line[:40], whole, date)
		}
	}
}
