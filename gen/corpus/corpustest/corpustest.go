// Package corpustest holds the helpers the tests of several packages use
// to make a synthetic corpus and read its ground truth. Only tests import
// it.
package corpustest

import (
	"testing"

	"github.com/backfill-dev/backfill/gen/corpus"
)

// Generate writes the corpus of cfg into a new temporary folder, and
// returns the folder.
func Generate(t testing.TB, cfg corpus.Config) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := corpus.Generate(dir, cfg); err != nil {
		t.Fatal(err)
	}
	return dir
}

// ReadTruth reads the ground truth of the corpus in dir.
func ReadTruth(t testing.TB, dir string) []corpus.Truth {
	t.Helper()
	truth, err := corpus.ReadTruth(dir)
	if err != nil {
		t.Fatal(err)
	}
	return truth
}
