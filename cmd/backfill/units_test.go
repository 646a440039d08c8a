package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/pipeline/job"
)

// One system of units: the periodic progress line, like the summary, says
// binary units (KiB, MiB) and which bytes it counts (the compressed input).
func TestProgressLine_Units(t *testing.T) {
	var w bytes.Buffer
	p := newProgress(&w)
	p.start = time.Now().Add(-10 * time.Second)
	p.p = job.Progress{Buckets: 1, BucketsTotal: 3, BytesIn: 3 << 20, BytesTotal: 9 << 20, Measurements: 1000}
	p.line()
	want := "backfill: 1/3 buckets, 3.0 MiB of 9.0 MiB compressed input read ("
	if !strings.HasPrefix(w.String(), want) || !strings.Contains(w.String(), " MiB/s)") {
		t.Errorf("progress line %q, want it to start %q and give MiB/s", w.String(), want)
	}
	var s bytes.Buffer
	printSummary(&s, job.Summary{BytesIn: 3 << 20, BytesOut: 30 << 20, Elapsed: time.Second})
	for _, want := range []string{"read           3.0 MiB compressed, 30.0 MiB decompressed", "MiB/s decompressed"} {
		if !strings.Contains(s.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, s.String())
		}
	}
	if strings.Contains(w.String()+s.String(), " MB") {
		t.Errorf("decimal megabytes in %q", w.String()+s.String())
	}
}

func TestCount_Plural(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{{0, "0 buckets"}, {1, "1 bucket"}, {2, "2 buckets"}} {
		if got := count(tc.n, "bucket", "buckets"); got != tc.want {
			t.Errorf("count(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if got := (&rejectsError{n: 1, what: "inputs", note: "records in x"}).Error(); got != "1 input (records in x) rejected" {
		t.Errorf("one reject: %q", got)
	}
}
