package ooniuid_test

import (
	"fmt"
	"testing"

	"github.com/backfill-dev/backfill/pipeline/ooniuid"
)

// TestDate_CanonicalSameAsFull holds Date's short reading of
// "YYYY-MM-DD HH:MM:SS" to the full reading of Python's expression, over
// every month and day around their bounds, leap years and not, and the
// times at and past theirs.
func TestDate_CanonicalSameAsFull(t *testing.T) {
	check := func(s string) {
		t.Helper()
		if got, want := ooniuid.Date(s), ooniuid.FullDate(s); got != want {
			t.Errorf("Date(%q) = %q, the full reading gives %q", s, got, want)
		}
	}
	for _, y := range []string{"0000", "0999", "1000", "1900", "2000", "2016", "2017", "2100", "9999"} {
		for m := 0; m <= 13; m++ {
			for d := 0; d <= 32; d++ {
				check(fmt.Sprintf("%s-%02d-%02d 10:11:12", y, m, d))
			}
		}
	}
	for _, hms := range []string{"00:00:00", "23:59:59", "24:00:00", "23:60:00", "23:59:60", "23:59:61", "99:99:99"} {
		check("2017-06-01 " + hms)
	}
	for _, s := range []string{
		"2017-06-01T10:11:12", "2017-06-01  10:11:12", "2017/06/01 10:11:12", "2017-6-01 10:11:12",
		"2017-06-01 10:11:1x", "２０１７-06-01 10:11:12", "2017-06-01 10:11:12 ", " 2017-06-01 10:11:1",
	} {
		check(s)
	}
	if got := ooniuid.Date("2016-02-29 23:59:59"); got != "20160229" {
		t.Errorf("a leap day reads as %q", got)
	}
	if got := ooniuid.Date("2017-02-29 00:00:00"); got != ooniuid.NoDate {
		t.Errorf("the 29th of February 2017 reads as %q", got)
	}
}
