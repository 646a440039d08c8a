package bench

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/lz4nocheck"
)

// decodeFloor decompresses every container of the buckets under dir with
// the run's own LZ4 decoder (internal/lz4nocheck: no XXH32, which the run
// does not compute either), walking the tar members of *.tar.lz4, and
// discards the bytes, on workers goroutines: the in-process floor under
// backfill run with as many workers, the best case. It returns the wall
// time and the bytes decoded.
func decodeFloor(b *testing.B, dir string, workers int) (time.Duration, int64) {
	b.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.lz4"))
	if len(files) == 0 {
		b.Fatal("no containers")
	}
	start := time.Now()
	total, err := parallel(workers, files, decodeOne)
	if err != nil {
		b.Fatal(err)
	}
	return time.Since(start), total
}

// parallel calls fn with each item, on workers goroutines, each with a
// buffer of its own, and returns the sum of what fn returned and its first
// error.
func parallel(workers int, items []string, fn func(item string, buf []byte) (int64, error)) (int64, error) {
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
			for it := range next {
				n, err := fn(it, buf)
				mu.Lock()
				total += n
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	for _, it := range items {
		next <- it
	}
	close(next)
	wg.Wait()
	return total, firstErr
}

func decodeOne(path string, buf []byte) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	zr := lz4nocheck.NewDecoder()
	zr.Reset(f)
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

// BenchmarkRunFloor runs backfill run to Parquet with 2 workers over the
// scale-1 corpus and over the corpus of the real one's shape (most
// measurements small), each run paired with the in-process floor with 2
// goroutines (the run's LZ4 decoder and a tar walk, bytes discarded) just
// before it, so a noisy machine moves both alike: pct_of_floor is the
// median over the pairs of the floor's time over the run's (the target is
// 100); min_pct and max_pct bound it. Run it with -benchtime 5x for five
// pairs.
func BenchmarkRunFloor(b *testing.B) {
	b.Run("corpus=scale-1", func(b *testing.B) { runFloor(b, corpus(b, 1)) })
	b.Run("corpus=real-shape", func(b *testing.B) { runFloor(b, realShape(b)) })
}

func runFloor(b *testing.B, dir string) {
	var total, floorTotal time.Duration
	var bytes int64
	var pct []float64
	for b.Loop() {
		floor, n := decodeFloor(b, dir, 2)
		d, _ := run(b, "", binary(b), "run", "--in", dir, "-q", "--workers", "2", "--out", b.TempDir())
		total, floorTotal, bytes = total+d, floorTotal+floor, n
		pct = append(pct, 100*floor.Seconds()/d.Seconds())
	}
	slices.Sort(pct)
	b.ReportMetric((total / time.Duration(b.N)).Seconds(), "s")
	b.ReportMetric((floorTotal / time.Duration(b.N)).Seconds(), "floor_s")
	b.ReportMetric(float64(bytes)/(floorTotal/time.Duration(b.N)).Seconds()/1e6, "floor_MB/s")
	b.ReportMetric(pct[len(pct)/2], "pct_of_floor")
	b.ReportMetric(pct[0], "min_pct")
	b.ReportMetric(pct[len(pct)-1], "max_pct")
}
