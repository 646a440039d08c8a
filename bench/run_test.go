package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/testutil"
)

// corpus generates (once, cached) a clean canned corpus of 4 buckets;
// scale multiplies the reports per bucket. Scale 1 is about 1.3 GB
// uncompressed. A tenth of each measurement's values are redrawn (gen
// --varied 0.1), so that its containers compress 5.4-fold with lz4 -5, as
// text does, instead of 8-fold as the samples repeated do.
func corpus(b *testing.B, scale int) string {
	b.Helper()
	dir := filepath.Join(*benchDir, fmt.Sprintf("corpus-varied-x%d", scale))
	if _, err := os.Stat(filepath.Join(dir, "ground-truth.jsonl")); err == nil {
		return dir
	}
	os.RemoveAll(dir)
	out, err := exec.Command(binary(b), "gen", "--out", dir, "--seed", "7", "--buckets", "4",
		"--reports", strconv.Itoa(700*scale), "--max-measurements", "20000", "--varied", "0.1").CombinedOutput()
	if err != nil {
		b.Fatalf("gen: %v\n%s", err, out)
	}
	return dir
}

// lz4Baseline decompresses every container with the lz4 CLI to /dev/null,
// one process per core at a time: the physical floor of a run.
func lz4Baseline(b *testing.B, dir string) time.Duration {
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.lz4"))
	if len(files) == 0 {
		b.Fatal("no containers")
	}
	list := filepath.Join(b.TempDir(), "files")
	testutil.Check(b, os.WriteFile(list, []byte(strings.Join(files, "\n")+"\n"), 0o644))
	start := time.Now()
	cmd := exec.Command("sh", "-c", `xargs -P 2 -n 1 sh -c 'lz4 -dc "$0" > /dev/null' < `+list)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

type runSummary struct {
	Measurements int64 `json:"measurements"`
	BytesOut     int64 `json:"bytes_out"`
	DeadLetters  int64 `json:"dead_letters"`
}

// BenchmarkRun runs backfill run over a generated corpus with 1 and 2
// workers, beside the lz4 CLI decompressing the same containers on both
// cores; it reports MB/s of uncompressed input, measurements/s, the share
// of the lz4 baseline's throughput, and peak RSS. scale=4 is a corpus four
// times larger, for the memory bound.
func BenchmarkRun(b *testing.B) {
	if _, err := exec.LookPath("lz4"); err != nil {
		b.Fatal("the lz4 CLI is needed for the baseline")
	}
	for _, scale := range []int{1, 4} {
		dir := corpus(b, scale)
		var base time.Duration
		b.Run(fmt.Sprintf("impl=lz4-cli/procs=2/scale=%d", scale), func(b *testing.B) {
			for b.Loop() {
				base = lz4Baseline(b, dir)
			}
			b.ReportMetric(base.Seconds(), "s")
		})
		for _, v := range []struct {
			workers int
			sha1    bool
		}{{1, false}, {2, false}, {2, true}} {
			workers := v.workers
			if scale > 1 && (workers == 1 || v.sha1) {
				continue
			}
			args := []string{"run", "--in", dir, "-q", "--json", "--workers", strconv.Itoa(workers)}
			if v.sha1 {
				args = append(args, "--verify-sha1")
			}
			b.Run(fmt.Sprintf("impl=backfill/workers=%d/sha1=%v/scale=%d", workers, v.sha1, scale), func(b *testing.B) {
				benchRun(b, args, base)
			})
		}
	}
}

// benchRun times backfill run with args (an output folder added) and
// reports MB/s of decompressed input, measurements/s, the share of the
// lz4 baseline's throughput (base, when measured) and peak RSS.
func benchRun(b *testing.B, args []string, base time.Duration) {
	var total time.Duration
	var rss int64
	var sum runSummary
	for b.Loop() {
		out := b.TempDir()
		var stdout bytes.Buffer
		d, r := timed(b, "", &stdout, binary(b), append(args, "--out", out)...)
		total += d
		rss = max(rss, r)
		if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil || sum.DeadLetters != 0 {
			b.Fatalf("summary %s: %v", stdout.Bytes(), err)
		}
	}
	secs := total.Seconds() / float64(b.N)
	b.ReportMetric(float64(sum.BytesOut)/secs/1e6, "MB/s")
	b.ReportMetric(float64(sum.Measurements)/secs, "measurements/s")
	b.ReportMetric(float64(sum.BytesOut)/1e9, "GB_in")
	b.ReportMetric(float64(rss)/(1<<20), "maxrss_MiB")
	if base > 0 {
		b.ReportMetric(100*base.Seconds()/secs, "pct_of_lz4")
	}
}

// autoclavedCorpus generates (once, cached) the scale-1 corpus in both
// forms, and returns the folders of its autoclaved form (the same reports,
// in frame chains with their index) and of its canned form.
func autoclavedCorpus(b *testing.B) (auto, canned string) {
	b.Helper()
	dir := filepath.Join(*benchDir, "corpus-both-x1")
	auto, canned = filepath.Join(dir, "autoclaved"), filepath.Join(dir, "canned")
	if _, err := os.Stat(filepath.Join(auto, "ground-truth.jsonl")); err == nil {
		return auto, canned
	}
	os.RemoveAll(dir)
	out, err := exec.Command(binary(b), "gen", "--format", "both", "--out", dir, "--seed", "7", "--buckets", "4",
		"--reports", "700", "--max-measurements", "20000").CombinedOutput()
	if err != nil {
		b.Fatalf("gen: %v\n%s", err, out)
	}
	return auto, canned
}

// BenchmarkRunAutoclaved runs backfill run over the autoclaved form of the
// scale-1 corpus: the data path (every frame decompressed, every datum
// checked against the index) beside the lz4 CLI decompressing the same
// files on both cores, and --from-index, which reads the indexes only.
// The canned check (--canned) reads the canned form besides: it is timed
// beside a plain run over that canned form, its baseline.
func BenchmarkRunAutoclaved(b *testing.B) {
	if _, err := exec.LookPath("lz4"); err != nil {
		b.Fatal("the lz4 CLI is needed for the baseline")
	}
	dir, canned := autoclavedCorpus(b)
	var base time.Duration
	b.Run("impl=lz4-cli/procs=2", func(b *testing.B) {
		for b.Loop() {
			base = lz4Baseline(b, dir)
		}
		b.ReportMetric(base.Seconds(), "s")
	})
	b.Run("impl=backfill/data/workers=2", func(b *testing.B) {
		benchRun(b, []string{"run", "--in", dir, "-q", "--json", "--workers", "2"}, base)
	})
	b.Run("impl=backfill/from-index/workers=2", func(b *testing.B) {
		benchRun(b, []string{"run", "--in", dir, "-q", "--json", "--workers", "2", "--from-index"}, 0)
	})
	b.Run("impl=backfill/canned-form/workers=2", func(b *testing.B) {
		benchRun(b, []string{"run", "--in", canned, "-q", "--json", "--workers", "2"}, 0)
	})
	b.Run("impl=backfill/canned-form+verify/workers=2", func(b *testing.B) {
		benchRun(b, []string{"run", "--in", canned, "-q", "--json", "--workers", "2", "--verify"}, 0)
	})
	b.Run("impl=backfill/from-index+canned-check/workers=2", func(b *testing.B) {
		benchRun(b, []string{"run", "--in", dir, "-q", "--json", "--workers", "2", "--from-index", "--canned", canned}, 0)
	})
}

// BenchmarkRunPostgres runs backfill run over the scale-1 corpus into
// PostgreSQL, per bucket and with --bulk, each into a new database, beside
// the Parquet run of the same corpus in the same iteration; it reports
// measurements/s and the share of the Parquet run's throughput.
func BenchmarkRunPostgres(b *testing.B) {
	dir := corpus(b, 1)
	admin := pgtest.AdminURL(b)
	var parquet time.Duration
	b.Run("sink=parquet/workers=2", func(b *testing.B) {
		for b.Loop() {
			d, _ := timed(b, "", nil, binary(b), "run", "--in", dir, "-q", "--workers", "2", "--out", b.TempDir())
			parquet += d
		}
		parquet /= time.Duration(b.N)
		b.ReportMetric(parquet.Seconds(), "s")
	})
	for _, mode := range []string{"per-bucket", "bulk"} {
		b.Run("sink=postgres/"+mode+"/workers=2", func(b *testing.B) {
			var total time.Duration
			var rss int64
			var sum runSummary
			for b.Loop() {
				args := []string{"run", "--in", dir, "-q", "--json", "--workers", "2", "--sink", "postgres", "--create-schema",
					"--dsn", pgtest.CreateDatabase(b, admin)}
				if mode == "bulk" {
					args = append(args, "--bulk")
				}
				var stdout bytes.Buffer
				d, r := timed(b, "", &stdout, binary(b), args...)
				total += d
				rss = max(rss, r)
				if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil || sum.DeadLetters != 0 {
					b.Fatalf("summary %s: %v", stdout.Bytes(), err)
				}
			}
			secs := total.Seconds() / float64(b.N)
			b.ReportMetric(float64(sum.Measurements)/secs, "measurements/s")
			b.ReportMetric(float64(rss)/(1<<20), "maxrss_MiB")
			if parquet > 0 {
				b.ReportMetric(100*parquet.Seconds()/secs, "pct_of_parquet")
			}
		})
	}
}
