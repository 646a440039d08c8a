package reader

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/reader/index"
)

// benchIndex writes (once per process) an autoclaved index in the
// writer's exact form: files of 10 reports of 100 datums, a frame every
// 50 datums, a badblob and a cut-off report now and then. It returns the
// bucket folder, the datum rows and the decompressed index size.
func benchIndex(b *testing.B, files int) (string, int, int64) {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "2017-06-01")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, IndexName))
	if err != nil {
		b.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	cw := &countWriter{w: zw}
	w := bufio.NewWriterSize(cw, 1<<20)
	const sha = "q7tUjCvlf3DlMhRTHGmePYIq5zc="
	datums := 0
	for fi := range files {
		fmt.Fprintf(w, `{"filename": "2017-06-01/web_connectivity.%04d.tar.lz4", "type": "file"}`+"\n", fi)
		var off, fileOff int64
		inFrame := 0
		frame := func() {
			fmt.Fprintf(w, `{"file_off": %d, "file_size": %d, "text_off": %d, "text_size": %d, "type": "frame"}`+"\n", fileOff, 51234, off, 262144+1000)
			fileOff += 51234
		}
		frame()
		for r := range 10 {
			fmt.Fprintf(w, `{"orig_sha1": "%s", "src_size": %d, "textname": "2017-06-01/20170531T%06dZ-IT-AS3269-web_connectivity-20170531T%06dZ_AS3269_VJUgQTAT4gzk4ZcEdQnTxBKNKMyz0ayUkuuHvRR26Fm1L0c9XT-0.2.0-probe.json", "type": "report"}`+"\n",
				sha, 600000, fi*10+r, fi*10+r)
			for d := range 100 {
				if inFrame == 50 {
					w.WriteString(`{"type": "/frame"}` + "\n")
					frame()
					inFrame = 0
				}
				if d == 37 && r == 3 {
					fmt.Fprintf(w, `{"info": "<class 'ValueError'>", "orig_sha1": "%s", "src_off": 1234, "src_size": 99, "type": "badblob"}`+"\n", sha)
				}
				fmt.Fprintf(w, `{"orig_sha1": "%s", "text_off": %d, "text_size": %d, "type": "datum"}`+"\n", sha, off+1536, 5242)
				off += 5243
				datums++
				inFrame++
			}
			if r == 7 {
				fmt.Fprintf(w, `{"info": "<class '__main__.TruncatedReportError'>", "src_cutoff": %d, "type": "/report"}`+"\n", 590000)
			} else {
				w.WriteString(`{"type": "/report"}` + "\n")
			}
		}
		w.WriteString(`{"type": "/frame"}` + "\n")
		fmt.Fprintf(w, `{"file_crc32": -156566611, "file_sha1": "%s", "file_size": %d, "type": "/file"}`+"\n", sha, fileOff)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	testutil.Check(b, zw.Close())
	f.Close()
	return dir, datums, cw.n
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type countWriter struct {
	w interface{ Write([]byte) (int, error) }
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// BenchmarkFromIndex enumerates every (textname, ndx) of a 2 M-datum
// autoclaved index, as run --from-index does for a bucket (gunzip, parse
// the event stream, number the reports), beside gzip -dc of the same file
// to /dev/null. It reports datum rows/s, MB/s of decompressed index, the
// share of the gzip baseline's rate, and the CPU seconds (user and system,
// of the whole process) the 147 M-datum corpus would take at this rate.
func BenchmarkFromIndex(b *testing.B) {
	if _, err := exec.LookPath("gzip"); err != nil {
		b.Fatal("gzip is needed for the baseline")
	}
	dir, datums, size := benchIndex(b, 2000)
	var base time.Duration
	b.Run("impl=gzip-dc", func(b *testing.B) {
		var total time.Duration
		for b.Loop() {
			start := time.Now()
			cmd := exec.Command("sh", "-c", `gzip -dc "$0" > /dev/null`, filepath.Join(dir, IndexName))
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
			total += time.Since(start)
		}
		base = total / time.Duration(b.N)
		b.ReportMetric(float64(size)/base.Seconds()/1e6, "MB/s")
		b.ReportMetric(float64(datums)/base.Seconds(), "datums/s")
	})
	b.Run("impl=backfill", func(b *testing.B) {
		var n int
		cpu0 := cpuTime()
		for b.Loop() {
			bk, err := Open(dir, Options{Format: FormatAutoclaved})
			if err != nil {
				b.Fatal(err)
			}
			n = 0
			h := Handler{Problem: func(deadletter.Record) {}, Report: func(r ContainerReport) { n += int(r.Stats.N) }}
			for _, c := range bk.Containers {
				IndexReports(bk, c, false, h)
			}
		}
		if n != datums+2000 { // one badblob per file, counted
			b.Fatalf("%d measurements, want %d", n, datums+2000)
		}
		cpu := (cpuTime() - cpu0).Seconds() / float64(b.N)
		secs := b.Elapsed().Seconds() / float64(b.N)
		b.ReportMetric(float64(size)/secs/1e6, "MB/s")
		b.ReportMetric(float64(datums)/secs, "datums/s")
		b.ReportMetric(147e6*cpu/float64(datums), "cpu_s_per_147M")
		if base > 0 {
			b.ReportMetric(100*base.Seconds()/secs, "pct_of_gzip")
		}
	})
}

// BenchmarkAutoclavedRows reads the decompressed rows of benchIndex's
// index from memory: cut into lines only (the baseline), and parsed into
// events. It reports rows/s and the parse's share of the baseline's rate.
func BenchmarkAutoclavedRows(b *testing.B) {
	dir, _, _ := benchIndex(b, 500)
	f, err := os.Open(filepath.Join(dir, IndexName))
	if err != nil {
		b.Fatal(err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	text, err := io.ReadAll(zr)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	rows := bytes.Count(text, []byte("\n"))
	var base time.Duration
	b.Run("impl=lines", func(b *testing.B) {
		start := time.Now()
		for b.Loop() {
			br := bufio.NewReaderSize(bytes.NewReader(text), 64<<10)
			n := 0
			for {
				if _, err := br.ReadSlice('\n'); err != nil {
					break
				}
				n++
			}
			if n != rows {
				b.Fatalf("%d lines, want %d", n, rows)
			}
		}
		base = time.Since(start) / time.Duration(b.N)
		b.ReportMetric(float64(rows)/base.Seconds(), "rows/s")
	})
	b.Run("impl=events", func(b *testing.B) {
		start := time.Now()
		for b.Loop() {
			x := index.NewAutoclaved(bytes.NewReader(text))
			n := 0
			for {
				if _, err := x.Next(); err != nil {
					if err != io.EOF {
						b.Fatal(err)
					}
					break
				}
				n++
			}
			if n != rows {
				b.Fatalf("%d rows, want %d", n, rows)
			}
		}
		per := time.Since(start) / time.Duration(b.N)
		b.ReportMetric(float64(rows)/per.Seconds(), "rows/s")
		if base > 0 {
			b.ReportMetric(base.Seconds()/per.Seconds(), "x_lines")
		}
	})
}
