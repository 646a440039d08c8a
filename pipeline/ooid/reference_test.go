package ooid

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// This file holds a plain reference implementation of the OOID rules,
// written from ooni-uuid and the canning regex with the standard
// library only. The fast path in the package is tested against it.

var (
	refBucket = regexp.MustCompile(`^(20[0-9]{2})-([01][0-9])-([0123][0-9])/`)
	// ooni-uuid, with the (?P=asn) backreference replaced by a
	// second capture (ridasn) that refParse compares by hand.
	refStrict = regexp.MustCompile(`^(?P<bktyear>20[0-9]{2})-(?P<bktmon>[01][0-9])-(?P<bktday>[0123][0-9])/` +
		`(?P<year>20[0-9]{2})(?P<mon>[01][0-9])(?P<day>[0123][0-9])T(?P<hr>[012][0-9])(?P<min>[0-5][0-9])(?P<sec>[0-5][0-9])Z-` +
		`[A-Z][A-Z]-AS(?P<asn>[0-9]{1,10})-[^-]+-` +
		`(?P<report_id>no_report_id|(?P<ridyear>20[0-9]{2})(?P<ridmon>[01][0-9])(?P<ridday>[0123][0-9])T(?P<ridhr>[012][0-9])(?P<ridmin>[0-5][0-9])(?P<ridsec>[0-5][0-9])Z_AS(?P<ridasn>[0-9]{1,10})_[0-9A-Za-z]{50}|[A-Za-z0-9]{64})-` +
		`0\.[12]\.0-probe\.(?:yaml|json)$`)
	// canning.py REPORT_FNAME_RE, applied to the basename.
	refCanning  = regexp.MustCompile(`^(\d{4})([0-1][0-9])([0-3][0-9])T([0-2][0-9])([0-5][0-9])([0-5][0-9])Z-[A-Z]{2}-AS(\d+)-(?P<test_name>[^-]+)-([^-]+)-[.0-9]+-probe\.(?:yaml|json)$`)
	refTimedRID = regexp.MustCompile(`^20[0-9]{2}[01][0-9][0123][0-9]T[012][0-9][0-5][0-9][0-5][0-9]Z_AS([0-9]{1,10})_[0-9A-Za-z]{50}$`)
)

var errRef = errors.New("reference: rejected")

// refTime is calendar.timegm that rejects what it would normalise.
func refTime(y, mo, d, h, mi, s string) (uint32, error) {
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	t := time.Date(n(y), time.Month(n(mo)), n(d), n(h), n(mi), n(s), 0, time.UTC)
	if t.Year() != n(y) || int(t.Month()) != n(mo) || t.Day() != n(d) || t.Hour() != n(h) {
		return 0, errRef
	}
	if t.Unix() < 0 || t.Unix() > 1<<32-1 {
		return 0, errRef
	}
	return uint32(t.Unix()), nil
}

func refParse(name string) (uint32, Source, error) {
	if len(name) == 0 || len(name) > MaxTextnameLen {
		return 0, 0, errRef
	}
	for i := 0; i < len(name); i++ {
		if name[i] < 0x21 || name[i] > 0x7e {
			return 0, 0, errRef
		}
	}
	b := refBucket.FindStringSubmatch(name)
	if b == nil {
		return 0, 0, errRef
	}
	if _, err := refTime(b[1], b[2], b[3], "00", "00", "00"); err != nil {
		return 0, 0, errRef
	}
	if m := refStrict.FindStringSubmatch(name); m != nil {
		g := func(k string) string { return m[refStrict.SubexpIndex(k)] }
		if g("ridasn") != "" && g("ridasn") != g("asn") {
			return 0, 0, errRef
		}
		fileTS, err := refTime(g("year"), g("mon"), g("day"), g("hr"), g("min"), g("sec"))
		if err != nil {
			return 0, 0, err
		}
		if g("ridyear") == "" {
			return fileTS, SourceFilename, nil
		}
		ts, err := refTime(g("ridyear"), g("ridmon"), g("ridday"), g("ridhr"), g("ridmin"), g("ridsec"))
		return ts, SourceReportID, err
	}
	m := refCanning.FindStringSubmatch(name[len(b[0]):])
	if m == nil {
		return 0, 0, errRef
	}
	if r := refTimedRID.FindStringSubmatch(m[9]); r != nil && r[1] != m[7] {
		return 0, 0, errRef
	}
	ts, err := refTime(m[1], m[2], m[3], m[4], m[5], m[6])
	return ts, SourceFallback, err
}

func refOOID(name string, ndx uint64, s Scheme) (ID, error) {
	ts, _, err := refParse(name)
	if err != nil {
		return 0, err
	}
	sum := sha1.Sum([]byte(name))
	hexdigest := hex.EncodeToString(sum[:])
	w, err := strconv.ParseUint(hexdigest[s.SHA1Offset:s.SHA1Offset+7], 16, 64)
	if err != nil {
		return 0, err
	}
	counter := (w + ndx) % (1 << uint(s.CounterBits))
	v := uint64(ts)<<32 | 0xF<<28 | counter
	return ID(v), nil
}

// refFormat is the Python "%016x".
func refFormat(id ID) string {
	s := strconv.FormatUint(uint64(id), 16)
	return strings.Repeat("0", 16-len(s)) + s
}
