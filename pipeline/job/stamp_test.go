package job_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/job"
)

// A container replaced by other bytes of the same size, its modification
// time set back (cp -p, rsync -t, touch -r), is another input: --resume
// runs its bucket again and skips the others.
func TestResume_ReplacedWithTimesKept(t *testing.T) {
	in := genColliding(t, 3)
	out := t.TempDir()
	first, err := runNarrow(t, job.Config{In: store.Local(in)}, out)
	testutil.Check(t, err)
	buckets, _ := filepath.Glob(filepath.Join(in, "20*"))
	if len(buckets) < 2 {
		t.Fatalf("the corpus has %d buckets", len(buckets))
	}
	cans, _ := filepath.Glob(filepath.Join(buckets[0], "*.lz4"))
	if len(cans) == 0 {
		t.Fatalf("no container in %s", buckets[0])
	}
	can := cans[0]
	info, err := os.Stat(can)
	testutil.Check(t, err)
	b, err := os.ReadFile(can)
	testutil.Check(t, err)
	b[len(b)/2] ^= 0xff // other bytes, the same size
	testutil.Check(t, os.WriteFile(can+".new", b, info.Mode()))
	testutil.Check(t, os.Rename(can+".new", can))
	testutil.Check(t, os.Chtimes(can, info.ModTime(), info.ModTime()))

	sum, err := runNarrow(t, job.Config{In: store.Local(in), Resume: true}, out)
	if err != nil && !strings.Contains(err.Error(), "reject") {
		t.Fatal(err)
	}
	if sum.Buckets != 1 || sum.Skipped != first.Buckets-1 {
		t.Errorf("--resume after %s was replaced with its size and time kept: %d buckets run, %d skipped; want 1 and %d", can, sum.Buckets, sum.Skipped, first.Buckets-1)
	}
}
