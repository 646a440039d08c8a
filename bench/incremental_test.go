package bench

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"
)

var incremental = flag.Bool("bench.incremental", false, "run BenchmarkIncremental: one bucket into the full-scale Parquet output (the full-scale indexes, 5.1 GiB, and about 1 GB of output)")

// BenchmarkIncremental measures what a run costs beside the output it
// writes into, on the full-scale corpus of docs/full-scale.md as
// autoclaved indexes: the output holds every bucket but one (2,025),
// and each iteration runs that bucket alone into an empty folder, then
// into the output (the daily job), then takes it out of the output again.
// The bucket is a typical recent one: of the last 30, the one whose index
// is of median size.
// The targets: into the output ≤ 3× alone in time and ≤ alone's peak RSS
// + 64 MiB. Then run --resume over the complete output, against the run
// that wrote it: ≤ 0.1.
//
//	make bench-incremental
func BenchmarkIncremental(b *testing.B) {
	if !*incremental {
		b.Skip("needs the full-scale indexes (5.1 GiB) and a run over them: make bench-incremental (-bench.incremental)")
	}
	ix := fullScaleIndexes(b)
	bin := binary(b)
	ents, err := os.ReadDir(ix)
	if err != nil {
		b.Fatal(err)
	}
	var buckets []string
	for _, e := range ents {
		if e.IsDir() {
			buckets = append(buckets, e.Name())
		}
	}
	sort.Strings(buckets)
	// The daily job's bucket: of the last 30, the one of median size.
	recent := slices.Clone(buckets[max(0, len(buckets)-30):])
	size := func(bk string) int64 {
		fi, err := os.Stat(filepath.Join(ix, bk, "index.json.gz"))
		if err != nil {
			b.Fatal(err)
		}
		return fi.Size()
	}
	slices.SortFunc(recent, func(x, y string) int { return cmp.Compare(size(x), size(y)) })
	last := recent[len(recent)/2]
	others := slices.DeleteFunc(slices.Clone(buckets), func(bk string) bool { return bk == last })
	tmp := b.TempDir()
	out := filepath.Join(tmp, "out")
	all := toolStep(b, fmt.Sprintf("run of %d buckets", len(others)), bin, append([]string{"run", "--in", ix, "--from-index", "-q", "--out", out}, others...)...)
	b.Logf("%-40s %s (load %s)", all.name, all.say(), all.load)

	var ratios, extra []float64
	var alone, into step
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		empty := filepath.Join(tmp, fmt.Sprint("alone", i))
		alone = preciseStep(b, "bucket "+last+" alone", bin, "run", "--in", ix, "--from-index", "-q", "--out", empty, last)
		into = preciseStep(b, "bucket "+last+" into the output", bin, "run", "--in", ix, "--from-index", "-q", "--out", out, last)
		ratios = append(ratios, into.wall.Seconds()/alone.wall.Seconds())
		extra = append(extra, float64(into.rss-alone.rss)/(1<<20))
		b.Logf("%-40s %.3fs wall, %.2fs tool CPU, %d MiB (load %s)", alone.name, alone.wall.Seconds(), alone.tool.Seconds(), alone.rss>>20, alone.load)
		b.Logf("%-40s %.3fs wall, %.2fs tool CPU, %d MiB (load %s): %.2f× alone, %+.0f MiB", into.name, into.wall.Seconds(), into.tool.Seconds(), into.rss>>20, into.load, ratios[i], extra[i])
		os.RemoveAll(empty)
		if i < b.N-1 {
			takeOut(b, out, last)
		}
	}
	b.StopTimer()
	resume := toolStep(b, "run --resume over the complete output", bin, "run", "--in", ix, "--from-index", "-q", "--resume", "--out", out)
	b.Logf("%-40s %s (load %s): %.3f of the run of %d buckets", resume.name, resume.say(), resume.load, resume.wall.Seconds()/all.wall.Seconds(), len(others)+1)
	b.ReportMetric(median(ratios), "into_over_alone")
	b.ReportMetric(median(extra), "into_extra_MiB")
	b.ReportMetric(resume.wall.Seconds()/all.wall.Seconds(), "resume_over_full")
	b.ReportMetric(all.wall.Seconds(), "full_s")
}

// preciseStep is toolStep with the wall time measured here, to the
// microsecond (/usr/bin/time says hundredths of a second, too coarse for
// a run of one bucket); it includes starting the two processes.
func preciseStep(b *testing.B, name, bin string, args ...string) step {
	start := time.Now()
	s := toolStep(b, name, bin, args...)
	s.wall = time.Since(start)
	return s
}

// takeOut removes a bucket from a Parquet output, ledger entry first, as
// if it had never been committed.
func takeOut(b *testing.B, out, bucket string) {
	for _, f := range []string{"ledger/" + bucket + ".json", "measurements/" + bucket + ".parquet", "reports/" + bucket + ".parquet", "dead-letters/" + bucket + ".jsonl"} {
		if err := os.Remove(filepath.Join(out, f)); err != nil {
			b.Fatal(err)
		}
	}
}
