package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/pgtest"
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
// rows ooid,report,ndx of the baseline table, in a folder the server can
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
	var rows int64
	report, last := -1, ""
	for _, p := range files {
		ms, err := parquetfile.ReadMeasurements(p)
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range ms {
			if m.Textname != last {
				report, last = report+1, m.Textname
			}
			fmt.Fprintf(w, "%d,%d,%d\n", m.OOID, report, m.Ndx)
			rows++
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Chmod(0o644)
	return path, rows
}

// BenchmarkRunPostgresShape loads a corpus of the real one's shape with
// backfill run --sink postgres, per bucket and with --bulk, each into a
// new database, beside the server's own COPY … FROM of a CSV file of the
// IDs alone into (ooid bigint primary key, report int, ndx int), in the
// same run: pct_of_server_copy is the share of the baseline's speed
// (the targets are 85 per bucket and 95 with --bulk), and two processes
// loading half of the buckets each.
func BenchmarkRunPostgresShape(b *testing.B) {
	dir := realShape(b)
	admin := pgtest.AdminURL(b)
	ids, rows := idsFile(b, dir)
	var base time.Duration
	b.Run("impl=server-copy", func(b *testing.B) {
		var total time.Duration
		for b.Loop() {
			c := pgtest.Connect(b, pgtest.CreateDatabase(b, admin))
			ctx := context.Background()
			if _, err := c.Exec(ctx, `CREATE TABLE ids (ooid bigint PRIMARY KEY, report int, ndx int)`); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			if _, err := c.Exec(ctx, `COPY ids FROM '`+ids+`' (FORMAT csv)`); err != nil {
				b.Fatalf("the server cannot read the baseline file (it must run on this machine): %v", err)
			}
			total += time.Since(start)
		}
		base = total / time.Duration(b.N)
		b.ReportMetric(base.Seconds(), "s")
		b.ReportMetric(float64(rows)/base.Seconds(), "rows/s")
	})
	// Two processes on one server, each loading half of the buckets into
	// one schema: the verdict lock takes their buckets one at a time, so
	// they share the server's COPY, and only their reading overlaps.
	b.Run("impl=backfill/per-bucket-2-processes", func(b *testing.B) {
		var total time.Duration
		for b.Loop() {
			dsn := pgtest.CreateDatabase(b, admin)
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
			total += time.Since(start)
		}
		secs := total / time.Duration(b.N)
		b.ReportMetric(secs.Seconds(), "s")
		if base > 0 {
			b.ReportMetric(100*base.Seconds()/secs.Seconds(), "pct_of_server_copy")
		}
	})
	for _, mode := range []string{"per-bucket", "bulk"} {
		b.Run("impl=backfill/"+mode, func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				args := []string{"run", "--in", dir, "-q", "--workers", "2", "--sink", "postgres", "--create-schema",
					"--dsn", pgtest.CreateDatabase(b, admin)}
				if mode == "bulk" {
					args = append(args, "--bulk")
				}
				d, _ := run(b, "", binary(b), args...)
				total += d
			}
			secs := total / time.Duration(b.N)
			b.ReportMetric(secs.Seconds(), "s")
			b.ReportMetric(float64(rows)/secs.Seconds(), "rows/s")
			if base > 0 {
				b.ReportMetric(100*base.Seconds()/secs.Seconds(), "pct_of_server_copy")
			}
		})
	}
}
