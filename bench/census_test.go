package bench

import (
	"bufio"
	"context"
	le "encoding/binary"
	"hash/maphash"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/pipeline/census"
	"github.com/backfill-dev/backfill/pipeline/ooniuid"
)

// manifestSource is a census source of the full-scale manifest's reports,
// in its order (bucket by bucket). The manifest has no bytes, so each
// measurement's hash is made from its report's basename and its ndx: a
// report uploaded again into a later bucket (6,479 of them) repeats its
// first upload's hashes, and one report in 500 repeats its first
// measurement as its second (a line repeated in a report).
func manifestSource(file string) census.Source {
	seed := maphash.MakeSeed()
	return func(ctx context.Context, fn func(census.Report) error) error {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var hashes []ooniuid.Hash
		last := ""
		for sc.Scan() {
			name, count, _ := strings.Cut(sc.Text(), "\t")
			n, err := strconv.Atoi(count)
			if err != nil {
				return err
			}
			base := path.Base(name)
			hashes = hashes[:0]
			for ndx := range n {
				var h ooniuid.Hash
				k := uint64(ndx)
				if ndx == 1 && maphash.String(seed, base)%500 == 0 {
					k = 0
				}
				var m maphash.Hash
				m.SetSeed(seed)
				m.WriteString(base)
				le.LittleEndian.PutUint64(h[:], m.Sum64()^k*0x9e3779b97f4a7c15)
				le.LittleEndian.PutUint64(h[7:], m.Sum64()+k)
				hashes = append(hashes, h)
			}
			bucket := path.Dir(name)
			if err := fn(census.Report{Textname: name, TS: 1, Base: 0, Bits: 28, Hashes: hashes, NewBucket: bucket != last}); err != nil {
				return err
			}
			last = bucket
		}
		return sc.Err()
	}
}

// BenchmarkCensusFullScale takes the census of the full-scale corpus's
// 147 M measurements in 3.6 M reports (hashes made up, see
// manifestSource), its pairs written to a file: the time, and the peak
// RSS of the benchmark's process (run it alone), under the heap limit the
// command sets, against the 512 MiB every path of a run keeps to.
func BenchmarkCensusFullScale(b *testing.B) {
	m := fullScaleManifest(b)
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(cli.HeapLimit))
	for b.Loop() {
		pairs, err := os.Create(b.TempDir() + "/pairs.csv")
		if err != nil {
			b.Fatal(err)
		}
		res, err := census.Run(b.Context(), manifestSource(m), pairs, b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		pairs.Close()
		b.ReportMetric(float64(res.Measurements), "measurements")
		b.ReportMetric(float64(res.Groups), "groups")
		b.ReportMetric(float64(res.ByKind[census.Retry]), "retry")
		b.ReportMetric(float64(res.ByKind[census.SameReport]), "same_report")
	}
	b.ReportMetric(float64(peakRSS(b))/(1<<20), "peak_rss_MiB")
}

// peakRSS is the process's peak resident set (VmHWM).
func peakRSS(b *testing.B) int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for l := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kib << 10
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}
