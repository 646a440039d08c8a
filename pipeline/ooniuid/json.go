package ooniuid

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// JSONDate returns the date of the measurement_uid of a JSON report's
// measurement (its line, without or with its "\n"), and false when OONI
// gives it no uid: its decoder, ujson, refuses the line. The date is that
// of the line's top-level measurement_start_time (the last, when the key
// is there twice, as a Python dict keeps it), NoDate when it is absent,
// not a string, or does not read.
//
// The line is checked as ujson 5 reads it, which is not the JSON
// standard: it takes NaN, Infinity and -Infinity, numbers with leading
// zeros, "1.", "-.5" and a lone "-", control characters (not NUL) inside
// strings, escaped lone surrogates and UTF-8-encoded ones; it refuses
// other invalid UTF-8 (overlong forms, code points past U+10FFFF),
// nesting deeper than 1024, whitespace other than space, tab, CR and LF,
// and anything after the value but that whitespace.
func JSONDate(line []byte) (string, bool) {
	return jsonDate(line, utf8.Valid(line), hasScan64)
}

// JSONDateOf is JSONDate of a line known to be all UTF-8 (isUTF8 true) or
// not, as a reader that has checked it knows.
func JSONDateOf(line []byte, isUTF8 bool) (string, bool) {
	return jsonDate(line, isUTF8, hasScan64)
}

// jsonDate is JSONDate, its strings skipped with scan64 or not.
func jsonDate(line []byte, isUTF8, scan bool) (string, bool) {
	p := jsonParser{b: line, utf8: isUTF8, scan: scan}
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		// Not an object: OONI reads no date of it, but gives a uid.
		return NoDate, p.value(0) && p.end()
	}
	date, ok := p.object()
	if !ok || !p.end() {
		return "", false
	}
	return date, true
}

type jsonParser struct {
	b []byte
	i int
	// utf8 is set when the whole line is UTF-8 (utf8.Valid, one fast
	// pass): its strings need no check of their sequences. A line it
	// refuses may still hold UTF-8-encoded surrogates, which ujson takes:
	// its strings are checked one sequence at a time.
	utf8 bool
	scan bool // skip strings with scan64
}

const maxDepth = 1024

func (p *jsonParser) ws() {
	for p.i < len(p.b) && p.b[p.i] <= ' ' && wsByte[p.b[p.i]] {
		p.i++
	}
}

// wsByte are the bytes ujson skips between tokens.
var wsByte = [256]bool{' ': true, '\t': true, '\r': true, '\n': true}

func (p *jsonParser) end() bool {
	p.ws()
	return p.i == len(p.b)
}

// object reads the top-level object and returns its date.
func (p *jsonParser) object() (string, bool) {
	p.i++ // {
	date := NoDate
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return date, true
	}
	for {
		p.ws()
		isDate, ok := p.dateKey()
		if !ok {
			return "", false
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return "", false
		}
		p.i++
		p.ws()
		if isDate {
			if p.i < len(p.b) && p.b[p.i] == '"' {
				v, ok := p.str(true)
				if !ok {
					return "", false
				}
				date = Date(v)
			} else {
				if !p.value(1) {
					return "", false
				}
				date = NoDate
			}
		} else if !p.value(1) {
			return "", false
		}
		p.ws()
		if p.i >= len(p.b) {
			return "", false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return date, true
		default:
			return "", false
		}
	}
}

// dateKey reads a key of the top-level object: whether it is
// measurement_start_time. A key without escapes is compared as it is
// written, with no copy.
func (p *jsonParser) dateKey() (bool, bool) {
	from := p.i
	if _, ok := p.str(false); !ok {
		return false, false
	}
	raw := p.b[from+1 : p.i-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == dateKey, true
	}
	p.i = from
	key, ok := p.str(true)
	return key == dateKey, ok
}

const dateKey = "measurement_start_time"

// value skips one value at nesting depth.
func (p *jsonParser) value(depth int) bool {
	if p.i >= len(p.b) {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		_, ok := p.str(false)
		return ok
	case c == '{' || c == '[':
		if depth+1 > maxDepth {
			return false
		}
		return p.container(depth + 1)
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case literals[c] != "":
		return p.literal(literals[c])
	}
	return false
}

// literals are the words ujson reads as values, by their first letter.
var literals = [256]string{'t': "true", 'f': "false", 'n': "null", 'N': "NaN", 'I': "Infinity"}

func (p *jsonParser) container(depth int) bool {
	close := byte(']')
	obj := p.b[p.i] == '{'
	if obj {
		close = '}'
	}
	p.i++
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == close {
		p.i++
		return true
	}
	for {
		p.ws()
		if obj {
			if _, ok := p.str(false); !ok {
				return false
			}
			p.ws()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return false
			}
			p.i++
			p.ws()
		}
		if !p.value(depth) {
			return false
		}
		p.ws()
		if p.i >= len(p.b) {
			return false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case close:
			p.i++
			return true
		default:
			return false
		}
	}
}

// literal reads word, which must not run on into a letter or digit.
func (p *jsonParser) literal(word string) bool {
	if !strings.HasPrefix(string(p.b[p.i:min(len(p.b), p.i+len(word))]), word) {
		return false
	}
	p.i += len(word)
	return !p.wordGoesOn()
}

func (p *jsonParser) wordGoesOn() bool {
	if p.i >= len(p.b) {
		return false
	}
	return wordByte(p.b[p.i])
}

// wordByte tells whether c runs a number or a literal on into a word,
// which ujson refuses.
func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' || c == '+'
}

// number reads ujson's numbers: -? digits* (. digits*)? ([eE][+-]?digits+)?,
// the exponent only after a digit; -Infinity.
func (p *jsonParser) number() bool {
	if p.b[p.i] == '-' {
		p.i++
		if p.i < len(p.b) && p.b[p.i] == 'I' {
			return p.literal("Infinity")
		}
	}
	digits := 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
		digits++
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			digits++
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		if digits == 0 {
			return false
		}
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		if n == 0 {
			return false
		}
	}
	return !p.wordGoesOn()
}

// str reads a string; with decode it returns its value (a lone surrogate
// as U+FFFD, which no date holds). Eight bytes at a time while none of
// them is a quote, a backslash or a NUL (nor, in a line that is not all
// UTF-8, past ASCII).
func (p *jsonParser) str(decode bool) (string, bool) {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return "", false
	}
	if !decode && p.scan {
		return "", p.skip()
	}
	p.i++
	var sb strings.Builder
	b := p.b
	from := p.i // of the bytes not yet decoded
	ascii := uint64(highs)
	if p.utf8 {
		ascii = 0 // any byte past ASCII is part of a valid sequence
	}
	for {
		// To the first byte that is not plain, eight at a time.
		for p.i+8 <= len(b) {
			if m := special8(binary.LittleEndian.Uint64(b[p.i:]), ascii); m != 0 {
				p.i += bits.TrailingZeros64(m) >> 3
				break
			}
			p.i += 8
		}
		if p.i >= len(b) {
			return "", false
		}
		switch c := b[p.i]; {
		case c == '"':
			if decode {
				sb.Write(b[from:p.i])
			}
			p.i++
			return sb.String(), true
		case c == '\\' && !decode && p.i+1 < len(b) && simpleEscape[b[p.i+1]]:
			p.i += 2
		case c == '\\':
			if decode {
				sb.Write(b[from:p.i])
			}
			r, ok := p.escape()
			if !ok {
				return "", false
			}
			if decode {
				sb.WriteRune(r) // a lone surrogate becomes U+FFFD
			}
			from = p.i
		case c == 0:
			return "", false
		case c < 0x80 || p.utf8:
			p.i++
		default:
			n, ok := utf8Len(b[p.i:])
			if !ok {
				return "", false
			}
			p.i += n
		}
	}
}

// skip reads a string whose value is not wanted (p.i at its quote), 64
// bytes at a time (scan64): only its quotes, backslashes and NULs, and in
// a line that is not all UTF-8 its bytes past ASCII, are looked at one by
// one, as str looks at them.
func (p *jsonParser) skip() bool {
	b := p.b
	p.i++
	var high uint64
	if !p.utf8 {
		high = ^uint64(0)
	}
	// Most strings are short (keys, numbers as text): their first words
	// are read as str reads them, and only a longer string goes on to
	// the 64-byte reading, whose setup costs more than a word's.
	for range 3 {
		if p.i+8 > len(b) {
			break
		}
		m := special8(binary.LittleEndian.Uint64(b[p.i:]), high&highs)
		if m == 0 {
			p.i += 8
			continue
		}
		if at := p.i + bits.TrailingZeros64(m)>>3; b[at] == '"' {
			p.i = at + 1
			return true
		}
		break
	}
	if p.utf8 {
		for len(b)-p.i >= 64 {
			pos, status := skipString(&b[p.i], len(b)-p.i)
			p.i += pos
			switch status {
			case strEnd:
				return true
			case strRefused:
				return false
			case strEscapeU:
				if escapeLen(b[p.i:]) == 0 {
					return false
				}
				p.i += 6
			}
		}
	}
	for {
		base := p.i
		var m uint64
		if len(b)-base >= 64 && !p.utf8 {
			off, mm := scan64(&b[base], len(b)-base, high)
			base, m = base+off, mm
		}
		full := len(b)-base >= 64
		if m == 0 {
			if full {
				panic("ooniuid: scan64 stopped at a plain chunk")
			}
			m = tailMask(b[base:], high)
		}
		next := base + 64
		for m != 0 {
			at := base + bits.TrailingZeros64(m)
			var n int
			switch c := b[at]; {
			case c == '"':
				p.i = at + 1
				return true
			case c == '\\':
				n = escapeLen(b[at:])
			case c == 0:
			default:
				n, _ = utf8Len(b[at:])
			}
			if n == 0 {
				return false
			}
			if at+n >= next {
				next = at + n
				break
			}
			m &= ^uint64(0) << (at + n - base)
		}
		if !full {
			return false // the line ends inside the string
		}
		p.i = next
	}
}

// What skipString says of where it stopped.
const (
	strEnd = iota
	strRefused
	strShort
	strEscapeU
)

// tailMask is scan64's mask of b, fewer than 64 bytes.
func tailMask(b []byte, high uint64) uint64 {
	var m uint64
	for j, c := range b {
		if c == '"' || c == '\\' || c == 0 || c >= 0x80 && high != 0 {
			m |= 1 << j
		}
	}
	return m
}

// escapeLen is the length of the escape b starts with (a backslash), 0
// when ujson refuses it.
func escapeLen(b []byte) int {
	switch {
	case len(b) < 2:
		return 0
	case simpleEscape[b[1]]:
		return 2
	case b[1] != 'u' || len(b) < 6:
		return 0
	}
	for _, c := range b[2:6] {
		if _, ok := hexDigit(c); !ok {
			return 0
		}
	}
	return 6
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special8 has the high bit of the first byte of w (in memory order)
// that is a quote, a backslash or a NUL, or, with ascii set to highs,
// past ASCII, set as its lowest bit; 0 when there is none. (The zero-byte
// test may also flag bytes after the first, never before it.)
func special8(w, ascii uint64) uint64 {
	q, bs := w^(ones*'"'), w^(ones*'\\')
	return w&ascii | ((w-ones)&^w|(q-ones)&^q|(bs-ones)&^bs)&highs
}

// simpleEscape are the bytes that may follow a backslash but u.
var simpleEscape = [256]bool{'"': true, '\\': true, '/': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

// escape reads the escape at p.i (a backslash) and returns its rune.
func (p *jsonParser) escape() (rune, bool) {
	if p.i+1 >= len(p.b) {
		return 0, false
	}
	e := p.b[p.i+1]
	p.i += 2
	switch e {
	case '"', '\\', '/':
		return rune(e), true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	case 'u':
		r, ok := p.hex4()
		if !ok {
			return 0, false
		}
		if utf16.IsSurrogate(r) && r < 0xdc00 && p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
			save := p.i
			p.i += 2
			if lo, ok := p.hex4(); ok && lo >= 0xdc00 && lo <= 0xdfff {
				return utf16.DecodeRune(r, lo), true
			}
			p.i = save
		}
		return r, true
	}
	return 0, false
}

func (p *jsonParser) hex4() (rune, bool) {
	if p.i+4 > len(p.b) {
		return 0, false
	}
	var v rune
	for _, c := range p.b[p.i : p.i+4] {
		d, ok := hexDigit(c)
		if !ok {
			return 0, false
		}
		v = v<<4 | d
	}
	p.i += 4
	return v, true
}

func hexDigit(c byte) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0'), true
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}

// utf8Len is the length of the UTF-8 sequence b starts with, as ujson
// takes it: well formed but for UTF-8-encoded surrogates, which it keeps.
func utf8Len(b []byte) (int, bool) {
	c := b[0]
	n := leadLen(c)
	if n == 0 || len(b) < n {
		return 0, false
	}
	r := rune(c) & (0x7f >> n)
	for _, x := range b[1:n] {
		if x&0xc0 != 0x80 {
			return 0, false
		}
		r = r<<6 | rune(x&0x3f)
	}
	if r < leastRune[n] || r > utf8.MaxRune {
		return 0, false
	}
	return n, true
}

// leastRune is the least rune a sequence of each length writes: a less
// one is an overlong form.
var leastRune = [5]rune{2: 0x80, 3: 0x800, 4: 0x10000}

// leadLen is the length of the UTF-8 sequence c begins, 0 when c begins
// none.
func leadLen(c byte) int {
	switch {
	case c&0xe0 == 0xc0:
		return 2
	case c&0xf0 == 0xe0:
		return 3
	case c&0xf8 == 0xf0:
		return 4
	}
	return 0
}
