package ooniuid

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// bigEntry is a YAML entry of about size bytes whose test_keys hold a flow
// list of small scalars: the shape that costs a loader most per byte.
func bigEntry(size int, item func(i int) string) []byte {
	var b strings.Builder
	b.WriteString("---\ninput: example.com\ntest_start_time: 1388880000.5\nbig: [")
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteString(", ")
			if i%16 == 0 {
				b.WriteString("\n  ")
			}
		}
		b.WriteString(item(i))
	}
	b.WriteString("]\n...\n")
	return []byte(b.String())
}

// BenchmarkYAMLEntry gives one entry its uid, with the fast path and, as
// the baseline of the same run, with the faithful loader alone: the
// bytes allocated per byte of the entry (x_size_alloc, a bound on the
// entry's peak memory) and MB/s.
func BenchmarkYAMLEntry(b *testing.B) {
	header := []byte("---\nprobe_cc: ZZ\nprobe_asn: AS0\nreport_id: r\ntest_name: http_requests\nstart_time: 1388880000.0\n...\n")
	items := map[string]func(int) string{
		"ints":    func(i int) string { return fmt.Sprint(i % 10) },
		"strings": func(i int) string { return "ab" },
	}
	for _, shape := range []string{"ints", "strings"} {
		for _, size := range []int{1 << 20, 8 << 20} {
			doc := bigEntry(size, items[shape])
			h := Sum(doc)
			for _, path := range []string{"fast", "faithful"} {
				b.Run(fmt.Sprintf("%s/%dMiB/%s", shape, size>>20, path), func(b *testing.B) {
					fastPath = path == "fast"
					defer func() { fastPath = true }()
					b.SetBytes(int64(len(doc)))
					var before, after runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&before)
					for b.Loop() {
						y := NewYAMLReport(header)
						if uid := y.UID(doc, h); uid == "" {
							b.Fatal("no uid")
						}
					}
					runtime.ReadMemStats(&after)
					b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(len(doc)), "x_size_alloc")
				})
			}
		}
	}
}
