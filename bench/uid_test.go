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

// rawReports decompresses (once, cached) the reports of the scale-1
// corpus into a folder of raw report files, as OONI's code reads them.
func rawReports(b *testing.B, dir string) string {
	raw := dir + "-raw-all"
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
		out, err := exec.Command("sh", "-c", `lz4 -dc "$0" | tar x -C "$1" --strip-components 1`, c, bucket).CombinedOutput()
		if err != nil {
			b.Fatalf("%s: %v\n%s", c, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(raw, "done"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return raw
}

// yamlSample is how many bytes of YAML documents the baseline loads: at
// under 1 MB/s, the corpus's would take minutes.
const yamlSample = 8 << 20

// BenchmarkMeasurementUID runs backfill run over the scale-1 corpus (which
// compresses as text) with and without --measurement-uid, side by side,
// and OONI's way of computing the uids (uid_baseline.py, one process) over
// the same reports already decompressed: its JSON lines all, its YAML
// documents on a sample, from which their time in all is projected by
// bytes. It reports each run's time, the ratio of the run with the flag
// to the run without, and how many times faster than the baseline the run
// with the flag computes the uids (its whole run, decompression included):
// against the baseline in all (x_run_with_flag_faster), and against its
// JSON lines alone (x_against_json_alone, a bound that gives the tool's
// YAML work away).
func BenchmarkMeasurementUID(b *testing.B) {
	if _, err := exec.LookPath("lz4"); err != nil {
		b.Fatal("the lz4 CLI is needed to decompress the baseline's reports")
	}
	dir := corpus(b, 1)
	args := []string{"run", "--in", dir, "-q", "--json", "--workers", "2"}
	var plain, flag, plainCPU, flagCPU time.Duration
	var flagPer float64 // seconds a run with the flag takes
	b.Run("run", func(b *testing.B) {
		for b.Loop() {
			for _, uid := range []bool{false, true} { // side by side, in turn
				a := append(args, "--out", b.TempDir())
				if uid {
					a = append(a, "--measurement-uid")
				}
				d, cpu := cpuTimed(b, binary(b), a...)
				if uid {
					flag, flagCPU = flag+d, flagCPU+cpu
				} else {
					plain, plainCPU = plain+d, plainCPU+cpu
				}
			}
		}
		b.ReportMetric(plain.Seconds()/float64(b.N), "s_without")
		b.ReportMetric(flag.Seconds()/float64(b.N), "s_with")
		b.ReportMetric(plain.Seconds()/flag.Seconds(), "ratio_with_to_without")
		// The same in CPU time (user and system): less swayed by what
		// else the machine runs.
		b.ReportMetric(plainCPU.Seconds()/flagCPU.Seconds(), "ratio_cpu")
		flagPer = flag.Seconds() / float64(b.N)
	})
	raw := rawReports(b, dir)
	b.Run("ooni-baseline", func(b *testing.B) {
		if out, err := exec.Command("/usr/bin/python3", "-c", "import ujson, yaml").CombinedOutput(); err != nil {
			b.Fatalf("the baseline needs python3-ujson and python3-yaml: %s", out)
		}
		var jsonS, yamlS float64
		var f [6]float64
		for b.Loop() {
			var out bytes.Buffer
			timed(b, "", &out, "/usr/bin/python3", "uid_baseline.py", "--yaml-bytes", strconv.Itoa(yamlSample), raw)
			fields := strings.Fields(out.String())
			if len(fields) != len(f) {
				b.Fatalf("baseline: %q", out.String())
			}
			for i, s := range fields {
				v, err := strconv.ParseFloat(s, 64)
				if err != nil {
					b.Fatalf("baseline: %q", out.String())
				}
				f[i] = v
			}
			jsonS += f[1]
			yamlS += f[4] * f[5] / f[3] // projected over every document
		}
		n := float64(b.N)
		b.ReportMetric(jsonS/n, "s_json")
		b.ReportMetric(yamlS/n, "s_yaml_projected")
		b.ReportMetric(f[0], "json_measurements")
		b.ReportMetric(f[3]/f[4]/1e6, "yaml_MB/s")
		if flagPer > 0 {
			b.ReportMetric((jsonS+yamlS)/n/flagPer, "x_run_with_flag_faster")
			b.ReportMetric(jsonS/n/flagPer, "x_against_json_alone")
		}
	})
}

// cpuTimed runs name with args and returns its wall-clock time and the
// CPU time (user and system) it and its children used.
func cpuTimed(b *testing.B, name string, args ...string) (wall, cpu time.Duration) {
	b.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &bytes.Buffer{}, os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s %v: %v", name, args, err)
	}
	return time.Since(start), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}
