package bench

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy/pgschema"
)

// realShape generates (once, cached) a corpus of the real one's shape:
// 8 buckets of 9,600 reports of about 40 small measurements each (the
// real corpus: 147 M measurements in 3.6 M reports, most of them small).
// Varied, a share of each measurement's values is redrawn (gen --varied
// 0.4), and its containers compress 5.4-fold with lz4 -5, as text does
// (the real samples of testdata compress 1.9-fold one by one, 4.1-fold
// when their texts are put together); otherwise every measurement is its
// sample and they compress over 100-fold: the best case, where decoding
// is nearly free.
func realShape(b *testing.B, varied bool) string {
	b.Helper()
	dir := filepath.Join(*benchDir, "real-shape")
	args := []string{"gen", "--out", "", "--seed", "11", "--buckets", "8", "--reports", "9600",
		"--min-measurements", "12", "--max-measurements", "400", "--max-template", "1KiB"}
	if varied {
		dir += "-varied"
		args = append(args, "--varied", "0.4")
	}
	args[2] = dir
	if _, err := os.Stat(filepath.Join(dir, "ground-truth.jsonl")); err == nil {
		return dir
	}
	os.RemoveAll(dir)
	if out, err := exec.Command(binary(b), args...).CombinedOutput(); err != nil {
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

// BenchmarkRunPostgresShape loads a corpus of the real one's shape
// (varied, and the best case) with backfill run --sink postgres, per bucket
// (over 2 connections, the default, and over 1), with --bulk (its indexes
// built as the server is set to, and in one process), and as two
// processes loading half of the buckets each into one schema, each into a
// new database; and, as the ceilings of those, the server alone loading
// the same rows from files in a load's order and transactions, per bucket
// and as --bulk does (server-alone-*). Every load is paired with two
// baselines just before it:
// the server's own COPY … FROM of the same tables (the reports and
// measurements the load wrote, exported once, into a schema made by
// backfill schema), and of the bare mapping, a CSV file of the IDs alone,
// sorted by ooid, into (ooid bigint primary key, report int, ndx int).
// pct_of_tables_copy and pct_of_mapping_copy are the medians over the
// pairs of the baseline's time over the load's. Each timed step starts
// clean: the database of the step before is dropped and the server
// checkpoints, so neither side's autovacuum of the rows it just wrote, nor
// its dirty pages, run in the other's time.
//
// cores=shared is the server of the tests, on the cores the tool uses;
// cores=pinned, a throwaway server bound to the first core and the tool
// (this process and its children) to the second, as a server on another
// host is. There the server's processor time is counted too
// (server_cpu_s, beside the baselines'), and where it goes: the
// statements of each load, by kind, from the server's log (-v).
// Run it with -benchtime 3x for three pairs.
func BenchmarkRunPostgresShape(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Fatal("cores=pinned needs two cores")
	}
	for _, shape := range []struct {
		name   string
		varied bool
	}{{"varied", true}, {"best-case", false}} {
		dir := realShape(b, shape.varied)
		ids, rows := idsFile(b, dir)
		for _, cores := range []string{"shared", "pinned"} {
			b.Run("corpus="+shape.name+"/cores="+cores, func(b *testing.B) {
				var srv *pgtest.Server
				admin := ""
				if cores == "pinned" {
					srv = pgtest.StartServer(b)
					srv.Pin("0")
					pinSelf(b, "1")
					admin = srv.URL()
				} else {
					admin = pgtest.AdminURL(b)
				}
				shapeLoads(b, dir, admin, srv, ids, rows)
			})
		}
	}
}

// pinSelf binds this process, and the processes it starts, to cpus until
// the benchmark ends.
func pinSelf(b *testing.B, cpus string) {
	b.Helper()
	pin := func(cpus string) error {
		return exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(os.Getpid())).Run()
	}
	if err := pin(cpus); err != nil {
		b.Fatalf("taskset: %v", err)
	}
	b.Cleanup(func() { _ = pin(fmt.Sprintf("0-%d", runtime.NumCPU()-1)) }) // as it was
}

// shapeLoads runs the loads of BenchmarkRunPostgresShape into the server
// of admin (srv, when it is a throwaway one whose CPU time is counted).
func shapeLoads(b *testing.B, dir, admin string, srv *pgtest.Server, ids string, rows int64) {
	cpu := func() time.Duration {
		if srv == nil {
			return 0
		}
		return srv.CPU()
	}
	fresh := func(b *testing.B) (string, func()) { return freshDatabase(b, admin) }
	ctx := context.Background()
	runInto := func(b *testing.B, dsn string, args ...string) time.Duration {
		args = append([]string{"run", "--in", dir, "-q", "--workers", "2", "--sink", "postgres", "--create-schema", "--dsn", dsn}, args...)
		d, _ := run(b, "", binary(b), args...)
		return d
	}
	// The tables as a load writes them, exported once.
	tmp, err := os.MkdirTemp("", "backfill-bench-tables-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(tmp) })
	first, drop := fresh(b)
	runInto(b, first)
	reports, measurements := exportBaseline(b, ctx, first, tmp, rows)

	mappingCopy := func(b *testing.B) (time.Duration, time.Duration) {
		dsn, done := fresh(b)
		defer done()
		c := pgtest.Connect(b, dsn)
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, `CREATE TABLE ids (ooid bigint PRIMARY KEY, report int, ndx int)`); err != nil {
			b.Fatal(err)
		}
		c0, start := cpu(), time.Now()
		if _, err := c.Exec(ctx, `COPY ids FROM '`+ids+`' (FORMAT csv)`); err != nil {
			b.Fatalf("the server cannot read the baseline file (it must run on this machine): %v", err)
		}
		return time.Since(start), cpu() - c0
	}
	tablesCopy := func(b *testing.B) (time.Duration, time.Duration) {
		dsn, done := fresh(b)
		defer done()
		if o, err := exec.Command(binary(b), "schema", "--dsn", dsn).CombinedOutput(); err != nil {
			b.Fatalf("schema: %v\n%s", err, o)
		}
		c := pgtest.Connect(b, dsn)
		defer c.Close(ctx)
		c0, start := cpu(), time.Now()
		copyFile(b, ctx, c, reports, `COPY backfill.reports FROM STDIN (FORMAT binary)`)
		copyFile(b, ctx, c, measurements, `COPY backfill.measurements FROM STDIN (FORMAT binary)`)
		return time.Since(start), cpu() - c0
	}
	// The same rows bucket by bucket, as files the server reads alone.
	buckets := exportBuckets(b, ctx, first, tmp)
	drop()
	load := map[string]func(b *testing.B, dsn string) time.Duration{
		"per-bucket": func(b *testing.B, dsn string) time.Duration { return runInto(b, dsn) },
		// One connection: buckets commit one at a time, as before
		// --connections.
		"per-bucket-1-connection": func(b *testing.B, dsn string) time.Duration { return runInto(b, dsn, "--connections", "1") },
		"bulk":                    func(b *testing.B, dsn string) time.Duration { return runInto(b, dsn, "--bulk") },
		// The indexes built at the end in one server process (on a server
		// of one core its parallel workers share the core, and merge
		// their sorted runs through temporary files).
		"bulk-build-workers-0": func(b *testing.B, dsn string) time.Duration {
			return runInto(b, dsn, "--bulk", "--build-workers", "0")
		},
		// The server alone, the tool's rows read from files in the
		// order and transactions of a load: no client can load faster,
		// so these are the ceilings of the shares above.
		"server-alone-per-bucket": func(b *testing.B, dsn string) time.Duration {
			return serverAlone(b, ctx, dsn, buckets, nil)
		},
		"server-alone-bulk": func(b *testing.B, dsn string) time.Duration {
			return serverAlone(b, ctx, dsn, buckets, &pgschema.Build{})
		},
		"server-alone-bulk-build-workers-0": func(b *testing.B, dsn string) time.Duration {
			return serverAlone(b, ctx, dsn, buckets, &pgschema.Build{Workers: new(0)})
		},
		// Two processes, each committing two buckets at once: the server
		// COPYs for all of them, and their reading overlaps.
		"per-bucket-2-processes": func(b *testing.B, dsn string) time.Duration {
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
	for _, mode := range []string{"per-bucket", "per-bucket-1-connection", "bulk", "bulk-build-workers-0", "per-bucket-2-processes",
		"server-alone-per-bucket", "server-alone-bulk", "server-alone-bulk-build-workers-0"} {
		b.Run("impl=backfill/"+mode, func(b *testing.B) {
			var total, tablesTotal, mappingTotal, cpuTotal, tablesCPU, mappingCPU time.Duration
			var tablesPct, mappingPct []float64
			for b.Loop() {
				tb, tc := tablesCopy(b)
				mb, mc := mappingCopy(b)
				dsn, done := fresh(b)
				if srv != nil {
					pgtest.Exec(b, admin, "ALTER SYSTEM SET log_min_duration_statement = 0", "SELECT pg_reload_conf()")
				}
				logAt := 0
				if srv != nil {
					logAt = len(srv.Log())
				}
				c0 := cpu()
				d := load[mode](b, dsn)
				cpuTotal += cpu() - c0
				if srv != nil {
					pgtest.Exec(b, admin, "ALTER SYSTEM RESET log_min_duration_statement", "SELECT pg_reload_conf()")
					b.Logf("%s, where the server's time goes (statements of at least 1 ms, by kind):\n%s", mode, statementTimes(srv.Log()[logAt:]))
				}
				done()
				total, tablesTotal, mappingTotal = total+d, tablesTotal+tb, mappingTotal+mb
				tablesCPU, mappingCPU = tablesCPU+tc, mappingCPU+mc
				tablesPct = append(tablesPct, 100*tb.Seconds()/d.Seconds())
				mappingPct = append(mappingPct, 100*mb.Seconds()/d.Seconds())
			}
			n := time.Duration(b.N)
			b.ReportMetric((total / n).Seconds(), "s")
			b.ReportMetric((tablesTotal / n).Seconds(), "tables_copy_s")
			b.ReportMetric((mappingTotal / n).Seconds(), "mapping_copy_s")
			b.ReportMetric(float64(rows)/(total/n).Seconds(), "rows/s")
			b.ReportMetric(median(tablesPct), "pct_of_tables_copy")
			b.ReportMetric(median(mappingPct), "pct_of_mapping_copy")
			if srv != nil {
				b.ReportMetric((cpuTotal / n).Seconds(), "server_cpu_s")
				b.ReportMetric((tablesCPU / n).Seconds(), "tables_copy_cpu_s")
				b.ReportMetric((mappingCPU / n).Seconds(), "mapping_copy_cpu_s")
			}
		})
	}
}

// bucketFiles are one bucket's rows as a load wrote them, in COPY's
// binary format: its reports by seq, its measurements by ooid (the order
// a load sends them in).
type bucketFiles struct{ reports, measurements string }

// exportBuckets writes the rows of every bucket of the schema of dsn to
// files under dir, in bucket order.
func exportBuckets(b *testing.B, ctx context.Context, dsn, dir string) []bucketFiles {
	c := pgtest.Connect(b, dsn)
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT bucket::text FROM backfill.ledger ORDER BY bucket`)
	if err != nil {
		b.Fatal(err)
	}
	days, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		b.Fatal(err)
	}
	var out []bucketFiles
	for _, day := range days {
		f := bucketFiles{filepath.Join(dir, day+".reports.copy"), filepath.Join(dir, day+".measurements.copy")}
		for path, sql := range map[string]string{
			f.reports:      `COPY (SELECT * FROM backfill.reports WHERE bucket = '` + day + `' ORDER BY seq) TO STDOUT (FORMAT binary)`,
			f.measurements: `COPY (SELECT * FROM backfill.measurements WHERE bucket = '` + day + `' ORDER BY ooid) TO STDOUT (FORMAT binary)`,
		} {
			copyToFile(b, ctx, c, path, sql)
		}
		out = append(out, f)
	}
	return out
}

// serverAlone has the server load the buckets' files into a schema that
// backfill schema made, each bucket in a transaction of its own (its
// reports, then its measurements), as a load does: into the tables with
// their keys and indexes, or, given build, without them and built with
// build's settings at the end, then analyzed, as --bulk does. It leaves
// out every statement of a load but the COPYs, builds and ANALYZE, and
// returns the time from the first COPY on.
func serverAlone(b *testing.B, ctx context.Context, dsn string, buckets []bucketFiles, build *pgschema.Build) time.Duration {
	if out, err := exec.Command(binary(b), "schema", "--dsn", dsn).CombinedOutput(); err != nil {
		b.Fatalf("schema: %v\n%s", err, out)
	}
	c := pgtest.Connect(b, dsn)
	defer c.Close(ctx)
	if build != nil {
		if err := pgschema.DropConstraints(ctx, c, "backfill"); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	for _, f := range buckets {
		if _, err := c.Exec(ctx, "BEGIN"); err != nil {
			b.Fatal(err)
		}
		copyFile(b, ctx, c, f.reports, `COPY backfill.reports FROM STDIN (FORMAT binary)`)
		copyFile(b, ctx, c, f.measurements, `COPY backfill.measurements FROM STDIN (FORMAT binary)`)
		if _, err := c.Exec(ctx, "COMMIT"); err != nil {
			b.Fatal(err)
		}
	}
	if build != nil {
		if err := pgschema.BuildConstraints(ctx, c, "backfill", *build); err != nil {
			b.Fatal(err)
		}
		if err := pgschema.Analyze(ctx, c, "backfill"); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// logDuration is a statement's line in the server's log.
var logDuration = regexp.MustCompile(`duration: ([0-9.]+) ms\s+(?:statement|execute [^:]*): (.*)`)

// statementTimes sums the durations the server logged by kind of
// statement (its first words, the table named), largest first.
func statementTimes(log string) string {
	sums := map[string]float64{}
	counts := map[string]int{}
	var total float64
	for _, m := range logDuration.FindAllStringSubmatch(log, -1) {
		ms, _ := strconv.ParseFloat(m[1], 64)
		if ms < 1 {
			continue
		}
		words := strings.Fields(m[2])
		kind := strings.Join(words[:min(len(words), 4)], " ")
		sums[kind] += ms
		counts[kind]++
		total += ms
	}
	kinds := slices.Collect(maps.Keys(sums))
	slices.SortFunc(kinds, func(x, y string) int { return cmp.Compare(sums[y], sums[x]) })
	var out strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&out, "  %8.2f s  %5d×  %s\n", sums[k]/1000, counts[k], k)
	}
	fmt.Fprintf(&out, "  %8.2f s  in all", total/1000)
	return out.String()
}
