// Package jobtest holds the checks of a run's summary that the tests of
// several sinks share.
package jobtest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/job"
	"github.com/backfill-dev/backfill/pipeline/sink"
)

// Withdrawn checks a run's withdrawals: some, each of cause, named with
// it, and counted as a reject of the run; then that again, the run after
// it (which withdraws nothing), counts none, and one reject fewer for
// each.
func Withdrawn(t testing.TB, what string, sum job.Summary, cause string, again func() (job.Summary, error)) {
	t.Helper()
	if len(sum.Withdrawn) == 0 {
		t.Fatalf("%s: nothing withdrawn", what)
	}
	for _, w := range sum.Withdrawn {
		if w.Cause != cause || w.N == 0 || !strings.Contains(w.Says(), cause) {
			t.Errorf("%s: withdrawal %+v, want cause %s", what, w, cause)
		}
	}
	if got := sum.RejectsByReason[deadletter.Withdrawn]; got != int64(len(sum.Withdrawn)) {
		t.Errorf("%s: %d withdrawn rejects for %d withdrawals", what, got, len(sum.Withdrawn))
	}
	next, err := again()
	if err != nil || len(next.Withdrawn) != 0 || next.RejectsByReason[deadletter.Withdrawn] != 0 || next.Rejects != sum.Rejects-int64(len(sum.Withdrawn)) {
		t.Errorf("%s: the run after: %v, %d withdrawn, %d rejects (the withdrawing run's %d)", what, err, len(next.Withdrawn), next.Rejects, sum.Rejects)
	}
}

// RemoveContainer removes the first of the containers of bucket in the
// canned input in, which must have two or more.
func RemoveContainer(t testing.TB, in, bucket string) {
	t.Helper()
	cans, _ := filepath.Glob(filepath.Join(in, bucket, "*.tar.lz4"))
	if len(cans) < 2 {
		t.Fatalf("bucket %s has %d containers", bucket, len(cans))
	}
	if err := os.Remove(cans[0]); err != nil {
		t.Fatal(err)
	}
}

// RefusedVanished checks that a run with --no-withdraw was refused for
// writing bucket again without a report it published.
func RefusedVanished(t testing.TB, what string, err error, bucket string) {
	t.Helper()
	var we *sink.WithdrawError
	if !errors.As(err, &we) || we.Withdrawals[0].Cause != sink.CauseVanished || we.Bucket != bucket {
		t.Fatalf("%s: %v, want a refusal of bucket %s, cause %s", what, err, bucket, sink.CauseVanished)
	}
}
