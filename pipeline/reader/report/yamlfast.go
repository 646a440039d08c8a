package report

import "bytes"

// simpleMapping reports whether doc, a YAML document with its "---\n"
// and "...\n" markers, is a block mapping written in a small, strict
// subset of YAML: one "key: value" line per key, no indentation, comments,
// tags, anchors or multi-line values, each value a plain scalar of safe
// ASCII bytes, a quoted string of printable ASCII without escapes, or a
// flow sequence or flow mapping of such scalars; or "key: !!binary |" and
// lines of base64 indented by two spaces. Every document it accepts
// loads as a non-empty mapping (FuzzSimpleMapping holds it to yaml.v3);
// it says false for anything else, which is then parsed in full. OONI
// report headers, and most measurements, are written this way, and the
// full parse costs about forty times as much.
func simpleMapping(doc []byte) bool {
	body, ok := bytes.CutPrefix(doc, docStart)
	if !ok {
		return false
	}
	if body, ok = bytes.CutSuffix(body, docEnd); !ok || len(body) == 0 || body[len(body)-1] != '\n' {
		return false
	}
	for len(body) > 0 {
		i := bytes.IndexByte(body, '\n')
		line := body[:i]
		body = body[i+1:]
		if n := keyLen(line); n > 0 && bytes.Equal(line[n:], binaryBlock) {
			// A base64 block, as ooniprobe wrote probe_city: lines of
			// base64 indented by two spaces.
			lines := 0
			for ; bytes.HasPrefix(body, []byte("  ")); lines++ {
				i := bytes.IndexByte(body, '\n')
				if i < 3 || !base64Only(body[2:i]) {
					return false
				}
				body = body[i+1:]
			}
			if lines == 0 {
				return false
			}
			continue
		}
		if !simpleLine(line) {
			return false
		}
	}
	return true
}

var binaryBlock = []byte(": !!binary |")

func base64Only(b []byte) bool {
	for _, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
			return false
		}
	}
	return true
}

// simpleLine accepts `key: value`.
func simpleLine(l []byte) bool {
	n := keyLen(l)
	if n == 0 || len(l) < n+3 || l[n] != ':' || l[n+1] != ' ' {
		return false
	}
	v := l[n+2:]
	switch v[0] {
	case '[':
		return flowItems(v, ']', flowScalar)
	case '{':
		return flowItems(v, '}', flowPair)
	}
	return scalar(v, false)
}

// keyLen is the length of the identifier [A-Za-z_][A-Za-z0-9_]* that l
// starts with, 0 when there is none.
func keyLen(l []byte) int {
	for i, c := range l {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return i
		}
	}
	return len(l)
}

// flowItems accepts open, items separated by ", ", close, nothing after.
func flowItems(v []byte, close byte, item func([]byte) bool) bool {
	if len(v) < 2 || v[len(v)-1] != close {
		return false
	}
	inner := v[1 : len(v)-1]
	if len(inner) == 0 {
		return true
	}
	for _, it := range bytes.Split(inner, []byte(", ")) {
		if !item(it) {
			return false
		}
	}
	return true
}

func flowScalar(v []byte) bool { return scalar(v, true) }

func flowPair(p []byte) bool {
	n := keyLen(p)
	return n > 0 && len(p) > n+2 && p[n] == ':' && p[n+1] == ' ' && scalar(p[n+2:], true)
}

// scalar accepts a quoted string of printable ASCII without escapes, or a
// plain scalar: it starts with a letter, digit, '_', '.' or '/' (or a '-'
// that another such byte follows), goes on with those and '+', '=', '@',
// '(', ')', '~', '-', ':' not before a space or the end, and single
// spaces (not in a flow collection, and never last).
func scalar(v []byte, flow bool) bool {
	if len(v) == 0 {
		return false
	}
	if q := v[0]; q == '\'' || q == '"' {
		if len(v) < 2 || v[len(v)-1] != q {
			return false
		}
		for _, c := range v[1 : len(v)-1] {
			if c < 0x20 || c > 0x7e || c == q || c == '\\' {
				return false
			}
		}
		return true
	}
	start := v
	if v[0] == '-' {
		start = v[1:]
	}
	if len(start) == 0 || !plainFirst(start[0]) || v[len(v)-1] == ' ' || v[len(v)-1] == ':' {
		return false
	}
	for i, c := range v {
		switch {
		case plainFirst(c), c == '+', c == '=', c == '@', c == '(', c == ')', c == '~', c == '-':
		case c == ':':
			if flow || v[i+1] == ' ' {
				return false
			}
		case c == ' ':
			if flow || v[i+1] == ' ' {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func plainFirst(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '/'
}
