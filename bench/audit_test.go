package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// fullScaleManifest generates (once, cached) the report manifest of a
// corpus of the real one's shape: 3.6 M reports, 147 M measurements.
func fullScaleManifest(b *testing.B) string {
	b.Helper()
	path := filepath.Join(*benchDir, "ooni2018.tsv")
	if st, err := os.Stat(path); err == nil && st.Size() > 400<<20 {
		return path
	}
	out, err := exec.Command(binary(b), "gen", "--profile", "ooni2018", "--manifest-only", "--out", path).CombinedOutput()
	if err != nil {
		b.Fatalf("gen: %v\n%s", err, out)
	}
	return path
}

// BenchmarkAudit audits the full-scale manifest at the default scheme
// (the targets: 1.5 s and 200 MiB on two cores), with every core and with
// one worker, the baseline: pct_of_1_worker is the share of its time.
func BenchmarkAudit(b *testing.B) {
	m := fullScaleManifest(b)
	var one time.Duration
	for _, w := range []string{"1", "2"} {
		b.Run("workers="+w, func(b *testing.B) {
			var total time.Duration
			var rss int64
			for b.Loop() {
				var stdout bytes.Buffer
				d, r := timed(b, "", &stdout, binary(b), "audit", "--json", "--workers", w, m)
				total += d
				rss = max(rss, r)
				var res struct {
					Reports int64 `json:"reports"`
				}
				if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.Reports != 3_600_000 {
					b.Fatalf("audit: %v\n%s", err, stdout.Bytes())
				}
			}
			secs := total / time.Duration(b.N)
			if w == "1" {
				one = secs
			} else if one > 0 {
				b.ReportMetric(100*secs.Seconds()/one.Seconds(), "pct_of_1_worker")
			}
			b.ReportMetric(secs.Seconds(), "s")
			b.ReportMetric(float64(rss)/(1<<20), "maxrss_MiB")
		})
	}
}

// BenchmarkKeysearch finds a 24-bit key and a 20-bit key table for the
// full-scale manifest, beside an audit of it at the default scheme (one
// reading and hashing of the manifest; the search reads it twice).
func BenchmarkKeysearch(b *testing.B) {
	m := fullScaleManifest(b)
	var audit time.Duration
	for b.Loop() {
		d, _ := run(b, "", binary(b), "audit", m)
		audit += d
	}
	audit /= time.Duration(b.N)
	for _, bits := range []string{"24", "20"} {
		b.Run("bits="+bits, func(b *testing.B) {
			var total time.Duration
			var rss int64
			var res struct {
				Trials    uint64  `json:"trials"`
				Expected  float64 `json:"expected_trials"`
				Overrides int     `json:"overrides"`
				Search    float64 `json:"search_seconds"`
			}
			for b.Loop() {
				var stdout bytes.Buffer
				d, r := timed(b, "", &stdout, binary(b), "keysearch", "-q", "--json", "--counter-bits", bits,
					"--out", filepath.Join(b.TempDir(), "scheme.txt"), m)
				total += d
				rss = max(rss, r)
				if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
					b.Fatalf("keysearch: %v\n%s", err, stdout.Bytes())
				}
			}
			secs := total / time.Duration(b.N)
			b.ReportMetric(secs.Seconds(), "s")
			b.ReportMetric(res.Search, "search_s")
			b.ReportMetric(float64(res.Trials), "trials")
			b.ReportMetric(float64(res.Overrides), "overrides")
			b.ReportMetric(float64(rss)/(1<<20), "maxrss_MiB")
			b.ReportMetric(secs.Seconds()/audit.Seconds(), "x_audit")
		})
	}
}
