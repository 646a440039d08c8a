package cmr

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Cumulus normalises each temporal value with JavaScript's
// new Date(v).toISOString(), on a process whose time zone is UTC. This file
// gives the same answers for the date-time strings CMR files hold: the
// ISO 8601 forms that V8 reads (its ES5 parser and the ISO-like forms its
// legacy parser takes), which a differential test compares with Node.

// maxTime is the ECMAScript time value range, in milliseconds either side
// of the epoch.
const maxTime = 8.64e15

// ErrDate is the error of a value that is not a date JavaScript can read
// (new Date(v) is an Invalid Date, so toISOString throws).
var ErrDate = errors.New("not a valid date")

// parseJSDate returns the milliseconds since the epoch that new Date(s)
// holds, for s of the forms
//
//	YYYY | ±YYYYYY  [-MM]                              (UTC)
//	YYYY-MM-DD | ±YYYYYY-MM-DD                         (UTC)
//	date (T|t) HH:mm [:ss [.fraction]] [Z | z | ±HH:mm | ±HHmm]
//	date space HH:mm [:ss [.fraction]] [zone]          (years 1000-9999)
//
// A time without a zone is read as UTC (Cumulus runs in UTC). Days 29 to
// 31 past a month's end roll into the next month and 24:00 is the next
// day's midnight, as in V8. Other strings V8's legacy parser reads
// (2019/01/01, RFC 1123 dates, one-digit fields, a zone without a time,
// two-digit years after a space) are errors here rather than guesses.
func parseJSDate(s string) (int64, error) {
	p := dateParser{s: s}
	ms, ok := p.parse()
	if !ok {
		return 0, fmt.Errorf("%q: %w", s, ErrDate)
	}
	return ms, nil
}

type dateParser struct {
	s string
	i int
}

func (p *dateParser) digits(n int) (int, bool) {
	if p.i+n > len(p.s) {
		return 0, false
	}
	v := 0
	for _, c := range []byte(p.s[p.i : p.i+n]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	p.i += n
	return v, true
}

func (p *dateParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *dateParser) eat(c byte) bool {
	if p.peek() == c {
		p.i++
		return true
	}
	return false
}

func (p *dateParser) parse() (int64, bool) {
	var year int
	var ok bool
	switch c := p.peek(); c {
	case '+', '-':
		p.i++
		if year, ok = p.digits(6); !ok || (c == '-' && year == 0) {
			return 0, false
		}
		if c == '-' {
			year = -year
		}
	default:
		if year, ok = p.digits(4); !ok {
			return 0, false
		}
	}
	month, day, full := 1, 1, false
	if p.eat('-') {
		if month, ok = p.digits(2); !ok || month < 1 || month > 12 {
			return 0, false
		}
		if p.eat('-') {
			if day, ok = p.digits(2); !ok || day < 1 || day > 31 {
				return 0, false
			}
			full = true
		}
	}
	var hour, min, sec, ms int
	timed := false
	// V8 reads a space-separated form with its legacy parser, which takes
	// years below 100 as 19xx or 20xx: only four-digit years from 1000.
	if c := p.peek(); full && (c == 'T' || c == 't' || (c == ' ' && year >= 1000 && p.s[0] != '+' && p.s[0] != '-')) {
		timed = true
		p.i++
		if hour, ok = p.digits(2); !ok || !p.eat(':') {
			return 0, false
		}
		if min, ok = p.digits(2); !ok {
			return 0, false
		}
		if p.eat(':') {
			if sec, ok = p.digits(2); !ok {
				return 0, false
			}
			if p.eat('.') {
				n := 0
				for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
					if n < 3 {
						ms = ms*10 + int(p.s[p.i]-'0')
					}
					n++
					p.i++
				}
				if n == 0 {
					return 0, false
				}
				for ; n < 3; n++ {
					ms *= 10
				}
			}
		}
		if hour > 24 || min > 59 || sec > 59 || (hour == 24 && (min > 0 || sec > 0 || ms > 0)) {
			return 0, false
		}
	}
	offset := 0 // minutes east of UTC
	switch c := p.peek(); {
	case !timed:
	case c == 'Z' || c == 'z':
		p.i++
	case c == '+' || c == '-':
		p.i++
		oh, ok := p.digits(2)
		if !ok {
			return 0, false
		}
		p.eat(':')
		om, ok := p.digits(2)
		if !ok || oh > 23 || om > 59 {
			return 0, false
		}
		offset = oh*60 + om
		if c == '-' {
			offset = -offset
		}
	}
	if p.i != len(p.s) {
		return 0, false
	}
	days := daysFromCivil(year, month, 1) + int64(day-1)
	t := ((days*24+int64(hour))*60+int64(min)-int64(offset))*60 + int64(sec)
	t = t*1000 + int64(ms)
	if math.Abs(float64(t)) > maxTime {
		return 0, false
	}
	return t, true
}

// daysFromCivil is the number of days from 1970-01-01 to y-m-d in the
// proleptic Gregorian calendar.
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

// formatISO is Date.prototype.toISOString of a time value in range.
func formatISO(ms int64) string {
	t := time.UnixMilli(ms).UTC()
	y := t.Year()
	var b strings.Builder
	switch {
	case y >= 0 && y <= 9999:
		fmt.Fprintf(&b, "%04d", y)
	case y < 0:
		fmt.Fprintf(&b, "-%06d", -y)
	default:
		fmt.Fprintf(&b, "+%06d", y)
	}
	fmt.Fprintf(&b, "-%02d-%02dT%02d:%02d:%02d.%03dZ", t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond()/1e6)
	return b.String()
}

// jsNumberTime is new Date(n) for a number: the value truncated toward
// zero, in range.
func jsNumberTime(n float64) (int64, bool) {
	if math.IsNaN(n) || math.IsInf(n, 0) || math.Abs(n) > maxTime {
		return 0, false
	}
	return int64(math.Trunc(n)), true
}

// ParseDate is new Date(s).getTime() for a string s, in UTC; an Invalid
// Date is an error.
func ParseDate(s string) (int64, error) { return parseJSDate(s) }

// NumberDate is new Date(n).getTime(); false for an Invalid Date.
func NumberDate(n float64) (int64, bool) { return jsNumberTime(n) }

// FormatISO is Date.prototype.toISOString of the time ms.
func FormatISO(ms int64) string { return formatISO(ms) }
