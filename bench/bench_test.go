package bench

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var benchDir = flag.String("bench.dir", filepath.Join(os.TempDir(), "backfill-bench"), "cache `dir` for generated inputs")

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds cmd/backfill once per process.
func binary(b *testing.B) string {
	buildOnce.Do(func() {
		if err := os.MkdirAll(*benchDir, 0o755); err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(*benchDir, "backfill")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/backfill").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return binPath
}

// run executes name with args, stdin from inPath and stdout discarded,
// and returns the wall time and peak RSS of the child.
func run(b *testing.B, inPath, name string, args ...string) (time.Duration, int64) {
	b.Helper()
	return timed(b, inPath, nil, name, args...)
}

// timed executes name with args, stdin from inPath ("" for none) and
// stdout to stdout (nil for /dev/null), and returns the wall time and the
// peak RSS of the child. The RSS comes from /usr/bin/time: the rusage of a child forked
// by the test process itself counts the pages it shared with its parent
// before exec.
func timed(b *testing.B, inPath string, stdout io.Writer, name string, args ...string) (time.Duration, int64) {
	b.Helper()
	rssFile := filepath.Join(b.TempDir(), "rss")
	cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%M", "-o", rssFile, name}, args...)...)
	if inPath != "" {
		in, err := os.Open(inPath)
		if err != nil {
			b.Fatal(err)
		}
		defer in.Close()
		cmd.Stdin = in
	}
	cmd.Stdout, cmd.Stderr = stdout, os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s %v: %v", name, args, err)
	}
	elapsed := time.Since(start)
	raw, err := os.ReadFile(rssFile)
	if err != nil {
		b.Fatal(err)
	}
	kib, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		b.Fatalf("/usr/bin/time output %q: %v", raw, err)
	}
	return elapsed, kib * 1024
}

// ooidLines writes n "TEXTNAME<TAB>NDX" lines: reports of 1 to 80
// measurements, one in fifty of up to 5000, with a mix of report_id forms.
func ooidLines(b *testing.B, n int) string {
	return cachedFile(b, fmt.Sprintf("ooid-lines-%d.tsv", n), func(w *bufio.Writer) {
		writeOOIDLines(w, n)
	})
}

func writeOOIDLines(w *bufio.Writer, n int) {
	rng := rand.New(rand.NewPCG(1, 2))
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	rnd := func(k int) string {
		s := make([]byte, k)
		for i := range s {
			s[i] = alnum[rng.IntN(len(alnum))]
		}
		return string(s)
	}
	for written, rep := 0, 0; written < n; rep++ {
		day := time.Date(2013, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rep) * 97 * time.Second)
		stamp := day.Format("20060102T150405Z")
		asn := 1 + rng.IntN(60000)
		var rid string
		switch rep % 3 {
		case 0:
			rid = "no_report_id"
		case 1:
			rid = rnd(64)
		default:
			rid = fmt.Sprintf("%s_AS%d_%s", day.Add(2*time.Second).Format("20060102T150405Z"), asn, rnd(50))
		}
		name := fmt.Sprintf("%s/%s-CH-AS%d-web_connectivity-%s-0.2.0-probe.json", day.Format("2006-01-02"), stamp, asn, rid)
		size := 1 + rng.IntN(80)
		if rng.IntN(50) == 0 {
			size = 1 + rng.IntN(5000)
		}
		for ndx := 0; ndx < size && written < n; ndx++ {
			fmt.Fprintf(w, "%s\t%d\n", name, ndx)
			written++
		}
	}
}

// cachedFile returns the path of name in -bench.dir, writing it with write
// (to a temporary file, then renamed) when it is not there yet.
func cachedFile(b *testing.B, name string, write func(w *bufio.Writer)) string {
	path := filepath.Join(*benchDir, name)
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if err := os.MkdirAll(*benchDir, 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(path + ".tmp")
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	write(w)
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkOOIDStdin: "backfill ooid -" on 1 M lines, against the
// ooni-uuid definition in plain Python on the same file.
func BenchmarkOOIDStdin(b *testing.B) {
	const n = 1_000_000
	in := ooidLines(b, n)
	bin := binary(b)
	for _, impl := range []struct{ name, cmd string }{{"backfill", bin}, {"python-reference", "python3"}} {
		b.Run("impl="+impl.name+"/lines=1e6", func(b *testing.B) {
			var total time.Duration
			var rss int64
			for b.Loop() {
				args := []string{"ooid", "-"}
				if impl.name != "backfill" {
					args = []string{"ooid_reference.py"}
				}
				d, r := run(b, in, impl.cmd, args...)
				total += d
				rss = max(rss, r)
			}
			b.ReportMetric(float64(n)*float64(b.N)/total.Seconds(), "lines/s")
			b.ReportMetric(float64(rss)/(1<<20), "maxrss_MiB")
		})
	}
}

// granuleLines writes n "ID<TAB>COLLECTION_ID" lines in batches of 1000 IDs
// per collection.
func granuleLines(b *testing.B, n int) string {
	return cachedFile(b, fmt.Sprintf("granule-lines-%d.tsv", n), func(w *bufio.Writer) {
		for i := range n {
			fmt.Fprintf(w, "MOD09GQ.A2017%03d.h%02dv%02d.006.2017227165020\tMOD09GQ___%03d\n", i%366, i%36, i%18, i/1000)
		}
	})
}

// BenchmarkGranuleStdin: "backfill granule-id -" on 1 M lines, deterministic
// and timestamped, against "cat" of the same file (the I/O floor).
func BenchmarkGranuleStdin(b *testing.B) {
	const n = 1_000_000
	in := granuleLines(b, n)
	bin := binary(b)
	for _, tc := range []struct {
		name string
		cmd  string
		args []string
	}{
		{"impl=cat", "cat", nil},
		{"impl=backfill/mode=deterministic", bin, []string{"granule-id", "-"}},
		{"impl=backfill/mode=timestamped", bin, []string{"granule-id", "--include-timestamp", "-"}},
	} {
		b.Run(tc.name+"/lines=1e6", func(b *testing.B) {
			var total time.Duration
			var rss int64
			for b.Loop() {
				d, r := run(b, in, tc.cmd, tc.args...)
				total += d
				rss = max(rss, r)
			}
			b.ReportMetric(float64(n)*float64(b.N)/total.Seconds(), "lines/s")
			b.ReportMetric(float64(rss)/(1<<20), "maxrss_MiB")
		})
	}
}
