package ooid

import (
	"bufio"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

const testdata = "../../testdata/"

func readTSV(t testing.TB, name string) [][]string {
	t.Helper()
	f, err := os.Open(testdata + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows [][]string
	sc := bufio.NewScanner(f)
	for first := true; sc.Scan(); first = false {
		if first && strings.Contains(name, ".tsv") {
			continue // header
		}
		if sc.Text() != "" {
			rows = append(rows, strings.Split(sc.Text(), "\t"))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no rows", name)
	}
	return rows
}

// TestVectors checks the ooni-uuid test vectors.
func TestVectors(t *testing.T) {
	for _, row := range readTSV(t, "ooid_test_vectors.tsv") {
		name, ndx, wantTS, wantID := row[0], row[1], row[2], row[3]
		r, err := DefaultScheme.Report(name)
		if err != nil {
			t.Fatalf("Report(%q): %v", name, err)
		}
		if got := strconv.FormatUint(uint64(r.TS), 10); got != wantTS {
			t.Errorf("ts(%q) = %s, want %s", name, got, wantTS)
		}
		if wantID == "" {
			continue
		}
		n, err := strconv.ParseUint(ndx, 10, 32)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.ID(uint32(n)).String(); got != wantID {
			t.Errorf("ooid(%q, %d) = %s, want %s", name, n, got, wantID)
		}
	}
}

// TestRealTextnames parses every real textname and checks ts, its source
// and ooid(0) against the values computed with the ooni-uuid code.
func TestRealTextnames(t *testing.T) {
	want := map[string][]string{}
	for _, row := range readTSV(t, "textnames_sources.tsv") {
		want[row[0]] = row
	}
	checked := 0
	for _, file := range []string{"textnames.txt", "textnames_lowconf.txt"} {
		for _, row := range readTSV(t, file) {
			name := row[0]
			r, err := DefaultScheme.Report(name)
			if err != nil {
				t.Errorf("Report(%q): %v", name, err)
				continue
			}
			if r.Source == SourceFallback {
				t.Errorf("Report(%q).Source = %v, want the strict grammar", name, r.Source)
			}
			w, ok := want[name]
			if !ok || w[2] == "" {
				continue
			}
			checked++
			if got := strconv.FormatUint(uint64(r.TS), 10); got != w[2] {
				t.Errorf("ts(%q) = %s, want %s", name, got, w[2])
			}
			if got := r.Source.String(); got != w[3] {
				t.Errorf("source(%q) = %s, want %s", name, got, w[3])
			}
			if got := r.ID(0).String(); got != w[4] {
				t.Errorf("ooid(%q, 0) = %s, want %s", name, got, w[4])
			}
			if b := r.Bucket.String(); b != name[:10] {
				t.Errorf("bucket(%q) = %s", name, b)
			}
		}
	}
	if checked < 100 {
		t.Errorf("checked %d textnames against textnames_sources.tsv, want at least 100", checked)
	}
}

// TestBasenamesRejected: a basename without its bucket is not a textname.
func TestBasenamesRejected(t *testing.T) {
	for _, row := range readTSV(t, "textnames_sources.tsv") {
		if row[1] != "basename-only" {
			continue
		}
		if _, err := ParseTextname(row[0]); !errors.Is(err, ErrTextname) {
			t.Errorf("ParseTextname(%q) = %v, want ErrTextname", row[0], err)
		}
	}
}

const (
	goodNoRID = "2012-12-05/20121205T071421Z-MM-AS18399-http_invalid_request_line-no_report_id-0.1.0-probe.yaml"
	goodTimed = "2017-11-14/20031106T094115Z-IQ-AS50710-ndt-20171113T151305Z_AS50710_beuliHbl2zzV3F05or7NIt4ynhZFUCCOjKf1okz1zTov3lvLJU-0.2.0-probe.json"
	rid50     = "beuliHbl2zzV3F05or7NIt4ynhZFUCCOjKf1okz1zTov3lvLJU"
	rid64     = "yZthLDkKNe6IdePf7B1gMgNvRxSMDwNGWD6BB1MWcuY2T3q7oLmDQkjhZARARuic"
)

func TestParseTextname_Rejects(t *testing.T) {
	for _, tc := range []struct {
		name, textname, reason string
	}{
		{"empty", "", "empty"},
		{"wrong ASN in report_id", "2017-11-14/20171113T151300Z-IQ-AS50710-ndt-20171113T151305Z_AS50711_" + rid50 + "-0.2.0-probe.json", "report_id ASN AS50711 does not match filename ASN AS50710"},
		{"wrong ASN, fallback grammar", "2017-11-14/20171113T151300Z-IQ-AS50710-ndt-20171113T151305Z_AS1_" + rid50 + "-0.3.0-probe.json", "does not match filename ASN"},
		{"ASN leading zero", "2017-11-14/20171113T151300Z-IQ-AS50710-ndt-20171113T151305Z_AS050710_" + rid50 + "-0.2.0-probe.json", "does not match"},
		{"filename month 13", "2012-12-05/20121305T071421Z-MM-AS18399-tcp_connect-no_report_id-0.1.0-probe.yaml", "month 13"},
		{"filename month 00", "2012-12-05/20120005T071421Z-MM-AS18399-tcp_connect-no_report_id-0.1.0-probe.yaml", "month 0"},
		{"31 April", "2012-12-05/20120431T071421Z-MM-AS18399-tcp_connect-no_report_id-0.1.0-probe.yaml", "day 31 out of range for 2012-04"},
		{"29 Feb 2013", "2013-03-01/20130229T071421Z-MM-AS18399-tcp_connect-no_report_id-0.1.0-probe.yaml", "day 29"},
		{"day 00", "2012-12-05/20121200T071421Z-MM-AS18399-tcp_connect-no_report_id-0.1.0-probe.yaml", "day 0"},
		{"hour 24", "2012-12-05/20121205T241421Z-MM-AS18399-tcp_connect-no_report_id-0.1.0-probe.yaml", "hour 24"},
		{"report_id month 13", "2017-11-14/20171113T151300Z-IQ-AS50710-ndt-20171313T151305Z_AS50710_" + rid50 + "-0.2.0-probe.json", "report_id timestamp 20171313T151305Z: month 13"},
		{"bucket 31 April", "2012-04-31/20120430T071421Z-MM-AS18399-tcp_connect-no_report_id-0.1.0-probe.yaml", "bucket date: day 31"},
		{"bucket month 13", "2012-13-01/20121205T071421Z-MM-AS18399-tcp_connect-no_report_id-0.1.0-probe.yaml", "bucket date: month 13"},
		{"no bucket", "20121205T071421Z-MM-AS18399-tcp_connect-no_report_id-0.1.0-probe.yaml", "the bucket prefix YYYY-MM-DD/ is missing"},
		{"missing test name", "2012-12-05/20121205T071421Z-MM-AS18399-no_report_id-0.1.0-probe.yaml", "fields"},
		{"empty test name", "2012-12-05/20121205T071421Z-MM-AS18399--no_report_id-0.1.0-probe.yaml", "empty test name"},
		{"missing version", "2012-12-05/20121205T071421Z-MM-AS18399-tcp_connect-no_report_id-probe.yaml", "fields"},
		{"extra field", "2012-12-05/20121205T071421Z-MM-AS18399-tcp-connect-no_report_id-0.1.0-probe.yaml", "more than 9"},
		{"backend", "2012-12-05/20121205T071421Z-MM-AS18399-tcp_connect-no_report_id-0.1.0-backend.yaml", "-probe.yaml"},
		{"extension", "2012-12-05/20121205T071421Z-MM-AS18399-tcp_connect-no_report_id-0.1.0-probe.yamloo", "-probe.yaml"},
		{"lower-case country", "2012-12-05/20121205T071421Z-mm-AS18399-tcp_connect-no_report_id-0.1.0-probe.yaml", "country code"},
		{"ASN without digits", "2012-12-05/20121205T071421Z-MM-AS-tcp_connect-no_report_id-0.1.0-probe.yaml", "ASN"},
		{"version letters", "2012-12-05/20121205T071421Z-MM-AS1-tcp_connect-no_report_id-v1-probe.yaml", "version"},
		{"short stamp", "2012-12-05/20121205T07142Z-MM-AS1-tcp_connect-no_report_id-0.1.0-probe.yaml", "bucket date"},
		{"non-ASCII", "2012-12-05/20121205T071421Z-MM-AS18399-tcp_connéct-no_report_id-0.1.0-probe.yaml", "not printable ASCII"},
		{"space", "2012-12-05/20121205T071421Z-MM-AS18399-tcp connect-no_report_id-0.1.0-probe.yaml", "not printable ASCII"},
		{"NUL", "2012-12-05/20121205T071421Z-MM-AS18399-tcp\x00connect-no_report_id-0.1.0-probe.yaml", "not printable ASCII"},
		{"pre-1970 fallback", "2012-12-05/19601205T071421Z-MM-AS18399-tcp_connect-no_report_id-0.1.0-probe.yaml", "32-bit"},
		{"after 2106 fallback", "2012-12-05/21070101T000000Z-MM-AS18399-tcp_connect-no_report_id-0.1.0-probe.yaml", "32-bit"},
		{"10 kB garbage", strings.Repeat("x-", 5000), "bytes long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTextname(tc.textname)
			var te *TextnameError
			if !errors.As(err, &te) || !errors.Is(err, ErrTextname) {
				t.Fatalf("ParseTextname(%q) = %v, want a *TextnameError", tc.textname, err)
			}
			if !strings.Contains(te.Reason, tc.reason) {
				t.Errorf("ParseTextname(%q) reason = %q, want it to contain %q", tc.textname, te.Reason, tc.reason)
			}
			if _, _, err := refParse(tc.textname); err == nil {
				t.Errorf("reference accepts %q", tc.textname)
			}
		})
	}
}

func TestParseTextname_Accepts(t *testing.T) {
	for _, tc := range []struct {
		name, textname string
		ts             uint32
		source         Source
	}{
		{"no_report_id", goodNoRID, 1354691661, SourceFilename},
		{"report_id wins", goodTimed, 1510585985, SourceReportID},
		{"64-char report_id", "2016-02-11/20160210T163242Z-IR-AS201227-http_requests-" + rid64 + "-0.1.0-probe.yaml", 1455121962, SourceFilename},
		{"29 Feb 2016", "2016-03-01/20160229T000000Z-IR-AS1-http_requests-" + rid64 + "-0.1.0-probe.yaml", 1456704000, SourceFilename},
		{"2039 filename ts", "2039-01-01/20390101T000000Z-IR-AS1-web_connectivity-no_report_id-0.2.0-probe.json", 2177452800, SourceFilename},
		// Outside the strict grammar, inside the canning one.
		{"version 0.3.0", "2020-10-21/20201021T141726Z-US-AS20093-web_connectivity-no_report_id-0.3.0-probe.json", 1603289846, SourceFallback},
		{"post-2020 report_id", "2021-01-24/20210124T210009Z-VE-AS22313-web_connectivity-20210124T210009Z_webconnectivity_VE_22313_n1_AbCdEf-0.2.0-probe.json", 1611522009, SourceFallback},
		{"year 2003 filename, short id", "2017-11-14/20031106T094115Z-IQ-AS50710-ndt-shortid-0.2.0-probe.json", 1068111675, SourceFallback},
		{"1999 filename", "2017-11-14/19991231T235959Z-IQ-AS50710-ndt-no_report_id-0.1.0-probe.json", 946684799, SourceFallback},
		{"11-digit ASN", "2017-11-14/20171113T151300Z-IQ-AS12345678901-ndt-no_report_id-0.1.0-probe.json", 1510585980, SourceFallback},
		{"63-char report_id", "2016-02-11/20160210T163242Z-IR-AS201227-http_requests-" + rid64[1:] + "-0.1.0-probe.yaml", 1455121962, SourceFallback},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseTextname(tc.textname)
			if err != nil {
				t.Fatalf("ParseTextname(%q): %v", tc.textname, err)
			}
			if got.TS != tc.ts || got.Source != tc.source {
				t.Errorf("ParseTextname(%q) = %d %v, want %d %v", tc.textname, got.TS, got.Source, tc.ts, tc.source)
			}
			ts, src, err := refParse(tc.textname)
			if err != nil || ts != got.TS || src != got.Source {
				t.Errorf("reference = %d %v %v", ts, src, err)
			}
		})
	}
}

func TestScheme_Validate(t *testing.T) {
	for _, s := range []Scheme{{CounterBits: 19, SHA1Offset: 33}, {CounterBits: 29, SHA1Offset: 33}, {CounterBits: 28, SHA1Offset: -1}, {CounterBits: 28, SHA1Offset: 34}, {}} {
		if err := s.Validate(); !errors.Is(err, ErrRange) {
			t.Errorf("%+v.Validate() = %v, want ErrRange", s, err)
		}
		if _, err := s.Report(goodNoRID); err == nil {
			t.Errorf("%+v.Report succeeded", s)
		}
	}
	for bits := MinCounterBits; bits <= MaxCounterBits; bits++ {
		for off := 0; off <= MaxSHA1Offset; off++ {
			s := Scheme{CounterBits: bits, SHA1Offset: off}
			if err := s.Validate(); err != nil {
				t.Fatalf("%+v: %v", s, err)
			}
			r, err := s.Report(goodTimed)
			if err != nil {
				t.Fatal(err)
			}
			for _, ndx := range []uint32{0, 1, 1000003, 1<<uint(bits) - 1, 1 << uint(bits)} {
				want, _ := refOOID(goodTimed, uint64(ndx), s)
				if got := r.ID(ndx); got != want {
					t.Errorf("%+v ID(%d) = %v, want %v", s, ndx, got, want)
				}
			}
		}
	}
}

func TestReport_Wraps(t *testing.T) {
	// Find a report whose base is near the top of the counter space, by
	// trying offsets: the counter must wrap within its bits and never touch
	// the 0xF nibble.
	for off := 0; off <= MaxSHA1Offset; off++ {
		s := Scheme{CounterBits: 20, SHA1Offset: off}
		r, err := s.Report(goodNoRID)
		if err != nil {
			t.Fatal(err)
		}
		top := s.Mask() - r.CounterBase() // ndx that gives the largest counter
		if got := r.ID(top).Decode().Counter; got != s.Mask() {
			t.Fatalf("counter at top = %#x, want %#x", got, s.Mask())
		}
		next := r.ID(top + 1)
		if d := next.Decode(); d.Counter != 0 || d.Namespace != Backfilled || d.Unix != r.TS {
			t.Fatalf("after wrap: %+v", d)
		}
	}
}

func TestReportBytes_NoAllocs(t *testing.T) {
	name := []byte(goodTimed)
	var sink ID
	allocs := testing.AllocsPerRun(100, func() {
		r, err := DefaultScheme.ReportBytes(name)
		if err != nil {
			t.Fatal(err)
		}
		sink ^= r.ID(7)
	})
	if allocs != 0 {
		t.Errorf("ReportBytes + ID: %v allocations, want 0", allocs)
	}
	_ = sink
}

func TestID_TextForms(t *testing.T) {
	for _, tc := range []struct {
		id  ID
		hex string
		i64 int64
	}{
		{0, "0000000000000000", 0},
		{0x50bef44df29c69e2, "50bef44df29c69e2", 0x50bef44df29c69e2},
		{0x82c8e700f0000000, "82c8e700f0000000", -0x7d3718ff10000000},
		{^ID(0), "ffffffffffffffff", -1},
	} {
		if got := tc.id.String(); got != tc.hex {
			t.Errorf("String() = %s, want %s", got, tc.hex)
		}
		if got := tc.id.Int64(); got != tc.i64 {
			t.Errorf("%s.Int64() = %d, want %d", tc.hex, got, tc.i64)
		}
		if got := FromInt64(tc.i64); got != tc.id {
			t.Errorf("FromInt64(%d) = %s", tc.i64, got)
		}
		for _, in := range []string{tc.hex, strings.ToUpper(tc.hex)} {
			if got, err := Parse(in); err != nil || got != tc.id {
				t.Errorf("Parse(%q) = %v, %v", in, got, err)
			}
		}
	}
	for _, bad := range []string{"", "50bef44df29c69e", "50bef44df29c69e2a", "50bef44df29c69eg", "0x50bef44df29c69", " 50bef44df29c69e", "-1"} {
		if _, err := Parse(bad); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %v, want ErrSyntax", bad, err)
		}
	}
}

func TestID_2039RoundTrip(t *testing.T) {
	r, err := DefaultScheme.Report("2039-01-01/20390101T000000Z-IR-AS1-web_connectivity-no_report_id-0.2.0-probe.json")
	if err != nil {
		t.Fatal(err)
	}
	id := r.ID(5)
	if id.Int64() >= 0 {
		t.Fatalf("%s.Int64() = %d, want negative for a ts >= 2^31", id, id.Int64())
	}
	if back := FromInt64(id.Int64()); back != id || back.Decode().Unix != 2177452800 {
		t.Errorf("round trip %s -> %d -> %s", id, id.Int64(), back)
	}
}

func TestCollectorID(t *testing.T) {
	id, err := NewCollectorID(1612822030, 0x2a, 0xabcdef)
	if err != nil {
		t.Fatal(err)
	}
	if id.String() != "6021b60e2aabcdef" {
		t.Errorf("NewCollectorID = %s", id)
	}
	d := id.Decode()
	if d.Namespace != Collector || d.CollectorID != 0x2a || d.Counter != 0xabcdef || d.Unix != 1612822030 {
		t.Errorf("Decode = %+v", d)
	}
	if _, err := NewCollectorID(1, 0xF0, 0); !errors.Is(err, ErrRange) {
		t.Errorf("collector 0xF0: %v, want ErrRange", err)
	}
	if _, err := NewCollectorID(1, 0xEF, 1<<24); !errors.Is(err, ErrRange) {
		t.Errorf("counter 2^24: %v, want ErrRange", err)
	}
	if id, err := NewCollectorID(1, 0xEF, 1<<24-1); err != nil || id.Decode().Namespace != Collector {
		t.Errorf("max collector: %v %v", id, err)
	}
}

func TestWindow(t *testing.T) {
	for _, name := range []string{goodNoRID, goodTimed, "", "x"} {
		sum := sha1.Sum([]byte(name))
		hexdigest := hex.EncodeToString(sum[:])
		for off := 0; off <= MaxSHA1Offset; off++ {
			want, err := strconv.ParseUint(hexdigest[off:off+7], 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			if got := Window(&sum, off); uint64(got) != want {
				t.Errorf("Window(sha1(%q), %d) = %#x, want %#x", name, off, got, want)
			}
		}
	}
}

// Date.String writes what fmt's %04d-%02d-%02d writes, for any date.
func TestDateString(t *testing.T) {
	for _, d := range []Date{{2017, 6, 1}, {0, 0, 0}, {9999, 99, 99}, {10000, 1, 1}, {2012, 100, 5}, {2012, 12, 255}, {65535, 255, 255}, {5, 7, 9}} {
		if got, want := d.String(), fmt.Sprintf("%04d-%02d-%02d", d.Year, d.Month, d.Day); got != want {
			t.Errorf("%+v: %q, want %q", d, got, want)
		}
	}
	for y := 0; y < 10100; y += 7 {
		d := Date{Year: uint16(y), Month: uint8(y % 256), Day: uint8(y / 7 % 256)}
		if got, want := d.String(), fmt.Sprintf("%04d-%02d-%02d", d.Year, d.Month, d.Day); got != want {
			t.Fatalf("%+v: %q, want %q", d, got, want)
		}
	}
}
