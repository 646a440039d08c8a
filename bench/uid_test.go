package bench

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawJSON decompresses (once, cached) the JSON reports of the scale-1
// corpus into a folder of raw report files, as OONI's code reads them.
func rawJSON(b *testing.B, dir string) string {
	raw := dir + "-raw"
	if _, err := os.Stat(filepath.Join(raw, "done")); err == nil {
		return raw
	}
	os.RemoveAll(raw)
	cans, _ := filepath.Glob(filepath.Join(dir, "*", "*.tar.lz4"))
	for _, c := range cans {
		bucket := filepath.Join(raw, filepath.Base(filepath.Dir(c)))
		if err := os.MkdirAll(bucket, 0o755); err != nil {
			b.Fatal(err)
		}
		out, err := exec.Command("sh", "-c", `lz4 -dc "$0" | tar x -C "$1" --strip-components 1 --wildcards '*.json'`, c, bucket).CombinedOutput()
		if err != nil && !strings.Contains(string(out), "Not found in archive") {
			b.Fatalf("%s: %v\n%s", c, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(raw, "done"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return raw
}

// BenchmarkMeasurementUID runs backfill run over the scale-1 corpus (which
// compresses as text) with and without --measurement-uid, side by side,
// and OONI's way of computing the uids (uid_baseline.py: ujson, SHAKE128,
// strptime, one process) over its JSON reports already decompressed. It
// reports each run's time, the ratio of the run with the flag to the run
// without, and how many times faster than the baseline the run with the
// flag computes the uids of the JSON measurements (its whole run, YAML
// and decompression included, against the baseline's JSON alone).
func BenchmarkMeasurementUID(b *testing.B) {
	if _, err := exec.LookPath("lz4"); err != nil {
		b.Fatal("the lz4 CLI is needed to decompress the baseline's reports")
	}
	dir := corpus(b, 1)
	args := []string{"run", "--in", dir, "-q", "--json", "--workers", "2"}
	var plain, flag, ooni time.Duration
	var flagPer float64 // seconds a run with the flag takes
	var lines int64
	b.Run("run", func(b *testing.B) {
		for b.Loop() {
			for _, uid := range []bool{false, true} { // side by side, in turn
				a := append(args, "--out", b.TempDir())
				if uid {
					a = append(a, "--measurement-uid")
				}
				d, _ := timed(b, "", &bytes.Buffer{}, binary(b), a...)
				if uid {
					flag += d
				} else {
					plain += d
				}
			}
		}
		b.ReportMetric(plain.Seconds()/float64(b.N), "s_without")
		b.ReportMetric(flag.Seconds()/float64(b.N), "s_with")
		b.ReportMetric(plain.Seconds()/flag.Seconds(), "ratio_with_to_without")
		flagPer = flag.Seconds() / float64(b.N)
	})
	raw := rawJSON(b, dir)
	b.Run("ooni-baseline", func(b *testing.B) {
		if _, err := exec.Command("/usr/bin/python3", "-c", "import ujson").CombinedOutput(); err != nil {
			b.Skip("python3-ujson is not installed")
		}
		for b.Loop() {
			var out bytes.Buffer
			d, _ := timed(b, "", &out, "/usr/bin/python3", "uid_baseline.py", raw)
			ooni += d
			n, err := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
			if err != nil {
				b.Fatalf("baseline: %q", out.String())
			}
			lines = n
		}
		b.ReportMetric(ooni.Seconds()/float64(b.N), "s")
		b.ReportMetric(float64(lines), "json_measurements")
		if flagPer > 0 {
			b.ReportMetric(ooni.Seconds()/float64(b.N)/flagPer, "x_run_with_flag_faster")
		}
	})
}
