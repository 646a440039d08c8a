package bench

import (
	"bytes"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/backfill-dev/backfill/internal/fasttar"
	"github.com/backfill-dev/backfill/internal/lz4nocheck"
)

// decodeFloor decompresses every container of the buckets under dir with
// the run's own LZ4 decoder (internal/lz4nocheck: no XXH32, which the run
// does not compute either), walking the tar members of *.tar.lz4 with the
// run's own tar walker (internal/fasttar), and discards the bytes, on
// workers goroutines: the in-process floor under backfill run with as many
// workers, the best case. It returns the wall time and the bytes decoded.
func decodeFloor(b *testing.B, dir string, workers int) (time.Duration, int64) {
	return floorOf(b, dir, workers, decodeOne)
}

// checkedFloor is decodeFloor plus the checks no run can skip: the CRC-32
// of every member (which the index's CRC-32 is held to), a search for
// every line end (a measurement's end) and a UTF-8 check of every byte.
// It is the least CPU a run can spend on the containers.
func checkedFloor(b *testing.B, dir string, workers int) (time.Duration, int64) {
	return floorOf(b, dir, workers, func(path string, buf []byte) (int64, error) {
		return walkOne(path, buf, func(r io.Reader) (int64, error) {
			crc := crc32.NewIEEE()
			var n, seen int64
			for {
				m, err := r.Read(buf)
				crc.Write(buf[:m])
				seen += int64(bytes.Count(buf[:m], []byte{'\n'}))
				if utf8.Valid(buf[:m]) { // a rune cut at the buffer's end only costs the same
					seen++
				}
				n += int64(m)
				if errors.Is(err, io.EOF) {
					floorSink.Add(uint64(seen) + uint64(crc.Sum32()))
					return n, nil
				}
				if err != nil {
					return n, err
				}
			}
		})
	})
}

// floorSink takes what the checked floor computes, so that none of it is
// left out.
var floorSink atomic.Uint64

func floorOf(b *testing.B, dir string, workers int, one func(path string, buf []byte) (int64, error)) (time.Duration, int64) {
	b.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.lz4"))
	if len(files) == 0 {
		b.Fatal("no containers")
	}
	start := time.Now()
	total, err := parallel(workers, files, one)
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
	return walkOne(path, buf, func(r io.Reader) (int64, error) { return io.CopyBuffer(io.Discard, r, buf) })
}

// walkOne decodes the container at path and hands each report (each tar
// member, walked by the run's own tar walker, or the whole of an as-is
// file) to read, which returns its bytes.
func walkOne(path string, buf []byte, read func(io.Reader) (int64, error)) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	zr := lz4nocheck.NewDecoder()
	zr.Reset(f)
	if !strings.HasSuffix(path, ".tar.lz4") {
		return read(zr)
	}
	var tr fasttar.Reader // the run's own walk
	tr.Reset(zr)
	var n int64
	for {
		_, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		m, err := read(&tr)
		n += m
		if err != nil {
			return n, err
		}
	}
}

// BenchmarkRunFloor runs backfill run to Parquet with 2 workers over the
// scale-1 corpus and over the corpus of the real one's shape (most
// measurements small; varied, and the best case: realShape), each run paired with the in-process floor with 2
// goroutines (the run's LZ4 decoder and a tar walk, bytes discarded) and
// the checked floor (the same plus the CRC-32, line ends and UTF-8 of
// every byte, the checks a run cannot skip) just before it, so a noisy
// machine moves all three alike: pct_of_floor is the median over the
// triples of the floor's time over the run's (the target is 100), min_pct
// and max_pct bound it, and pct_of_checked_floor is the same median for
// the checked floor. Run it with -benchtime 5x for five triples.
func BenchmarkRunFloor(b *testing.B) {
	b.Run("corpus=scale-1", func(b *testing.B) { runFloor(b, corpus(b, 1)) })
	b.Run("corpus=real-shape-varied", func(b *testing.B) { runFloor(b, realShape(b, true)) })
	b.Run("corpus=real-shape-best-case", func(b *testing.B) { runFloor(b, realShape(b, false)) })
}

func runFloor(b *testing.B, dir string) {
	var total, floorTotal, checkedTotal time.Duration
	var n int64
	var pct, checkedPct []float64
	for b.Loop() {
		floor, decoded := decodeFloor(b, dir, 2)
		checked, _ := checkedFloor(b, dir, 2)
		d, _ := run(b, "", binary(b), "run", "--in", dir, "-q", "--workers", "2", "--out", b.TempDir())
		total, floorTotal, checkedTotal, n = total+d, floorTotal+floor, checkedTotal+checked, decoded
		pct = append(pct, 100*floor.Seconds()/d.Seconds())
		checkedPct = append(checkedPct, 100*checked.Seconds()/d.Seconds())
	}
	slices.Sort(pct)
	slices.Sort(checkedPct)
	b.ReportMetric((total / time.Duration(b.N)).Seconds(), "s")
	b.ReportMetric((floorTotal / time.Duration(b.N)).Seconds(), "floor_s")
	b.ReportMetric((checkedTotal / time.Duration(b.N)).Seconds(), "checked_floor_s")
	b.ReportMetric(float64(n)/(floorTotal/time.Duration(b.N)).Seconds()/1e6, "floor_MB/s")
	b.ReportMetric(pct[len(pct)/2], "pct_of_floor")
	b.ReportMetric(pct[0], "min_pct")
	b.ReportMetric(pct[len(pct)-1], "max_pct")
	b.ReportMetric(checkedPct[len(checkedPct)/2], "pct_of_checked_floor")
}
