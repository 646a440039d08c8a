package collector

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// snowflake is the baseline: a Snowflake-style generator in memory only
// (timestamp read per ID, a per-tick sequence, spin to the next tick when
// it runs out), laid out as 32:8:24 like the stamper.
type snowflake struct {
	mu    sync.Mutex
	clock func() time.Time
	id    uint64
	sec   uint32
	next  uint32
}

func (g *snowflake) Next() ooid.ID {
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		now := uint32(g.clock().Unix())
		if now > g.sec {
			g.sec, g.next = now, 0
		}
		if g.next <= ooid.MaxCollectorCounter {
			id := ooid.ID(uint64(g.sec)<<32 | g.id<<24 | uint64(g.next))
			g.next++
			return id
		}
	}
}

// fastClock is the wall clock run 64 times fast: read the same way as
// time.Now, it keeps a collector's 2^24 IDs a second from bounding what
// the benchmarks measure (the CPU cost per ID).
func fastClock() func() time.Time {
	start := time.Now()
	return func() time.Time { return start.Add(64 * time.Since(start)) }
}

// The stamper (with a real state file) beside the baseline, both on
// fastClock. Run with
//
//	go test -run '^$' -bench . -cpu 1 ./collector/
func BenchmarkNext(b *testing.B) {
	b.Run("baseline=snowflake", func(b *testing.B) {
		g := &snowflake{id: 42, clock: fastClock()}
		var last ooid.ID
		for b.Loop() {
			last = g.Next()
		}
		_ = last
		reportRate(b, 1)
	})
	b.Run("stamper", func(b *testing.B) {
		s := benchStamper(b)
		var last ooid.ID
		for b.Loop() {
			id, err := s.Next()
			if err != nil {
				b.Fatal(err)
			}
			last = id
		}
		_ = last
		reportRate(b, 1)
	})
}

// Fill in batches of 1,000 IDs.
func BenchmarkFill(b *testing.B) {
	const batch = 1000
	ids := make([]ooid.ID, batch)
	b.Run("baseline=snowflake", func(b *testing.B) {
		g := &snowflake{id: 42, clock: fastClock()}
		for b.Loop() {
			for i := range ids {
				ids[i] = g.Next()
			}
		}
		reportRate(b, batch)
	})
	b.Run("stamper", func(b *testing.B) {
		s := benchStamper(b)
		for b.Loop() {
			if err := s.Fill(ids); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b, batch)
	})
}

// How often the mark is written at a steady rate of IDs, over an hour of
// a simulated clock (the default lease and lead bound), reported as
// writes per hour.
func BenchmarkStateWrites(b *testing.B) {
	for _, rate := range []int{1_000, 1_000_000, 16_000_000} {
		b.Run(fmt.Sprintf("ids_per_s=%d", rate), func(b *testing.B) {
			const hour = 3600
			seconds := hour
			if rate > 1_000_000 {
				seconds = 120 // a simulated hour at 16 M/s is 58 G IDs
			}
			ids := make([]ooid.ID, min(rate, 1<<20))
			var writes int
			for b.Loop() {
				c := &fakeClock{t: t0}
				s, err := Open(Options{CollectorID: 42, State: filepath.Join(b.TempDir(), "state"), Clock: c.Now, Sleep: c.Sleep})
				if err != nil {
					b.Fatal(err)
				}
				for range seconds {
					for left := rate; left > 0; left -= len(ids) {
						if err := s.Fill(ids[:min(left, len(ids))]); err != nil {
							b.Fatal(err)
						}
					}
					c.Add(time.Second)
				}
				writes = s.Writes()
				s.Close()
			}
			b.ReportMetric(float64(writes)*hour/float64(seconds), "writes/hour")
		})
	}
}

func benchStamper(b *testing.B) *Stamper {
	s, err := Open(Options{CollectorID: 42, State: filepath.Join(b.TempDir(), "state"), Clock: fastClock()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func reportRate(b *testing.B, per int) {
	b.ReportMetric(float64(b.N)*float64(per)/b.Elapsed().Seconds()/1e6, "M_IDs/s")
}
