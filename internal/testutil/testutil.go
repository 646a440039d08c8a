// Package testutil holds the helpers the tests of several packages share.
// Only tests import it.
package testutil

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"syscall"
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

// EnvStrict, when set (.ci/run sets it), turns the skips of tests that
// cannot run on this machine into failures: CI must run them all.
const EnvStrict = "BACKFILL_TEST_STRICT"

// NeedRoot skips t when the process is not root, or fails it under
// EnvStrict; what says what needs root.
func NeedRoot(t testing.TB, what string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv(EnvStrict) != "" {
		t.Fatalf("%s needs root, and %s is set: CI must run this test as root", what, EnvStrict)
	}
	t.Skipf("%s needs root (CI runs as root)", what)
}

// Must returns v, and panics on err: for a value a test builds from its
// own constants (a URL, a plan), where an error is a bug of the test.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// ExitCode is the exit status of a command's Wait or Run error: 0 for
// none, -N for a process ended by signal N, -1000 for an error that is no
// exit (the command did not start).
func ExitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return -1000
	}
	return 0
}

// Run runs cmd and returns its exit status (ExitCode) and standard error;
// it fails t when cmd does not start.
func Run(t testing.TB, cmd *exec.Cmd) (int, string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	code := ExitCode(cmd.Run())
	if code == -1000 {
		t.Fatalf("%s: did not run\n%s", cmd, stderr.String())
	}
	return code, stderr.String()
}
