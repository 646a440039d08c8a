package ooid

import (
	"errors"
	"fmt"
	"strings"
)

// Source tells which part of a textname gave its ts.
type Source uint8

const (
	// SourceReportID: the textname matches the ooni-uuid grammar and its
	// report_id carries a timestamp, which wins.
	SourceReportID Source = iota + 1
	// SourceFilename: the textname matches the ooni-uuid grammar and its
	// report_id carries no timestamp; the filename timestamp is used.
	SourceFilename
	// SourceFallback: the textname fails the ooni-uuid grammar but
	// matches the canning grammar; the filename timestamp is used and the
	// report is counted as a fallback.
	SourceFallback
)

// String returns the name used in outputs: "report_id", "filename" or
// "filename_fallback".
func (s Source) String() string {
	switch s {
	case SourceReportID:
		return "report_id"
	case SourceFilename:
		return "filename"
	case SourceFallback:
		return "filename_fallback"
	}
	return fmt.Sprintf("Source(%d)", uint8(s))
}

// MaxTextnameLen bounds the textnames ParseTextname accepts. Real textnames
// are under 200 bytes.
const MaxTextnameLen = 512

// ErrTextname is wrapped by every textname parse error.
var ErrTextname = errors.New("bad textname")

// TextnameError says why a textname was rejected.
type TextnameError struct {
	Textname string // clipped to 120 bytes
	Reason   string
}

func (e *TextnameError) Error() string {
	return fmt.Sprintf("textname %q: %s", e.Textname, e.Reason)
}

// Unwrap returns [ErrTextname].
func (e *TextnameError) Unwrap() error { return ErrTextname }

// Date is a calendar date.
type Date struct {
	Year  uint16
	Month uint8
	Day   uint8
}

// String returns the date as YYYY-MM-DD.
func (d Date) String() string {
	if d.Year > 9999 || d.Month > 99 || d.Day > 99 {
		return fmt.Sprintf("%04d-%02d-%02d", d.Year, d.Month, d.Day)
	}
	b := [10]byte{'0' + byte(d.Year/1000), '0' + byte(d.Year/100%10), '0' + byte(d.Year/10%10), '0' + byte(d.Year%10), '-',
		'0' + d.Month/10, '0' + d.Month%10, '-', '0' + d.Day/10, '0' + d.Day%10}
	return string(b[:])
}

// Textname is what ParseTextname learns from a textname.
type Textname struct {
	// TS is the report time: seconds since the Unix epoch, UTC.
	TS uint32
	// Source tells where TS came from.
	Source Source
	// Bucket is the date of the bucket folder (never used for TS).
	Bucket Date
}

// ParseTextname parses "YYYY-MM-DD/<basename>" to its ts.
//
// The grammar is ooni-uuid's regular expression:
//
//	20YY-MM-DD/20YYmmddTHHMMSSZ-CC-AS<asn>-<test_name>-<report_id>-0.[12].0-probe.(yaml|json)
//
// with report_id one of "no_report_id", 64 letters and digits, or
// "20YYmmddTHHMMSSZ_AS<asn>_" followed by 50 letters and digits, where that
// asn must equal the filename's. A report_id timestamp wins over the filename
// timestamp.
//
// A textname that fails that grammar but whose basename matches the canning
// grammar (any 4-digit year, any report_id without '-', any [.0-9]+
// version, any number of ASN digits) gets the filename timestamp and
// [SourceFallback].
//
// Everything else is rejected with a [*TextnameError]: bytes outside
// printable ASCII, missing or extra fields, impossible calendar values
// (month 13, 31 April, hour 24; in the bucket date, the filename or the
// report_id), a time outside the 32-bit unsigned range, and a timestamped
// report_id whose ASN differs from the filename's (its time would win, so
// falling back to the filename time would be a guess).
func ParseTextname(textname string) (Textname, error) { return parseTextname(textname) }

// ParseTextnameBytes is ParseTextname for a byte slice; it does not allocate
// unless it fails.
func ParseTextnameBytes(textname []byte) (Textname, error) { return parseTextname(textname) }

type text interface{ ~string | ~[]byte }

func textnameErr[T text](s T, format string, args ...any) error {
	name := string(s)
	if len(name) > 120 {
		name = name[:120] + "..."
	}
	return &TextnameError{Textname: name, Reason: fmt.Sprintf(format, args...)}
}

// Field layout of a textname split at '-': the bucket date contributes
// two dashes, the basename six.
const (
	fBucketYear = iota // YYYY
	fBucketMon         // MM
	fDayStamp          // DD/YYYYmmddTHHMMSSZ
	fCC                // CC
	fASN               // AS<digits>
	fTest              // test_name
	fReportID          // report_id
	fVersion           // 0.1.0
	fProbe             // probe.yaml
	numFields
)

const fieldsHelp = "YYYY-MM-DD/YYYYmmddTHHMMSSZ-CC-AS<asn>-<test_name>-<report_id>-<version>-probe.<yaml|json>"

func parseTextname[T text](s T) (Textname, error) {
	if len(s) == 0 {
		return Textname{}, textnameErr(s, "empty")
	}
	if len(s) > MaxTextnameLen {
		return Textname{}, textnameErr(s, "%d bytes long, more than %d", len(s), MaxTextnameLen)
	}
	// Split at '-' and check the bytes in one pass.
	var start [numFields + 1]int
	n := 1
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e {
			return Textname{}, textnameErr(s, "byte %#02x at offset %d is not printable ASCII", c, i)
		}
		if c == '-' {
			if n == numFields {
				return Textname{}, textnameErr(s, "more than %d '-'-separated fields; want %s", numFields, fieldsHelp)
			}
			start[n] = i + 1
			n++
		}
	}
	if n == numFields-2 && !strings.Contains(string(s), "/") {
		return Textname{}, textnameErr(s, "the bucket prefix YYYY-MM-DD/ is missing: a textname starts with the date of its bucket (the day it was uploaded, as the bucket's index names it), then the report's file name: %s", fieldsHelp)
	}
	if n != numFields {
		return Textname{}, textnameErr(s, "%d '-'-separated fields, want %d: %s", n, numFields, fieldsHelp)
	}
	start[numFields] = len(s) + 1
	field := func(i int) T { return s[start[i] : start[i+1]-1] }

	// Parts both grammars share, checked with the looser (canning) rules.
	by, bm, ds := field(fBucketYear), field(fBucketMon), field(fDayStamp)
	if len(by) != 4 || len(bm) != 2 || len(ds) != 19 || ds[2] != '/' ||
		!digits(by) || !digits(bm) || !digits(ds[:2]) {
		return Textname{}, textnameErr(s, "does not start with a bucket date YYYY-MM-DD/")
	}
	if by[0] != '2' || by[1] != '0' || !in(bm[0], '0', '1') || !in(ds[0], '0', '3') {
		return Textname{}, textnameErr(s, "bucket date %s-%s-%s outside 20YY-[01]M-[0-3]D", by, bm, ds[:2])
	}
	bucket := Date{Year: uint16(atoi(by)), Month: uint8(atoi(bm)), Day: uint8(atoi(ds[:2]))}
	if reason := bucket.invalid(); reason != "" {
		return Textname{}, textnameErr(s, "bucket date: %s", reason)
	}
	stamp := ds[3:]
	if !looseStamp(stamp) {
		return Textname{}, textnameErr(s, "filename timestamp %q is not YYYYmmddTHHMMSSZ", stamp)
	}
	cc := field(fCC)
	if len(cc) != 2 || !upper(cc[0]) || !upper(cc[1]) {
		return Textname{}, textnameErr(s, "country code %q is not two capital letters", cc)
	}
	as := field(fASN)
	if len(as) < 3 || as[0] != 'A' || as[1] != 'S' || !digits(as[2:]) {
		return Textname{}, textnameErr(s, "ASN %q is not AS<digits>", as)
	}
	if len(field(fTest)) == 0 {
		return Textname{}, textnameErr(s, "empty test name")
	}
	rid := field(fReportID)
	if len(rid) == 0 {
		return Textname{}, textnameErr(s, "empty report_id")
	}
	ver := field(fVersion)
	if len(ver) == 0 || !versionChars(ver) {
		return Textname{}, textnameErr(s, "data format version %q is not [.0-9]+", ver)
	}
	if p := field(fProbe); string(p) != "probe.yaml" && string(p) != "probe.json" {
		return Textname{}, textnameErr(s, "does not end in -probe.yaml or -probe.json")
	}

	// The report_id timestamp form, when present, must name the filename's ASN.
	ridStamp, ridASN, timed := timedReportID(rid)
	if timed && string(ridASN) != string(as[2:]) {
		return Textname{}, textnameErr(s, "report_id ASN AS%s does not match filename ASN %s", ridASN, as)
	}

	t := Textname{Bucket: bucket}
	strict := strictStamp(stamp) &&
		len(as)-2 <= 10 &&
		(string(ver) == "0.1.0" || string(ver) == "0.2.0") &&
		(timed || string(rid) == "no_report_id" || (len(rid) == 64 && alnum(rid)))
	fileTS, err := stampTime(s, "filename timestamp", stamp)
	if err != nil {
		return Textname{}, err
	}
	switch {
	case strict && timed:
		ts, err := stampTime(s, "report_id timestamp", ridStamp)
		if err != nil {
			return Textname{}, err
		}
		t.TS, t.Source = ts, SourceReportID
	case strict:
		t.TS, t.Source = fileTS, SourceFilename
	default:
		t.TS, t.Source = fileTS, SourceFallback
	}
	return t, nil
}

// timedReportID reports whether rid is
// 20YYmmddTHHMMSSZ_AS<1-10 digits>_<50 alnum> and returns its timestamp and
// ASN digits.
func timedReportID[T text](rid T) (stamp, asn T, ok bool) {
	const stampLen, tailLen = 16, 50
	if len(rid) < stampLen+len("_AS0_")+tailLen {
		return stamp, asn, false
	}
	stamp = rid[:stampLen]
	if !strictStamp(stamp) ||
		rid[stampLen] != '_' || rid[stampLen+1] != 'A' || rid[stampLen+2] != 'S' {
		return stamp, asn, false
	}
	asnEnd := len(rid) - tailLen - 1
	asn = rid[stampLen+3 : asnEnd]
	if len(asn) < 1 || len(asn) > 10 || !digits(asn) || rid[asnEnd] != '_' || !alnum(rid[asnEnd+1:]) {
		return stamp, asn, false
	}
	return stamp, asn, true
}

// looseStamp checks the canning grammar \d{4}[0-1]\d[0-3]\dT[0-2]\d[0-5]\d[0-5]\dZ.
func looseStamp[T text](st T) bool {
	return len(st) == 16 && digits(st[0:8]) && st[8] == 'T' && digits(st[9:15]) && st[15] == 'Z' &&
		in(st[4], '0', '1') && in(st[6], '0', '3') && in(st[9], '0', '2') &&
		in(st[11], '0', '5') && in(st[13], '0', '5')
}

// strictStamp checks the ooni-uuid grammar: the canning grammar in the
// 21st century.
func strictStamp[T text](st T) bool { return looseStamp(st) && st[0] == '2' && st[1] == '0' }

// stampTime converts a grammar-checked YYYYmmddTHHMMSSZ to Unix seconds,
// rejecting impossible calendar values and times outside uint32.
func stampTime[T text, U text](s T, what string, st U) (uint32, error) {
	d := Date{Year: uint16(atoi(st[0:4])), Month: uint8(atoi(st[4:6])), Day: uint8(atoi(st[6:8]))}
	if reason := d.invalid(); reason != "" {
		return 0, textnameErr(s, "%s %s: %s", what, st, reason)
	}
	hh, mm, ss := atoi(st[9:11]), atoi(st[11:13]), atoi(st[13:15])
	if hh > 23 {
		return 0, textnameErr(s, "%s %s: hour %d out of range", what, st, hh)
	}
	// mm and ss are at most 59 by the grammar.
	secs := d.unixDays()*86400 + int64(hh*3600+mm*60+ss)
	if secs < 0 || secs > 1<<32-1 {
		return 0, textnameErr(s, "%s %s: outside the 32-bit unsigned Unix time range", what, st)
	}
	return uint32(secs), nil
}

// invalid returns why d is not a calendar date, or "".
func (d Date) invalid() string {
	if d.Month < 1 || d.Month > 12 {
		return fmt.Sprintf("month %d out of range", d.Month)
	}
	if d.Day < 1 || d.Day > daysIn(int(d.Year), int(d.Month)) {
		return fmt.Sprintf("day %d out of range for %04d-%02d", d.Day, d.Year, d.Month)
	}
	return ""
}

func daysIn(year, month int) uint8 {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// unixDays returns the days since 1970-01-01 of a valid proleptic Gregorian
// date (the days-from-civil algorithm).
func (d Date) unixDays() int64 {
	y, m, day := int64(d.Year), int64(d.Month), int64(d.Day)
	if m <= 2 {
		y--
	}
	era := y // floor(y / 400); y is at least -1
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + day - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

func in(c, lo, hi byte) bool { return lo <= c && c <= hi }
func upper(c byte) bool      { return 'A' <= c && c <= 'Z' }

func digits[T text](s T) bool {
	for i := 0; i < len(s); i++ {
		if !in(s[i], '0', '9') {
			return false
		}
	}
	return len(s) > 0
}

// alnumByte says which bytes are ASCII letters or digits: a report_id
// is checked a byte a lookup (the full-scale audit parses 3.6 M of them).
var alnumByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = in(byte(c), '0', '9') || in(byte(c), 'a', 'z') || upper(byte(c))
	}
	return t
}()

func alnum[T text](s T) bool {
	for i := 0; i < len(s); i++ {
		if !alnumByte[s[i]] {
			return false
		}
	}
	return true
}

func versionChars[T text](s T) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '.' && !in(s[i], '0', '9') {
			return false
		}
	}
	return true
}

// atoi converts a short all-digit field.
func atoi[T text](s T) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}
