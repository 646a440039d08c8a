// Package testutil holds the helpers the tests of several packages share.
// Only tests import it.
package testutil

import (
	"os/exec"
	"testing"
	"time"
)

// SkipUnderRace skips t when the race detector is on, saying why: a test
// whose work is single-goroutine logic over large inputs, which the plain
// test run covers and the race detector would slow to minutes.
func SkipUnderRace(t testing.TB, why string) {
	t.Helper()
	if RaceEnabled {
		t.Skip(why + "; the plain test run covers it")
	}
}

// NeedTool returns the path of the program name, and fails t, not skips
// it, when there is none: CI installs every reference runtime (what says
// what it is needed for).
func NeedTool(t testing.TB, name, what string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is required for %s (install it; .ci/run does): %v", name, what, err)
	}
	return path
}

// Check fails t at once when err is not nil: for a test's own setup
// (a file written, a row read), which must not fail in silence and leave
// the test testing nothing.
func Check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Eventually reports whether cond holds within d, asking every few
// milliseconds: for a state of another process or server that nothing
// signals (a row committed, a file written), never for a fixed delay.
func Eventually(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
