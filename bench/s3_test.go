package bench

import (
	"context"
	"io"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/backfill-dev/backfill/internal/s3test"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
	s3store "github.com/backfill-dev/backfill/internal/store/s3"
)

// transferFloor GETs every object under s3://bucket/prefix whole, workers
// at a time, and discards the bytes: the transfer floor under a run that
// reads from S3.
func transferFloor(b *testing.B, bucket, prefix string, workers int) time.Duration {
	b.Helper()
	ctx := context.Background()
	c, err := s3store.Client(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var keys []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range page.Contents {
			keys = append(keys, *o.Key)
		}
	}
	start := time.Now()
	_, err = parallel(workers, keys, func(k string, buf []byte) (int64, error) {
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &k})
		if err != nil {
			return 0, err
		}
		defer out.Body.Close()
		return io.CopyBuffer(io.Discard, out.Body, buf)
	})
	if err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkRunS3 runs backfill run to Parquet, 2 workers, over the scale-1
// corpus held by the S3 test server (in this process, on 127.0.0.1),
// each time beside the same run from local disk and a plain parallel GET
// of every object (4 at a time, the transfer floor), in one round:
// pct_of_local is the median of the local run's time over the S3 run's,
// pct_of_transfer the floor's over the S3 run's; rss_MiB and local_rss_MiB
// are the runs' peak RSS (read-ahead included). The server shares the two
// cores with the run. Run it with -benchtime 3x.
func BenchmarkRunS3(b *testing.B) {
	dir := corpus(b, 1)
	s3test.Start(b, "bench")
	dst, err := location.Open(context.Background(), "s3://bench/corpus")
	if err != nil {
		b.Fatal(err)
	}
	if err := uploadBuckets(dst, dir); err != nil {
		b.Fatal(err)
	}
	bin := binary(b)
	var s3s, locals, floors []float64
	var rss, localRSS int64
	for b.Loop() {
		floor := transferFloor(b, "bench", "corpus/", 4)
		local, lr := run(b, "", bin, "run", "--in", dir, "-q", "--workers", "2", "--out", b.TempDir())
		remote, r := run(b, "", bin, "run", "--in", "s3://bench/corpus", "-q", "--workers", "2", "--out", b.TempDir())
		s3s, locals, floors = append(s3s, remote.Seconds()), append(locals, 100*local.Seconds()/remote.Seconds()), append(floors, 100*floor.Seconds()/remote.Seconds())
		rss, localRSS = max(rss, r), max(localRSS, lr)
	}
	slices.Sort(s3s)
	slices.Sort(locals)
	slices.Sort(floors)
	b.ReportMetric(s3s[len(s3s)/2], "s")
	b.ReportMetric(locals[len(locals)/2], "pct_of_local")
	b.ReportMetric(floors[len(floors)/2], "pct_of_transfer")
	b.ReportMetric(float64(rss)/(1<<20), "rss_MiB")
	b.ReportMetric(float64(localRSS)/(1<<20), "local_rss_MiB")
}

// uploadBuckets copies the bucket folders of dir (not the generator's
// ground truth) into dst.
func uploadBuckets(dst store.Store, dir string) error {
	ctx := context.Background()
	src := store.Local(dir)
	ents, err := src.ReadDir(ctx, ".")
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		err := fs.WalkDir(store.FS(ctx, src), e.Name(), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := store.ReadFile(ctx, src, p)
			if err != nil {
				return err
			}
			return store.WriteFile(ctx, dst, p, data)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
