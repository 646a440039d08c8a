package ooniuid

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestMain is also the child process of BenchmarkYAMLEntryRSS: with
// OONIUID_ENTRY_CHILD set to a size, it gives one entry of that size its
// uid, and exits.
func TestMain(m *testing.M) {
	if size := os.Getenv("OONIUID_ENTRY_CHILD"); size != "" {
		n, err := strconv.Atoi(size)
		if err != nil {
			panic(err)
		}
		fastPath = os.Getenv("OONIUID_ENTRY_FAITHFUL") == ""
		doc := bigEntry(n, entryItems[os.Getenv("OONIUID_ENTRY_SHAPE")])
		if NewYAMLReport(entryHeader).UID(doc, Sum(doc)) == "" {
			panic("no uid")
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var entryHeader = []byte("---\nprobe_cc: ZZ\nprobe_asn: AS0\nreport_id: r\ntest_name: http_requests\nstart_time: 1388880000.0\n...\n")

var entryItems = map[string]func(int) string{
	"ints":    func(i int) string { return strconv.Itoa(i % 10) },
	"strings": func(int) string { return "ab" },
}

// BenchmarkYAMLEntryRSS gives one entry its uid in a process of its own,
// with the fast path and with the faithful loader alone: the process's
// peak resident memory beyond that of a process that loads a tiny entry,
// per byte of the entry (x_size_rss).
func BenchmarkYAMLEntryRSS(b *testing.B) {
	rss := func(b *testing.B, size int, shape string, faithful bool) int64 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "OONIUID_ENTRY_CHILD="+strconv.Itoa(size), "OONIUID_ENTRY_SHAPE="+shape)
		if faithful {
			cmd.Env = append(cmd.Env, "OONIUID_ENTRY_FAITHFUL=1")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
		return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	}
	for _, shape := range []string{"ints", "strings"} {
		for _, path := range []string{"fast", "faithful"} {
			b.Run(shape+"/8MiB/"+path, func(b *testing.B) {
				var extra float64
				for b.Loop() {
					extra += float64(rss(b, 8<<20, shape, path == "faithful") - rss(b, 0, shape, path == "faithful"))
				}
				b.ReportMetric(extra/float64(b.N)/float64(8<<20), "x_size_rss")
			})
		}
	}
}

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
	header, items := entryHeader, entryItems
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
