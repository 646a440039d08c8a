package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/scaleout"
)

// shardedManifests splits the full-scale manifest (3.6 M reports) by
// bucket date into the manifests of a 64-shard plan, as 64 map pods
// would leave them, and returns the plan file and the job's output.
func shardedManifests(b *testing.B, shards int) (string, string) {
	b.Helper()
	dir := filepath.Join(*benchDir, fmt.Sprintf("check-x%d", shards))
	planFile := filepath.Join(dir, "plan.json")
	if _, err := os.Stat(planFile); err == nil {
		return planFile, dir
	}
	f, err := os.Open(fullScaleManifest(b))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	byBucket := map[string][]scaleout.ManifestEntry{}
	err = collisions.ReadManifest(f, func(_ int64, textname []byte, n uint32) error {
		name := string(textname)
		id, err := ooid.DefaultScheme.Report(name)
		if err != nil {
			return nil
		}
		bucket := name[:10]
		byBucket[bucket] = append(byBucket[bucket], scaleout.ManifestEntry{TS: id.TS, Base: id.CounterBase(), N: n, Textname: name, Bucket: bucket})
		return nil
	}, func(error) {})
	if err != nil {
		b.Fatal(err)
	}
	var buckets []scaleout.Bucket
	for name, es := range byBucket {
		buckets = append(buckets, scaleout.Bucket{Name: name, Bytes: int64(len(es)), Fingerprint: "-"})
	}
	p, err := scaleout.NewPlan("/in", buckets, shards)
	if err != nil {
		b.Fatal(err)
	}
	for i := range shards {
		var es []scaleout.ManifestEntry
		names := p.Names(i)
		for _, n := range names {
			es = append(es, byBucket[n]...)
		}
		var buf bytes.Buffer
		if err := scaleout.EncodeManifest(&buf, scaleout.ManifestHeader{Scheme: ooid.DefaultScheme, Buckets: names}, es); err != nil {
			b.Fatal(err)
		}
		if err := store.WriteFile(context.Background(), store.Local(dir), fmt.Sprintf("shards/%d/manifest.tsv", i), buf.Bytes()); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(planFile, p.Marshal(), 0o644); err != nil {
		b.Fatal(err)
	}
	return planFile, dir
}

// BenchmarkCheckScale runs backfill check over the manifests of the
// full-scale corpus split into 64 shards: wall time and peak RSS, beside
// audit of the same reports from one manifest (the same settling work,
// from one file, hashing every textname).
func BenchmarkCheckScale(b *testing.B) {
	planFile, out := shardedManifests(b, 64)
	var total, audit time.Duration
	var rss, auditRSS int64
	for b.Loop() {
		d, r := timed(b, "", nil, binary(b), "check", "--plan", planFile, "--out", out)
		a, ar := timed(b, "", nil, binary(b), "audit", "--json", fullScaleManifest(b))
		total, audit, rss, auditRSS = total+d, audit+a, max(rss, r), max(auditRSS, ar)
	}
	b.ReportMetric((total / time.Duration(b.N)).Seconds(), "s")
	b.ReportMetric(float64(rss)/(1<<20), "rss_MiB")
	b.ReportMetric((audit / time.Duration(b.N)).Seconds(), "audit_s")
	b.ReportMetric(float64(auditRSS)/(1<<20), "audit_rss_MiB")
}
