package index

import (
	"math"
	"strings"
)

// parseCannedRowFast reads a row written the way the canning step wrote
// every row (Python's json.dumps with sort_keys: keys in order, ", " and
// ": " between them, integers, strings of printable ASCII without
// escapes) and valid: the row parseCannedRow gives without an error. It
// says false for anything else, which parseCannedRow then reads in full.
// The full read costs about ten times as much; FuzzCannedRowFast holds the
// two to the same result.
func parseCannedRowFast(line []byte) (CannedFile, bool) {
	s := rowScan{b: line, ok: true}
	var f CannedFile
	if s.lit(`{"canned": [`) {
		f.Tar, f.Texts = true, []Text{}
		if !s.lit("]") {
			for {
				s.want("{")
				f.Texts = append(f.Texts, s.text())
				if !s.lit(", ") {
					break
				}
			}
			s.want("]")
		}
		s.want(", ")
	} else {
		s.want("{")
	}
	f.CRC32, f.SHA1, f.Size, f.Filename = s.sums("file")
	if f.Tar {
		s.want(`, "text_size": `)
		f.TextSize = s.size()
		s.want("}")
	} else {
		s.want(", ")
		t := s.text()
		f.TextSize = t.Size
		f.Texts = []Text{t}
	}
	if !s.ok || len(s.b) > 0 {
		return CannedFile{}, false
	}
	if f.Tar != strings.HasSuffix(f.Filename, ".tar.lz4") || !strings.HasSuffix(f.Filename, ".lz4") {
		return CannedFile{}, false
	}
	return f, true
}

// rowScan reads a row from its start; ok turns false at the first byte
// that is not as expected, and every read after that gives zero values.
type rowScan struct {
	b  []byte
	ok bool
}

// lit reads p if the row goes on with it.
func (s *rowScan) lit(p string) bool {
	if !s.ok || len(s.b) < len(p) || string(s.b[:len(p)]) != p {
		return false
	}
	s.b = s.b[len(p):]
	return true
}

// want reads p, which must come next.
func (s *rowScan) want(p string) {
	if !s.lit(p) {
		s.ok = false
	}
}

// text reads "text_crc32": N, "text_sha1": S, "text_size": N, "textname":
// S}: the rest of a member of a tar row's "canned", or of an as-is row.
func (s *rowScan) text() Text {
	var t Text
	t.CRC32, t.SHA1, t.Size, t.Textname = s.sums("text")
	s.want("}")
	return t
}

// sums reads "KIND_crc32": N, "KIND_sha1": S, "KIND_size": N,
// "KINDname": S, KIND being file or text.
func (s *rowScan) sums(kind string) (crc int32, sha [20]byte, size int64, name string) {
	s.want(`"` + kind + `_crc32": `)
	crc = s.crc()
	s.want(`, "` + kind + `_sha1": `)
	sha = s.sha1()
	s.want(`, "` + kind + `_size": `)
	size = s.size()
	s.want(`, "` + kind + `name": `)
	return crc, sha, size, s.str()
}

// str reads a string of printable ASCII without escapes.
func (s *rowScan) str() string {
	if !s.lit(`"`) {
		s.ok = false
		return ""
	}
	for i, c := range s.b {
		switch {
		case c == '"':
			v := string(s.b[:i])
			s.b = s.b[i+1:]
			return v
		case c < 0x20 || c > 0x7e || c == '\\':
			s.ok = false
			return ""
		}
	}
	s.ok = false
	return ""
}

// int reads an integer as JSON writes it, of at most 18 digits.
func (s *rowScan) int() int64 {
	if !s.ok {
		return 0
	}
	neg := len(s.b) > 0 && s.b[0] == '-'
	if neg {
		s.b = s.b[1:]
	}
	n := 0
	var v int64
	for n < len(s.b) && s.b[n] >= '0' && s.b[n] <= '9' {
		v = 10*v + int64(s.b[n]-'0')
		n++
	}
	if n == 0 || n > 18 || n > 1 && s.b[0] == '0' {
		s.ok = false
		return 0
	}
	s.b = s.b[n:]
	if neg {
		return -v
	}
	return v
}

func (s *rowScan) size() int64 {
	v := s.int()
	if v < 0 {
		s.ok = false
	}
	return v
}

func (s *rowScan) crc() int32 {
	v := s.int()
	if v < math.MinInt32 || v > math.MaxInt32 {
		s.ok = false
	}
	return int32(v)
}

// sha1 reads a base64 SHA-1: 28 characters, quoted.
func (s *rowScan) sha1() [20]byte {
	var out [20]byte
	if !s.ok || len(s.b) < 30 || s.b[0] != '"' || s.b[29] != '"' || !decodeSHA1(&out, s.b[1:29]) {
		s.ok = false
		return out
	}
	s.b = s.b[30:]
	return out
}
