package pgcopy_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// benchReports makes n reports of m measurements each, in bucket day.
func benchReports(b testing.TB, day string, n, m int) []stamped.Report {
	out := make([]stamped.Report, n)
	for i := range out {
		name := fmt.Sprintf("%s/%sT%02d%02d%02dZ-IT-AS%d-web_connectivity-no_report_id-0.2.0-probe.json",
			day, day[:4]+day[5:7]+day[8:10], i/3600%24, i/60%60, i%60, 100+i/86400)
		id, err := ooid.DefaultScheme.Report(name)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = stamped.Report{Textname: name, Container: "c.tar.lz4", ID: id, N: uint32(m)}
	}
	return out
}

func commitBucket(b testing.TB, s sink.Sink, day string, rs []stamped.Report) {
	ctx := context.Background()
	w, err := s.Begin(ctx, stamped.Meta{Bucket: day, Fingerprint: "bench", Scheme: ooid.DefaultScheme, NdxPolicy: "blobs", Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	var c stamped.Counts
	for i := range rs {
		testutil.Check(b, w.Report(&rs[i]))
		c.Reports++
		c.Measurements += int64(rs[i].N)
	}
	if _, err := w.Commit(ctx, c); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLoad COPYs 5 M measurement rows (500 reports of 10,000) as one
// bucket through the sink, and in the same iteration has the server load
// the same rows from a file with COPY ... FROM (CSV, then binary) into the
// same table: the physical limit. It reports rows/s of each and the sink's
// share of the CSV file load.
func BenchmarkLoad(b *testing.B) {
	const reports, per = 500, 10_000
	dsn := pgtest.NewDatabase(b)
	ctx := context.Background()
	s, err := pgcopy.Open(ctx, pgcopy.Options{DSN: dsn, CreateSchema: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rs := benchReports(b, "2018-03-01", reports, per)
	// The same rows as files the server reads.
	dir, err := os.MkdirTemp("", "backfill-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o777) // the server reads and writes the baseline files as its own user
	csvPath := filepath.Join(dir, "m.csv")
	f, _ := os.Create(csvPath)
	bw := bufio.NewWriterSize(f, 1<<20)
	for seq, r := range rs {
		for ndx := range r.N {
			fmt.Fprintf(bw, "%d,2018-03-01,%d,%d\n", r.ID.ID(ndx).Int64(), seq, ndx)
		}
	}
	bw.Flush()
	f.Chmod(0o644)
	f.Close()
	c := s.Conn()
	binPath := filepath.Join(dir, "m.bin")
	if _, err := c.Exec(ctx, `COPY backfill.measurements FROM '`+csvPath+`' (FORMAT csv)`); err != nil {
		b.Fatalf("the server cannot read the baseline file (it must run on this machine): %v", err)
	}
	if _, err := c.Exec(ctx, `COPY backfill.measurements TO '`+binPath+`' (FORMAT binary)`); err != nil {
		b.Fatal(err)
	}
	truncate := func() {
		if _, err := c.Exec(ctx, `TRUNCATE backfill.measurements, backfill.reports, backfill.dead_letters, backfill.ledger`); err != nil {
			b.Fatal(err)
		}
		c.Exec(ctx, `CHECKPOINT`)
	}
	rows := float64(reports * per)
	var tCSV, tBin, tSink time.Duration
	for b.Loop() {
		for _, v := range []struct {
			d  *time.Duration
			do func()
		}{
			{&tCSV, func() {
				if _, err := c.Exec(ctx, `COPY backfill.measurements FROM '`+csvPath+`' (FORMAT csv)`); err != nil {
					b.Fatal(err)
				}
			}},
			{&tBin, func() {
				if _, err := c.Exec(ctx, `COPY backfill.measurements FROM '`+binPath+`' (FORMAT binary)`); err != nil {
					b.Fatal(err)
				}
			}},
			{&tSink, func() { commitBucket(b, s, "2018-03-01", rs) }},
		} {
			b.StopTimer()
			truncate()
			b.StartTimer()
			start := time.Now()
			v.do()
			*v.d += time.Since(start)
		}
	}
	n := float64(b.N)
	b.ReportMetric(rows*n/tCSV.Seconds(), "server-csv-rows/s")
	b.ReportMetric(rows*n/tBin.Seconds(), "server-binary-rows/s")
	b.ReportMetric(rows*n/tSink.Seconds(), "sink-rows/s")
	b.ReportMetric(100*tCSV.Seconds()/tSink.Seconds(), "pct_of_server_csv")
	b.ReportMetric(100*tBin.Seconds()/tSink.Seconds(), "pct_of_server_binary")
	var count int64
	testutil.Check(b, c.QueryRow(ctx, `SELECT count(*) FROM backfill.measurement_ids`).Scan(&count))
	if count != reports*per {
		b.Fatalf("%d rows after the sink's load", count)
	}
}

// BenchmarkBucketOverhead commits buckets of 1, 100 and 10,000 reports of
// one measurement each into a schema that already holds buckets: the cost
// of a bucket's transaction (locks, replacing, collision lookups, ledger)
// beside that of its rows. Each iteration is a new bucket.
func BenchmarkBucketOverhead(b *testing.B) {
	dsn := pgtest.NewDatabase(b)
	ctx := context.Background()
	s, err := pgcopy.Open(ctx, pgcopy.Options{DSN: dsn, CreateSchema: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	day := time.Date(2016, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 20 { // a schema with some buckets in it
		commitBucket(b, s, day.Format(time.DateOnly), benchReports(b, day.Format(time.DateOnly), 1000, 20))
		day = day.AddDate(0, 0, 1)
	}
	for _, n := range []int{1, 100, 10_000} {
		b.Run(fmt.Sprintf("reports=%d", n), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				name := day.Format(time.DateOnly)
				day = day.AddDate(0, 0, 1)
				rs := benchReports(b, name, n, 1)
				b.StartTimer()
				commitBucket(b, s, name, rs)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/bucket")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "us/report")
		})
	}
}
