package ooniuid_test

import (
	"testing"

	"github.com/backfill-dev/backfill/pipeline/ooniuid"
)

// JSONDate and Date never panic, whatever the bytes, and a date is
// NoDate or eight digits (or seven, a year below 1000 as strftime writes it).
func FuzzJSONDate(f *testing.F) {
	for _, s := range []string{`{"measurement_start_time": "2017-06-01 10:11:12"}`, `{"a": [1, {"b": "\ud800"}], "measurement_start_time": "２０１７-6- 1\u00a01:2:3"}`,
		`{"a": -Infinity, "b": 01.e5}`, `{"measurement_start_time": "0999-01-01 00:00:00"}`, "{\"a\": \"\xed\xa0\x80\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		date, ok := ooniuid.JSONDate(b)
		if ok && date != ooniuid.NoDate && len(date) != 8 && len(date) != 7 {
			t.Fatalf("%q: date %q", b, date)
		}
		_ = ooniuid.Date(string(b))
	})
}
