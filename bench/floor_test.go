package bench

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pierrec/lz4/v4"
)

// decodeFloor decompresses every container of the buckets under dir with
// pierrec/lz4, walking the tar members of *.tar.lz4, and discards the
// bytes, on workers goroutines: the in-process floor under backfill run
// with as many workers. It returns the wall time and the bytes decoded.
func decodeFloor(b *testing.B, dir string, workers int) (time.Duration, int64) {
	b.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.lz4"))
	if len(files) == 0 {
		b.Fatal("no containers")
	}
	start := time.Now()
	next := make(chan string)
	var mu sync.Mutex
	var total int64
	var firstErr error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 256<<10)
			for f := range next {
				n, err := decodeOne(f, buf)
				mu.Lock()
				total += n
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	for _, f := range files {
		next <- f
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	return time.Since(start), total
}

func decodeOne(path string, buf []byte) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	zr := lz4.NewReader(f)
	if !strings.HasSuffix(path, ".tar.lz4") {
		return io.CopyBuffer(io.Discard, zr, buf)
	}
	tr := tar.NewReader(zr)
	var n int64
	for {
		_, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		m, err := io.CopyBuffer(io.Discard, tr, buf)
		n += m
		if err != nil {
			return n, err
		}
	}
}

// BenchmarkRunFloor runs backfill run to Parquet with 2 workers beside
// the in-process floor with 2 goroutines (pierrec/lz4 and a tar walk,
// bytes discarded) over the scale-1 corpus; pct_of_floor is the share of
// the floor's throughput the run reaches (the target is 85).
func BenchmarkRunFloor(b *testing.B) {
	dir := corpus(b, 1)
	var floor time.Duration
	b.Run("impl=floor/workers=2", func(b *testing.B) {
		var total time.Duration
		var bytes int64
		for b.Loop() {
			d, n := decodeFloor(b, dir, 2)
			total, bytes = total+d, n
		}
		floor = total / time.Duration(b.N)
		b.ReportMetric(floor.Seconds(), "s")
		b.ReportMetric(float64(bytes)/floor.Seconds()/1e6, "MB/s")
	})
	b.Run("impl=backfill/workers=2", func(b *testing.B) {
		var total time.Duration
		for b.Loop() {
			d, _ := run(b, "", binary(b), "run", "--in", dir, "-q", "--workers", "2", "--out", b.TempDir())
			total += d
		}
		secs := total / time.Duration(b.N)
		b.ReportMetric(secs.Seconds(), "s")
		b.ReportMetric(100*floor.Seconds()/secs.Seconds(), "pct_of_floor")
	})
}
