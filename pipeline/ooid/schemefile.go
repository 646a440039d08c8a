package ooid

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/backfill-dev/backfill/internal/store"
)

// SchemeFileVersion is the version of the scheme file format this build
// writes and reads.
const SchemeFileVersion = 1

// MaxSchemeFile bounds a scheme file: about a million overrides.
const MaxSchemeFile = 32 << 20

const schemeMagic = "backfill-ooid-scheme"

// ErrSchemeFile is returned (wrapped) for a scheme file that cannot be
// read: damaged, truncated, edited, of an unknown version, or invalid.
var ErrSchemeFile = errors.New("bad scheme file")

// MarshalScheme returns the scheme file of s: a versioned text file whose
// last line is the SHA-256 of every byte before it. Each comment is
// written as a "# " line after the fixed header comment. A keyed scheme
// must have its keys.
func MarshalScheme(s Scheme, comments ...string) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if s.Keyed() {
		b.WriteString("# backfill OOID scheme. The counter base of a report is SipHash-2-4 of its\n" +
			"# textname under the key of its timestamp, modulo 2^counter_bits. Key i of\n" +
			"# the family is the first 16 bytes of SHA-256(\"backfill-ooid-key\" 0x00 seed\n" +
			"# 0x00 i as 8 big-endian bytes); \"key\" is the default, each \"override TS I\"\n" +
			"# gives timestamp TS key I. The last line checks every byte above it.\n")
	} else {
		b.WriteString("# backfill OOID scheme. The counter base of a report is the 7 hex digits of\n" +
			"# its textname's SHA-1 hexdigest from sha1_offset, modulo 2^counter_bits.\n" +
			"# The last line checks every byte above it.\n")
	}
	for _, c := range comments {
		for _, l := range strings.Split(c, "\n") {
			b.WriteString(strings.TrimRight("# "+l, " ") + "\n")
		}
	}
	fmt.Fprintf(&b, "%s %d\ncounter_bits %d\n", schemeMagic, SchemeFileVersion, s.CounterBits)
	if s.Keyed() {
		t := s.keys
		kb := t.defKey.Bytes()
		fmt.Fprintf(&b, "hash %s\nseed %s\nkey %d %x\n", HashSipHash, t.seed, t.def, kb[:])
		for _, o := range t.overrides {
			fmt.Fprintf(&b, "override %d %d\n", o.TS, o.Index)
		}
	} else {
		fmt.Fprintf(&b, "hash %s\nsha1_offset %d\n", HashSHA1Window, s.SHA1Offset)
	}
	sum := sha256.Sum256(b.Bytes())
	fmt.Fprintf(&b, "sha256 %x\n", sum[:])
	return b.Bytes(), nil
}

// LoadScheme reads a scheme file (see [ParseScheme]).
func LoadScheme(path string) (Scheme, error) {
	f, err := store.OpenRegular(path)
	if err != nil {
		return Scheme{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSchemeFile+1))
	if err != nil {
		return Scheme{}, err
	}
	s, err := ParseScheme(b)
	if err != nil {
		return Scheme{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func schemeErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrSchemeFile}, args...)...)
}

// ParseScheme reads a scheme file as [MarshalScheme] writes it. Comment
// lines ("#") may appear before the checksum line; anything else out of
// place, a checksum that does not match, an unknown version, a truncated
// file or an invalid scheme is an error wrapping [ErrSchemeFile].
func ParseScheme(b []byte) (Scheme, error) {
	if len(b) > MaxSchemeFile {
		return Scheme{}, schemeErr("larger than %d bytes", MaxSchemeFile)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var body []string // the lines before the checksum, comments dropped
	var pos int       // bytes before the current line
	sumAt := -1
	for i, l := range lines {
		if !strings.HasSuffix(l, "\n") {
			return Scheme{}, schemeErr("truncated: line %d has no end", i+1)
		}
		t := strings.TrimSuffix(l, "\n")
		switch {
		case strings.HasPrefix(t, "sha256 "):
			sumAt = pos
		case strings.HasPrefix(t, "#"):
		case sumAt >= 0:
			return Scheme{}, schemeErr("line %d follows the checksum line", i+1)
		default:
			body = append(body, t)
		}
		if sumAt >= 0 && i != len(lines)-1 {
			return Scheme{}, schemeErr("line %d follows the checksum line", i+2)
		}
		pos += len(l)
	}
	if len(body) == 0 {
		return Scheme{}, schemeErr("empty: not a backfill scheme file")
	}
	magic, ver, _ := strings.Cut(body[0], " ")
	if magic != schemeMagic {
		return Scheme{}, schemeErr("not a backfill scheme file: first line %q", clipStr(body[0]))
	}
	if v, err := strconv.Atoi(ver); err != nil || v != SchemeFileVersion {
		return Scheme{}, schemeErr("unknown version %q: this build reads version %d", clipStr(ver), SchemeFileVersion)
	}
	if sumAt < 0 {
		return Scheme{}, schemeErr("truncated: no sha256 line")
	}
	want := strings.TrimSuffix(strings.TrimPrefix(lines[len(lines)-1], "sha256 "), "\n")
	got := sha256.Sum256(b[:sumAt])
	if want != hex.EncodeToString(got[:]) {
		return Scheme{}, schemeErr("checksum mismatch: the file was changed or damaged after it was written (its bytes hash to %x, the file says %s)", got[:], clipStr(want))
	}
	return parseSchemeBody(body[1:])
}

func parseSchemeBody(body []string) (Scheme, error) {
	p := fieldReader{lines: body}
	var s Scheme
	var err error
	if s.CounterBits, err = p.int("counter_bits", MinCounterBits, MaxCounterBits); err != nil {
		return Scheme{}, err
	}
	hash, err := p.field("hash")
	if err != nil {
		return Scheme{}, err
	}
	switch hash {
	case HashSHA1Window:
		if s.SHA1Offset, err = p.int("sha1_offset", 0, MaxSHA1Offset); err != nil {
			return Scheme{}, err
		}
	case HashSipHash:
		seed, err := p.field("seed")
		if err != nil {
			return Scheme{}, err
		}
		kv, err := p.field("key")
		if err != nil {
			return Scheme{}, err
		}
		idx, keyHex, _ := strings.Cut(kv, " ")
		def, err := strconv.ParseUint(idx, 10, 64)
		if err != nil {
			return Scheme{}, schemeErr("key %q: want INDEX HEX", clipStr(kv))
		}
		var ov []Override
		for p.i < len(p.lines) && strings.HasPrefix(p.lines[p.i], "override ") {
			a, b, _ := strings.Cut(strings.TrimPrefix(p.lines[p.i], "override "), " ")
			ts, err1 := strconv.ParseUint(a, 10, 32)
			ix, err2 := strconv.ParseUint(b, 10, 64)
			if err1 != nil || err2 != nil {
				return Scheme{}, schemeErr("%q: want override TS INDEX", clipStr(p.lines[p.i]))
			}
			if len(ov) > 0 && uint32(ts) <= ov[len(ov)-1].TS {
				return Scheme{}, schemeErr("override %d: timestamps must increase", ts)
			}
			ov = append(ov, Override{uint32(ts), ix})
			p.i++
		}
		t, err := NewKeyTable(seed, def, ov)
		if err != nil {
			return Scheme{}, schemeErr("%v", err)
		}
		kb := t.defKey.Bytes()
		if keyHex != hex.EncodeToString(kb[:]) {
			return Scheme{}, schemeErr("key %d of seed %q is %x, the file says %q", def, seed, kb[:], clipStr(keyHex))
		}
		s = KeyedScheme(s.CounterBits, t)
	default:
		return Scheme{}, schemeErr("unknown hash %q: want %s or %s", clipStr(hash), HashSipHash, HashSHA1Window)
	}
	if p.i < len(p.lines) {
		return Scheme{}, schemeErr("unexpected line %q", clipStr(p.lines[p.i]))
	}
	if err := s.Validate(); err != nil {
		return Scheme{}, schemeErr("%v", err)
	}
	return s, nil
}

type fieldReader struct {
	lines []string
	i     int
}

func (p *fieldReader) field(name string) (string, error) {
	if p.i >= len(p.lines) {
		return "", schemeErr("truncated: no %s line", name)
	}
	k, v, ok := strings.Cut(p.lines[p.i], " ")
	if !ok || k != name || v == "" {
		return "", schemeErr("want a %s line, got %q", name, clipStr(p.lines[p.i]))
	}
	p.i++
	return v, nil
}

func (p *fieldReader) int(name string, lo, hi int) (int, error) {
	v, err := p.field(name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, schemeErr("%s %q: want %d..%d", name, clipStr(v), lo, hi)
	}
	return n, nil
}

func clipStr(s string) string { return clip([]byte(s)) }
