package bench

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
)

// realShape generates (once, cached) a corpus of the real one's shape:
// 8 buckets of 9,600 reports of about 40 small measurements each (the
// real corpus: 147 M measurements in 3.6 M reports, most of them small).
func realShape(b *testing.B) string {
	b.Helper()
	dir := filepath.Join(*benchDir, "real-shape")
	if _, err := os.Stat(filepath.Join(dir, "ground-truth.jsonl")); err == nil {
		return dir
	}
	os.RemoveAll(dir)
	out, err := exec.Command(binary(b), "gen", "--out", dir, "--seed", "11", "--buckets", "8", "--reports", "9600",
		"--min-measurements", "12", "--max-measurements", "400", "--max-template", "1KiB").CombinedOutput()
	if err != nil {
		b.Fatalf("gen: %v\n%s", err, out)
	}
	return dir
}

// idsFile writes the IDs of the corpus (from a Parquet run) as the CSV
// rows ooid,report,ndx of the baseline table, sorted by ooid (the order of
// the primary key: the server's best case), in a folder the server can
// read, and returns its path and row count.
func idsFile(b *testing.B, dir string) (string, int64) {
	b.Helper()
	out := b.TempDir()
	if _, err := exec.Command(binary(b), "run", "--in", dir, "-q", "--out", out).Output(); err != nil {
		b.Fatalf("run: %v", err)
	}
	tmp, err := os.MkdirTemp("", "backfill-bench-ids-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(tmp) })
	os.Chmod(tmp, 0o755) // the server reads the file as its own user
	path := filepath.Join(tmp, "ids.csv")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	files, _ := filepath.Glob(filepath.Join(out, "measurements", "*.parquet"))
	var all [][3]int64
	report, last := -1, ""
	for _, p := range files {
		ms, err := parquetfile.ReadMeasurements(context.Background(), store.Local(filepath.Dir(p)), filepath.Base(p))
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range ms {
			if m.Textname != last {
				report, last = report+1, m.Textname
			}
			all = append(all, [3]int64{int64(m.OOID), int64(report), int64(m.Ndx)})
		}
	}
	slices.SortFunc(all, func(x, y [3]int64) int { return cmp.Compare(x[0], y[0]) })
	for _, r := range all {
		fmt.Fprintf(w, "%d,%d,%d\n", r[0], r[1], r[2])
	}
	rows := int64(len(all))
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Chmod(0o644)
	return path, rows
}

// BenchmarkRunPostgresShape loads a corpus of the real one's shape with
// backfill run --sink postgres, per bucket (over 2 connections, the
// default, and over 1), with --bulk, and as two processes loading half of
// the buckets each into one schema, each into a new database. Every load
// is paired with the server's own COPY … FROM of a CSV file of the IDs
// alone, sorted by ooid, into (ooid bigint primary key, report int, ndx
// int) just before it, so a noisy machine moves both alike:
// pct_of_server_copy is the median over the pairs of the baseline's time
// over the load's (the targets are 90 per bucket and 100 with --bulk);
// min_pct and max_pct bound it. Each timed step starts clean: the database
// of the step before is dropped and the server checkpoints, so neither
// side's autovacuum of the rows it just wrote, nor its dirty pages, run in
// the other's time. Run it with -benchtime 3x for three pairs.
func BenchmarkRunPostgresShape(b *testing.B) {
	dir := realShape(b)
	admin := pgtest.AdminURL(b)
	ids, rows := idsFile(b, dir)
	fresh := func(b *testing.B) (string, func()) { return freshDatabase(b, admin) }
	serverCopy := func(b *testing.B) time.Duration {
		dsn, done := fresh(b)
		defer done()
		c := pgtest.Connect(b, dsn)
		defer c.Close(context.Background())
		ctx := context.Background()
		if _, err := c.Exec(ctx, `CREATE TABLE ids (ooid bigint PRIMARY KEY, report int, ndx int)`); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := c.Exec(ctx, `COPY ids FROM '`+ids+`' (FORMAT csv)`); err != nil {
			b.Fatalf("the server cannot read the baseline file (it must run on this machine): %v", err)
		}
		return time.Since(start)
	}
	runInto := func(b *testing.B, args ...string) time.Duration {
		dsn, done := fresh(b)
		defer done()
		args = append([]string{"run", "--in", dir, "-q", "--workers", "2", "--sink", "postgres", "--create-schema", "--dsn", dsn}, args...)
		d, _ := run(b, "", binary(b), args...)
		return d
	}
	load := map[string]func(b *testing.B) time.Duration{
		"per-bucket": func(b *testing.B) time.Duration { return runInto(b) },
		// One connection: buckets commit one at a time, as before
		// --connections.
		"per-bucket-1-connection": func(b *testing.B) time.Duration { return runInto(b, "--connections", "1") },
		"bulk":                    func(b *testing.B) time.Duration { return runInto(b, "--bulk") },
		// Two processes, each committing two buckets at once: the server
		// COPYs for all of them, and their reading overlaps.
		"per-bucket-2-processes": func(b *testing.B) time.Duration {
			dsn, done := fresh(b)
			defer done()
			if out, err := exec.Command(binary(b), "schema", "--dsn", dsn).CombinedOutput(); err != nil {
				b.Fatalf("schema: %v\n%s", err, out)
			}
			buckets, _ := filepath.Glob(filepath.Join(dir, "20*"))
			start := time.Now()
			var cmds []*exec.Cmd
			for half := range 2 {
				args := []string{"run", "--in", dir, "-q", "--workers", "1", "--sink", "postgres", "--dsn", dsn}
				for i, bk := range buckets {
					if i%2 == half {
						args = append(args, filepath.Base(bk))
					}
				}
				cmd := exec.Command(binary(b), args...)
				cmd.Stderr = os.Stderr
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				cmds = append(cmds, cmd)
			}
			for _, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					b.Fatalf("run: %v", err)
				}
			}
			return time.Since(start)
		},
	}
	for _, mode := range []string{"per-bucket", "per-bucket-1-connection", "bulk", "per-bucket-2-processes"} {
		b.Run("impl=backfill/"+mode, func(b *testing.B) {
			var total, baseTotal time.Duration
			var pct []float64
			for b.Loop() {
				base := serverCopy(b)
				d := load[mode](b)
				total, baseTotal = total+d, baseTotal+base
				pct = append(pct, 100*base.Seconds()/d.Seconds())
			}
			slices.Sort(pct)
			b.ReportMetric((total / time.Duration(b.N)).Seconds(), "s")
			b.ReportMetric((baseTotal / time.Duration(b.N)).Seconds(), "server_copy_s")
			b.ReportMetric(float64(rows)/(total/time.Duration(b.N)).Seconds(), "rows/s")
			b.ReportMetric(pct[len(pct)/2], "pct_of_server_copy")
			b.ReportMetric(pct[0], "min_pct")
			b.ReportMetric(pct[len(pct)-1], "max_pct")
		})
	}
}
