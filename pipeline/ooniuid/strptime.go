package ooniuid

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Date returns the date OONI's trivial_id writes for the value of a
// measurement_start_time: YYYYMMDD when Python's
// datetime.strptime(t, "%Y-%m-%d %H:%M:%S") reads t, else NoDate.
//
// Python compiles that format to a regular expression: %Y is four \d,
// %m "1[0-2]|0[1-9]|[1-9]", %d "3[01]|[12]\d|0[1-9]|[1-9]| [1-9]", %H
// "2[0-3]|[0-1]\d|\d", %M "[0-5]\d|\d", %S "6[0-1]|[0-5]\d|\d", the space
// \s+; it must match the whole string, \d and \s in their Unicode sense
// (a fullwidth year reads), and the fields must make a datetime (no
// 2017-02-29, no second 60). The year is written as strftime does on
// Linux, without padding below 1000.
func Date(t string) string {
	if d, ok := canonicalDate(t); ok {
		return d
	}
	return fullDate(t)
}

// fullDate is Date by Python's expression, in every form it reads.
func fullDate(t string) string {
	var rs []rune
	for i := 0; i < len(t); {
		r, n := utf8.DecodeRuneInString(t[i:])
		rs = append(rs, r)
		i += n
	}
	var f [6]int
	if !match(rs, 0, 0, &f) {
		return NoDate
	}
	y, mo, d, h, mi, s := f[0], f[1], f[2], f[3], f[4], f[5]
	if y < 1 || d > daysIn(y, mo) || h > 23 || mi > 59 || s > 59 {
		return NoDate
	}
	return fmt.Sprintf("%d%02d%02d", y, mo, d)
}

// canonicalDate reads t when it is written as the probes write it,
// "YYYY-MM-DD HH:MM:SS" in ASCII digits, with a year from 1000 and every
// field in its range; false leaves t to the full reading. In that form
// every field's first alternative of two digits matches, so Python's
// expression reads the same fields.
func canonicalDate(t string) (string, bool) {
	if len(t) != 19 || t[4] != '-' || t[7] != '-' || t[10] != ' ' || t[13] != ':' || t[16] != ':' {
		return "", false
	}
	var f [6]int
	for k, at := range [6]int{0, 5, 8, 11, 14, 17} {
		n := 2
		if k == 0 {
			n = 4
		}
		for _, c := range []byte(t[at : at+n]) {
			if c < '0' || c > '9' {
				return "", false
			}
			f[k] = f[k]*10 + int(c-'0')
		}
	}
	y, mo, d, h, mi, s := f[0], f[1], f[2], f[3], f[4], f[5]
	if y < 1000 || mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo) || h > 23 || mi > 59 || s > 59 {
		return "", false
	}
	return t[0:4] + t[5:7] + t[8:10], true
}

func daysIn(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// The fields of the format, in order, and the literal that follows each.
var seps = [6]rune{'-', '-', ' ', ':', ':', 0}

// match tries, in the order Python's regular expression does, every way
// field k and the rest can match rs from i; f gets the first that
// matches the whole.
func match(rs []rune, i, k int, f *[6]int) bool {
	for _, a := range alternatives(rs, i, k) {
		f[k] = a.v
		j := a.end
		switch sep := seps[k]; {
		case sep == 0:
			if j == len(rs) {
				return true
			}
			continue
		case sep == ' ':
			// \s+: greedy, then shorter. The next field starts with a
			// digit, which \s never matches: only the longest run can.
			n := j
			for n < len(rs) && pySpace(rs[n]) {
				n++
			}
			if n > j && match(rs, n, k+1, f) {
				return true
			}
		default:
			if j < len(rs) && rs[j] == sep && match(rs, j+1, k+1, f) {
				return true
			}
		}
	}
	return false
}

type alt struct{ v, end int }

// alternatives are the ways field k matches rs at i, in the regular
// expression's order.
func alternatives(rs []rune, i, k int) []alt {
	at := func(n int) rune {
		if i+n < len(rs) {
			return rs[i+n]
		}
		return -1
	}
	in := func(r rune, lo, hi rune) bool { return r >= lo && r <= hi }
	var out []alt
	two := func(first rune, lo, hi rune, anyDigit bool) { // first, then [lo-hi] or \d
		if at(0) == first && (anyDigit && isDigit(at(1)) || !anyDigit && in(at(1), lo, hi)) {
			out = append(out, alt{int(first-'0')*10 + digit(at(1)), i + 2})
		}
	}
	one := func(lo, hi rune, anyDigit bool) {
		if anyDigit && isDigit(at(0)) || !anyDigit && in(at(0), lo, hi) {
			out = append(out, alt{digit(at(0)), i + 1})
		}
	}
	switch k {
	case 0: // \d\d\d\d
		if isDigit(at(0)) && isDigit(at(1)) && isDigit(at(2)) && isDigit(at(3)) {
			out = append(out, alt{digit(at(0))*1000 + digit(at(1))*100 + digit(at(2))*10 + digit(at(3)), i + 4})
		}
	case 1: // 1[0-2]|0[1-9]|[1-9]
		two('1', '0', '2', false)
		two('0', '1', '9', false)
		one('1', '9', false)
	case 2: // 3[01]|[12]\d|0[1-9]|[1-9]| [1-9]
		two('3', '0', '1', false)
		two('1', 0, 0, true)
		two('2', 0, 0, true)
		two('0', '1', '9', false)
		one('1', '9', false)
		if at(0) == ' ' && in(at(1), '1', '9') {
			out = append(out, alt{digit(at(1)), i + 2})
		}
	case 3: // 2[0-3]|[0-1]\d|\d
		two('2', '0', '3', false)
		two('0', 0, 0, true)
		two('1', 0, 0, true)
		one(0, 0, true)
	case 4: // [0-5]\d|\d
		for _, c := range "012345" {
			two(c, 0, 0, true)
		}
		one(0, 0, true)
	case 5: // 6[0-1]|[0-5]\d|\d
		two('6', '0', '1', false)
		for _, c := range "012345" {
			two(c, 0, 0, true)
		}
		one(0, 0, true)
	}
	return out
}

// isDigit is Python's \d for str: a Unicode decimal digit (Nd).
func isDigit(r rune) bool { return r >= 0 && unicode.IsDigit(r) }

// digit is the value of a decimal digit: Unicode lays each script's
// digits out as ten code points in a row, from its zero.
func digit(r rune) int {
	if r >= '0' && r <= '9' {
		return int(r - '0')
	}
	for _, rg := range unicode.Nd.R16 {
		if r >= rune(rg.Lo) && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if r >= rune(rg.Lo) && r <= rune(rg.Hi) {
			return int(r-rune(rg.Lo)) % 10
		}
	}
	return 0
}

// pySpace is Python's \s for str: str.isspace, which also counts the
// information separators U+001C..U+001F.
func pySpace(r rune) bool { return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f }
