package collisions

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkResolverAdd is the cost a run pays per report for the collision
// check (the writer adds every report once): corpus-like reports, most on a
// timestamp of their own, with textnames as long as real ones.
func BenchmarkResolverAdd(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 1 << 20
	names := make([]string, n)
	rgs := make([]Range, n)
	for i := range names {
		names[i] = fmt.Sprintf("2017-%02d-%02d/20170101T000000Z-IT-AS%d-web_connectivity-%064d-0.2.0-probe.json", 1+i%12, 1+i%28, i, rng.Uint64())
		rgs[i] = Range{TS: 1_480_000_000 + rng.Uint32N(30_000_000), Base: rng.Uint32() & (1<<28 - 1), N: 1 + rng.Uint32N(80)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var r *Resolver
	for i := 0; b.Loop(); i++ {
		if i%n == 0 {
			b.StopTimer()
			r = NewResolver(28)
			b.StartTimer()
		}
		r.Add(names[i%n], rgs[i%n], 0)
	}
}

// BenchmarkResolverMemory is the live heap a Resolver holds per report
// once 2^20 corpus-like reports are in it (heap_B/report), as the full
// archive's 3.6 M would hold it: the index, the ranges and verdicts, and
// the textnames it keeps in memory.
func BenchmarkResolverMemory(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 1 << 20
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r := NewResolver(28)
		for i := range n {
			name := fmt.Sprintf("2017-%02d-%02d/20170101T000000Z-IT-AS%d-web_connectivity-%064d-0.2.0-probe.json", 1+i%12, 1+i%28, i, rng.Uint64())
			r.Add(name, Range{TS: 1_480_000_000 + rng.Uint32N(30_000_000), Base: rng.Uint32() & (1<<28 - 1), N: 1 + rng.Uint32N(80)}, 0)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap_B/report")
		runtime.KeepAlive(r)
		if err := r.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
