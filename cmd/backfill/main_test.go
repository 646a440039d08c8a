package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/backfill-dev/backfill/internal/testutil"
)

// binDir holds the binary the tests build, once per package run.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "backfill-test-bin-*")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var (
	buildOnce sync.Once
	builtBin  string
	buildOut  []byte
	buildErr  error
)

// buildBinary returns the binary of this package, built on the first call
// of a package run and shared by every test after it. Under the race
// detector it skips the test: the binary is built without it, so the
// detector would watch only the test's harness, and the plain run (make
// test) runs the test.
func buildBinary(t *testing.T) string {
	t.Helper()
	testutil.SkipUnderRace(t, "a test of the binary, which is built without the race detector")
	buildOnce.Do(func() {
		builtBin = filepath.Join(binDir, "backfill")
		// Without the VCS stamp, the binary says the version the tests'
		// in-process runs say ("(devel)"), in a clone as anywhere: their
		// outputs are compared byte for byte.
		buildOut, buildErr = exec.Command("go", "build", "-buildvcs=false", "-o", builtBin, ".").CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build: %v\n%s", buildErr, buildOut)
	}
	return builtBin
}
