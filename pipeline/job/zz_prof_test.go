package job_test

import (
	"testing"

	"github.com/backfill-dev/backfill/pipeline/job"
)

func TestZZProf(t *testing.T) {
	runWith(t, job.Config{In: "/tmp/backfill-bench/corpus-both-x1/autoclaved"})
}
