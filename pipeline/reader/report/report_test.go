package report

import (
	"bytes"
	"crypto/sha1"
	"hash/crc32"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
)

type readResult struct {
	st       Stats
	ms       []Measurement
	problems []deadletter.Record
	err      error
}

func readReport(t testing.TB, rr *Reader, r io.Reader, kind Kind) readResult {
	t.Helper()
	var res readResult
	rr.SHA1 = true
	res.st, res.err = rr.Read(r, kind, func(m Measurement) { res.ms = append(res.ms, m) },
		func(p deadletter.Record) { res.problems = append(res.problems, p) })
	return res
}

func reasons(ps []deadletter.Record) string {
	var rs []string
	for _, p := range ps {
		rs = append(rs, p.Reason)
	}
	return strings.Join(rs, ",")
}

func TestFalsy(t *testing.T) {
	for doc, want := range map[string]bool{
		"": true, "null": true, "~": true, "Null": true, "{}": true, "[]": true, "false": true,
		"False": true, "no": true, "off": true, "0": true, "0x0": true, "-0": true, "0.0": true,
		"''": true, `""`: true, "# only a comment": true,
		"true": false, "1": false, "a: 1": false, "[0]": false, "'no'": false, "x": false,
		"{a: [": false, // does not parse: a badblob, counted
	} {
		if got := falsy([]byte("---\n" + doc + "\n...\n")); got != want {
			t.Errorf("falsy(%q) = %v, want %v", doc, got, want)
		}
	}
}

// The real YAML samples hold one measurement each (realdata MANIFEST §1),
// and the stats hash the raw bytes as the canned index does.
func TestReportReader_RealYAML(t *testing.T) {
	rr := NewReader()
	for name, data := range realYAML(t) {
		res := readReport(t, rr, bytes.NewReader(data), KindYAML)
		if res.err != nil || res.st.N != 1 || len(res.ms) != 1 || len(res.problems) != 0 {
			t.Errorf("%s: n=%d %v problems %v", name, res.st.N, res.err, res.problems)
		}
		if res.st.SHA1 != sha1.Sum(data) || res.st.CRC32 != int32(crc32.ChecksumIEEE(data)) || res.st.Size != int64(len(data)) {
			t.Errorf("%s: hashes or size differ from the raw bytes", name)
		}
	}
}

func TestReportReader_Rules(t *testing.T) {
	yamlRep, _ := realYAML(t)["http_invalid_request_line.yaml"], 0
	header := yamlRep[:bytes.Index(yamlRep, []byte("\n...\n"))+5]
	body := yamlRep[len(header):]
	jsonRep, lines := realReport(t)
	badUTF8 := "{\"a\": \"\xed\xa0\x80\"}\n" // a lone surrogate
	for _, tc := range []struct {
		name    string
		data    string
		kind    Kind
		n       uint32
		reasons string
	}{
		{"yaml", string(yamlRep), KindYAML, 1, ""},
		{"yaml null documents skipped", string(header) + "---\nnull\n...\n" + string(body) + "---\n...\n" + string(body), KindYAML, 2, ""},
		{"yaml header only", string(header), KindYAML, 0, deadletter.EmptyReport},
		{"yaml bad header", "---\na: [\n...\n" + string(body), KindYAML, 0, deadletter.BadYAMLHeader},
		{"yaml scalar header", "---\nnull\n...\n" + string(body), KindYAML, 0, deadletter.BadYAMLHeader},
		{"yaml badblob counts", string(header) + "---\n{a: [\n...\n" + string(body), KindYAML, 2, ""},
		{"yaml truncated", string(header) + string(body) + string(body[:40]), KindYAML, 1, deadletter.TruncatedReport},
		{"yaml garbage", string(header) + string(body) + "garbage\n" + string(body), KindYAML, 1, deadletter.BrokenFrame},
		{"json", string(jsonRep), KindJSON, uint32(len(lines)), ""},
		{"json invalid utf-8 keeps its ID", string(jsonRep) + badUTF8 + "{}\n", KindJSON, uint32(len(lines)) + 2, deadletter.InvalidUTF8},
		{"json blank line", string(jsonRep) + "\n{}\n", KindJSON, uint32(len(lines)), deadletter.BrokenFrame},
		{"json empty", "", KindJSON, 0, deadletter.EmptyReport},
		{"unknown kind", "{}\n", KindUnknown, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := readReport(t, NewReader(), smallReader{strings.NewReader(tc.data), 7}, tc.kind)
			if res.err != nil {
				t.Fatal(res.err)
			}
			if res.st.N != tc.n || uint32(len(res.ms)) != tc.n || reasons(res.problems) != tc.reasons {
				t.Errorf("n=%d (%d blobs) problems %q; want n=%d problems %q", res.st.N, len(res.ms), reasons(res.problems), tc.n, tc.reasons)
			}
			for i, m := range res.ms {
				if m.Ndx != uint32(i) {
					t.Fatalf("measurement %d has ndx %d", i, m.Ndx)
				}
			}
			if res.st.Size != int64(len(tc.data)) || res.st.SHA1 != sha1.Sum([]byte(tc.data)) {
				t.Errorf("stats cover %d bytes of %d", res.st.Size, len(tc.data))
			}
		})
	}
}

// blobCheck agrees with utf8.Valid however the blob is cut into writes,
// and keeps the whole blob when it is no longer than keep, nothing else.
func TestBlobCheck_Boundaries(t *testing.T) {
	for _, s := range []string{"aé€𝄞z", "a\xed\xa0\x80", "\xf0\x9d\x84", "\xef\xbf\xbd", "ab\xff", "\xc3"} {
		for step := 1; step <= len(s); step++ {
			var c blobCheck
			keep := 4
			c.reset(keep)
			for i := 0; i < len(s); i += step {
				c.Write([]byte(s[i:min(i+step, len(s))]))
			}
			if c.valid() != utf8.ValidString(s) {
				t.Errorf("%q in writes of %d: valid %v", s, step, c.valid())
			}
			if want := s[:len(s)*btoi(len(s) <= keep)]; string(c.head) != want {
				t.Errorf("%q in writes of %d: kept %q, want %q", s, step, c.head, want)
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// lineOf streams one JSON line of n bytes without holding it.
type lineOf struct{ n, off int64 }

func (l *lineOf) Read(p []byte) (int, error) {
	if l.off >= l.n {
		return 0, io.EOF
	}
	k := int(min(int64(len(p)), l.n-l.off))
	for i := range p[:k] {
		switch pos := l.off + int64(i); pos {
		case 0:
			p[i] = '{'
		case l.n - 2:
			p[i] = '}'
		case l.n - 1:
			p[i] = '\n'
		default:
			p[i] = ' '
		}
	}
	l.off += int64(k)
	return k, nil
}

// A single measurement line of 1 GiB is counted, flagged oversized, and
// read in constant memory.
func TestReportReader_HugeLine(t *testing.T) {
	size := int64(1 << 30)
	if testutil.RaceEnabled || testing.Short() {
		size = 64 << 20
	}
	rr := NewReader()
	rr.MaxBlob = 16 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res := readReport(t, rr, &lineOf{n: size}, KindJSON)
	runtime.ReadMemStats(&after)
	if res.err != nil || res.st.N != 1 || reasons(res.problems) != deadletter.OversizedBlob || res.st.Size != size {
		t.Fatalf("n=%d size=%d problems %v err %v", res.st.N, res.st.Size, res.problems, res.err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("reading a %d-byte line allocated %d bytes", size, alloc)
	}
	// With UIDs it is hashed and checked as it streams, and gets its
	// uid; what it allocates is the growth of what it keeps of the line
	// before it streams (MaxBlob, by 1.25 at a time), not the line.
	rr = NewReader()
	rr.MaxBlob, rr.UIDs = 4<<20, true
	size = 32 << 20
	runtime.ReadMemStats(&before)
	res = readReport(t, rr, &lineOf{n: size}, KindJSON)
	runtime.ReadMemStats(&after)
	if res.err != nil || res.st.N != 1 || len(res.ms) != 1 || !strings.HasPrefix(res.ms[0].ID.UID, "0100000000") {
		t.Fatalf("with UIDs: n=%d problems %v err %v", res.st.N, res.problems, res.err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(6*rr.MaxBlob+4<<20) {
		t.Errorf("with UIDs, reading a %d-byte line allocated %d bytes", size, alloc)
	}
}

// With OrigSHA1 every measurement carries the autoclaved index's
// orig_sha1: the SHA-1 of the YAML header document and its own document,
// markers included and what lies between them left out, or of the JSON
// line without its "\n".
func TestReportReader_OrigSHA1(t *testing.T) {
	rr := NewReader()
	rr.OrigSHA1 = true
	for name, data := range realYAML(t) {
		s := string(data)
		hs := strings.Index(s, "---\n")
		he := hs + strings.Index(s[hs:], "\n...\n") + len("\n...\n")
		res := readReport(t, rr, bytes.NewReader(data), KindYAML)
		if len(res.ms) != 1 {
			t.Fatalf("%s: %d measurements", name, len(res.ms))
		}
		m := res.ms[0]
		if want := sha1.Sum([]byte(s[hs:he] + s[m.Offset:m.Offset+m.Size])); m.OrigSHA1 != want {
			t.Errorf("%s: orig_sha1 %x, want %x", name, m.OrigSHA1, want)
		}
	}
	for _, tc := range []struct {
		kind   Kind
		report string
		blobs  []string // what each orig_sha1 hashes
	}{
		{KindJSON, "{\"a\":1}\n{\"b\":\"\u00e9\"}\n{\"c\":[]}\n", []string{`{"a":1}`, "{\"b\":\"\u00e9\"}", `{"c":[]}`}},
		{KindYAML, "# banner\n---\nh: 1\n...\n# between\n---\na: 1\n...\n...\n---\nnull\n...\n---\nb: [2]\n...\n",
			[]string{"---\nh: 1\n...\n---\na: 1\n...\n", "---\nh: 1\n...\n---\nb: [2]\n...\n"}},
	} {
		res := readReport(t, rr, strings.NewReader(tc.report), tc.kind)
		if len(res.ms) != len(tc.blobs) {
			t.Fatalf("%s: %d measurements, want %d", tc.kind, len(res.ms), len(tc.blobs))
		}
		for i, m := range res.ms {
			if want := sha1.Sum([]byte(tc.blobs[i])); m.OrigSHA1 != want {
				t.Errorf("%s #%d: orig_sha1 %x, want the SHA-1 of %q", tc.kind, i, m.OrigSHA1, tc.blobs[i])
			}
		}
	}
}

// With UIDs, a JSON line longer than MaxBlob (streamed, not kept) gets
// the uid it gets when kept whole: its date read as it streams, escapes,
// a date past the first pieces and a last measurement_start_time that
// wins included; a line ujson refuses gets none; and its oversized record
// says which.
func TestReportReader_StreamedLineUID(t *testing.T) {
	pad := strings.Repeat(`<p class=\"x\">\u00e9t\u00e9 \ud83d\ude00</p>\n`, 400)
	lines := []string{
		`{"measurement_start_time": "2017-06-01 10:11:12", "body": "` + pad + `"}`,
		`{"body": "` + pad + `", "measurement\u005fstart_time": "2016-02-29 23:59:59"}`,
		`{"measurement_start_time": "2017-06-01 10:11:12", "body": "` + pad + `", "measurement_start_time": null}`,
		`{"measurement_start_time": "\ud835\udfd0017-06-01 10:11:12", "body": "` + pad + `"}`,
		`{"body": "` + pad + `", "n": [1, -.5, 2e5, NaN, -Infinity, true]}`,
		`{"body": "` + pad + `", "n": 01.e}`, // ujson refuses the exponent
		`{"short": 1, "measurement_start_time": "2017-06-01 10:11:12"}`,
	}
	data := []byte(strings.Join(lines, "\n") + "\n")
	uids := func(maxBlob int64) ([]string, []deadletter.Record) {
		rr := NewReader()
		rr.UIDs, rr.MaxBlob = true, maxBlob
		res := readReport(t, rr, bytes.NewReader(data), KindJSON)
		testutil.Check(t, res.err)
		var out []string
		for _, m := range res.ms {
			out = append(out, m.ID.UID)
		}
		return out, res.problems
	}
	whole, _ := uids(1 << 20)
	streamed, problems := uids(1000)
	if len(whole) != len(lines) || whole[len(lines)-2] != "" || whole[0] == "" {
		t.Fatalf("held whole, the uids are %q", whole)
	}
	if !slices.Equal(streamed, whole) {
		t.Errorf("streamed, the uids are\n%q\nheld whole\n%q", streamed, whole)
	}
	var said []string
	for _, p := range problems {
		said = append(said, p.Message)
	}
	if len(problems) != len(lines)-1 || !strings.Contains(said[0], "its uid was read as it streamed") || !strings.Contains(said[5], "ujson refuses it") {
		t.Errorf("the oversized records say %q", said)
	}
}
