package ooniuid

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// JSONStream checks a JSON line given in pieces, as JSONDate checks one
// given whole: for a line too long to hold. It holds the open containers
// (at most 1024), the bytes of a UTF-8 sequence or an escape split
// between pieces, and a top-level measurement_start_time's value up to
// MaxDateValue bytes. Add the line's bytes (without its "\n") in order,
// then ask Date.
type JSONStream struct {
	st    jsState
	stack []byte // '{' or '[' of each open container
	fail  bool
	// A literal being read, and how much of it is.
	word string
	got  int
	// A number being read: its digits before an exponent, and the parts
	// read (numSign, numInt, numFrac, numExp, numExpSign, numExpDigits).
	digits, part int
	// A string being read: an escape (after a backslash; 2 to 5: the
	// digits of a \u read so far) or a UTF-8 sequence split by a piece.
	esc     int
	hex     rune
	seq     [utf8.UTFMax]byte
	nseq    int              // of seq read
	need    int              // of seq in all
	decode  *strings.Builder // the key or value being decoded, or nil
	high    rune             // a high surrogate whose low one may follow
	key     strings.Builder
	val     strings.Builder
	isKey   bool // the string is a key
	dateKey bool // the value being read is measurement_start_time's
	date    string
	long    bool // a date value past MaxDateValue: its date is not read
}

// MaxDateValue bounds the measurement_start_time value JSONStream reads.
const MaxDateValue = 1 << 20

type jsState uint8

const (
	jsValue      jsState = iota // a value is due
	jsAfter                     // a value has ended
	jsKey                       // a key is due (or, first, the object's end)
	jsKeyOnly                   // a key is due, after a comma
	jsColon                     // a colon is due
	jsValueOrEnd                // a value or the array's end is due
	jsString
	jsNumber
	jsWord
	jsEnd // the top-level value has ended
)

const (
	numSign = iota
	numInt
	numFrac
	numExp
	numExpSign
	numExpDigits
)

// Add reads p, the next piece of the line.
func (s *JSONStream) Add(p []byte) {
	for i := 0; i < len(p) && !s.fail; {
		i += s.step(p[i:])
	}
}

// step reads from the start of p, and returns how many bytes it took.
func (s *JSONStream) step(p []byte) int {
	c := p[0]
	switch s.st {
	case jsString:
		return s.str(p)
	case jsNumber:
		return s.number(c)
	case jsWord:
		if s.got == len(s.word) {
			s.fail = wordByte(c)
			s.ended()
			return 0
		}
		if c != s.word[s.got] {
			s.fail = true
			return 1
		}
		s.got++
		return 1
	}
	if wsByte[c] {
		n := 1
		for n < len(p) && wsByte[p[n]] {
			n++
		}
		return n
	}
	switch s.st {
	case jsValue, jsValueOrEnd:
		if c == ']' && s.st == jsValueOrEnd {
			return s.close(c)
		}
		s.value(c)
	case jsKey, jsKeyOnly:
		switch {
		case c == '}' && s.st == jsKey:
			return s.close(c)
		case c == '"':
			s.startString(true)
		default:
			s.fail = true
		}
	case jsColon:
		if c != ':' {
			s.fail = true
		}
		s.st = jsValue
	case jsAfter:
		switch {
		case c == ',' && s.top() == '{':
			s.st = jsKeyOnly
		case c == ',' && s.top() == '[':
			s.st = jsValue
		case c == '}' || c == ']':
			return s.close(c)
		default:
			s.fail = true
		}
	case jsEnd:
		s.fail = true
	}
	return 1
}

func (s *JSONStream) top() byte {
	if len(s.stack) == 0 {
		return 0
	}
	return s.stack[len(s.stack)-1]
}

// close ends the open container with c.
func (s *JSONStream) close(c byte) int {
	want := byte('{')
	if c == ']' {
		want = '['
	}
	if s.top() != want {
		s.fail = true
		return 1
	}
	s.stack = s.stack[:len(s.stack)-1]
	s.ended()
	return 1
}

// ended moves on past a value.
func (s *JSONStream) ended() {
	if s.dateKey && len(s.stack) == 1 {
		s.dateKey = false
	}
	if len(s.stack) == 0 {
		s.st = jsEnd
		return
	}
	s.st = jsAfter
}

// value starts the value c begins.
func (s *JSONStream) value(c byte) {
	if s.dateKey && len(s.stack) == 1 && c != '"' {
		s.date, s.long = NoDate, false // not a string: no date
	}
	switch {
	case c == '"':
		s.startString(false)
	case c == '{' || c == '[':
		if len(s.stack)+1 > maxDepth {
			s.fail = true
			return
		}
		s.stack = append(s.stack, c)
		s.st = jsKey
		if c == '[' {
			s.st = jsValueOrEnd
		}
	case c == '-' || c >= '0' && c <= '9':
		s.st, s.digits, s.part = jsNumber, 0, numSign
		if c != '-' {
			s.digits, s.part = 1, numInt
		}
	default:
		if literals[c] == "" {
			s.fail = true
			return
		}
		s.st, s.word, s.got = jsWord, literals[c], 1
	}
}

// number reads the next byte of a number: -? digits* (. digits*)?
// ([eE][+-]?digits+)?, the exponent only after a digit, or -Infinity.
func (s *JSONStream) number(c byte) int {
	digit := c >= '0' && c <= '9'
	switch {
	case s.part == numSign && c == 'I':
		s.st, s.word, s.got = jsWord, "Infinity", 1
		return 1
	case digit && s.part <= numFrac:
		s.digits++
		s.part = max(s.part, numInt)
		return 1
	case c == '.' && s.part <= numInt:
		s.part = numFrac
		return 1
	case (c == 'e' || c == 'E') && s.part <= numFrac:
		if s.digits == 0 {
			s.fail = true
			return 1
		}
		s.part = numExp
		return 1
	case (c == '+' || c == '-') && s.part == numExp:
		s.part = numExpSign
		return 1
	case digit && s.part >= numExp:
		s.part = numExpDigits
		return 1
	case s.part == numExp || s.part == numExpSign:
		s.fail = true // an exponent without digits
		return 1
	}
	s.fail = wordByte(c)
	s.ended()
	return 0
}

func (s *JSONStream) startString(key bool) {
	s.st, s.isKey, s.esc, s.nseq, s.high = jsString, key, 0, 0, 0
	s.decode = nil
	if len(s.stack) == 1 && s.stack[0] == '{' {
		switch {
		case key:
			s.key.Reset()
			s.decode = &s.key
		case s.dateKey:
			s.val.Reset()
			s.decode, s.long = &s.val, false
		}
	}
}

// str reads string bytes from the start of p.
func (s *JSONStream) str(p []byte) int {
	c := p[0]
	switch {
	case s.nseq > 0:
		s.seq[s.nseq] = c
		if s.nseq++; s.nseq == s.need {
			s.nseq = 0
			if _, ok := utf8Len(s.seq[:s.need]); !ok {
				s.fail = true
				return 1
			}
			if s.decode != nil {
				s.put(string(s.seq[:s.need]))
			}
		}
		return 1
	case s.esc == 1:
		s.esc = 0
		switch c {
		case 'u':
			s.esc, s.hex = 2, 0
		case '"', '\\', '/':
			s.putRune(rune(c))
		case 'b':
			s.putRune('\b')
		case 'f':
			s.putRune('\f')
		case 'n':
			s.putRune('\n')
		case 'r':
			s.putRune('\r')
		case 't':
			s.putRune('\t')
		default:
			s.fail = true
		}
		return 1
	case s.esc >= 2:
		v, ok := hexDigit(c)
		if !ok {
			s.fail = true
			return 1
		}
		s.hex = s.hex<<4 | v
		if s.esc++; s.esc == 6 {
			s.esc = 0
			s.putRune(s.hex)
		}
		return 1
	case c == '"':
		s.endString()
		return 1
	case c == '\\':
		s.esc = 1
		return 1
	case c == 0:
		s.fail = true
		return 1
	case c >= 0x80:
		// A sequence: its length from its first byte, then utf8Len on
		// the whole of it.
		if s.need = leadLen(c); s.need == 0 {
			s.fail = true
			return 1
		}
		s.seq[0], s.nseq = c, 1
		return 1
	}
	// A run of plain bytes.
	n := 1
	for n < len(p) && p[n] >= 0x20 && p[n] < 0x80 && p[n] != '"' && p[n] != '\\' {
		n++
	}
	if s.decode != nil {
		s.put(string(p[:n]))
	}
	return n
}

// putRune adds an escape's rune to what is decoded, pairing surrogates
// as str does: a high one followed at once by an escaped low one makes
// one rune, any other is U+FFFD.
func (s *JSONStream) putRune(r rune) {
	if s.decode == nil {
		return
	}
	if s.high != 0 {
		h := s.high
		s.high = 0
		if r >= 0xdc00 && r <= 0xdfff {
			s.add(string(utf16.DecodeRune(h, r)))
			return
		}
		s.add(string(utf8.RuneError))
	}
	if r >= 0xd800 && r < 0xdc00 {
		s.high = r
		return
	}
	s.add(string(r)) // a lone low surrogate is U+FFFD
}

// put adds bytes as they are written to what is decoded.
func (s *JSONStream) put(b string) {
	if s.decode == nil {
		return
	}
	if s.high != 0 {
		s.high = 0
		s.add(string(utf8.RuneError))
	}
	s.add(b)
}

func (s *JSONStream) add(b string) {
	if s.decode == nil {
		return
	}
	if s.decode == &s.key && s.key.Len()+len(b) > len(dateKey) ||
		s.decode == &s.val && s.val.Len()+len(b) > MaxDateValue {
		if s.decode == &s.val {
			s.long = true
		}
		s.decode.WriteString("\x00") // never the key; a value past the bound
		s.decode = nil
		return
	}
	s.decode.WriteString(b)
}

func (s *JSONStream) endString() {
	if s.high != 0 && s.decode != nil {
		s.high = 0
		s.add(string(utf8.RuneError))
	}
	switch {
	case s.isKey:
		s.dateKey = s.decode != nil && s.key.String() == dateKey
		s.st = jsColon
		return
	case s.dateKey && len(s.stack) == 1 && !s.long:
		s.date = Date(s.val.String())
	case s.dateKey && len(s.stack) == 1:
		s.date = ""
	}
	s.ended()
}

// Date returns what JSONDate returns of the whole line. unread is set
// when the line reads but its measurement_start_time is longer than
// MaxDateValue: its date is not known.
func (s *JSONStream) Date() (date string, ok, unread bool) {
	if !s.fail {
		switch s.st {
		case jsNumber:
			s.number(' ')
		case jsWord:
			if s.got == len(s.word) {
				s.ended()
			}
		}
	}
	if s.fail || s.st != jsEnd {
		return "", false, false
	}
	if s.date == "" && !s.long {
		return NoDate, true, false
	}
	if s.long {
		return "", true, true
	}
	return s.date, true, false
}
