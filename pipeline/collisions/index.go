// Package collisions finds the backfilled OOIDs that two reports would
// share, exactly, and says which report keeps its IDs.
//
// Two reports collide only when they share a timestamp and their counter
// ranges [base, base+n) modulo 2^bits overlap (docs/design.md §3). Three tools
// work on that fact:
//
//   - [Index] holds the IDs of every report added to it in a sharded
//     RoaringBitmap (roaring64) and answers, as a report is added, whether
//     any of its IDs were taken and by which reports. Safe for concurrent
//     use: a shard is chosen by the timestamp, so adders rarely wait on
//     each other.
//   - [Resolver] applies the policy on top of an Index: of two colliding
//     reports, the one whose textname sorts first keeps its IDs.
//   - [Sweep] evaluates many schemes (counter widths × SHA-1 offsets) in
//     one pass, hashing each textname once, for `backfill audit --offsets
//     all`.
//
// # Memory
//
// The Index keeps a 32-bit roaring bitmap per sixteen seconds that hold a
// report (run containers: a report's consecutive counters are one run, two
// when they wrap around) and 16 bytes per report for the interval list that
// names the other report of a collision. Measured on the full-scale
// synthetic corpus (3.6 M reports on 3.2 M distinct timestamps): 390 MB of
// live heap, about 110 bytes per report, and about twice that in the
// process at Go's default GC target. A Resolver adds the textnames (about
// 120 bytes per report) and 20 bytes per report. The Auditor keeps 32 bytes
// per report. None of it grows with the number of measurements.
package collisions

import (
	"fmt"
	"sync"

	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// Range is the span of IDs of one report: counters Base, Base+1, ...,
// Base+N-1 modulo 2^bits, under timestamp TS.
type Range struct {
	TS   uint32
	Base uint32
	N    uint32
}

// Overlaps reports whether two ranges share an ID in a counter space of
// 2^bits values.
func (r Range) Overlaps(o Range, bits int) bool {
	if r.TS != o.TS || r.N == 0 || o.N == 0 {
		return false
	}
	size := uint64(1) << uint(bits)
	mask := uint32(size - 1)
	// Circular intervals meet when either start lies inside the other.
	return uint64((o.Base-r.Base)&mask) < uint64(r.N) || uint64((r.Base-o.Base)&mask) < uint64(o.N)
}

// Spans returns the range's counters, modulo 2^bits, as the half-open
// spans [first[0], first[1]) and, when they wrap past 2^bits - 1,
// [second[0], second[1]) from 0; wraps tells which. A range of more
// counters than there are covers them all once. This is the one place the
// wrap is worked out: the index, the sinks' ID ranges and spans use it.
func (r Range) Spans(bits int) (first, second [2]uint32, wraps bool) {
	size := uint64(1) << uint(bits)
	n := min(uint64(r.N), size)
	lo := uint64(r.Base) & (size - 1)
	if lo+n <= size {
		return [2]uint32{uint32(lo), uint32(lo + n)}, second, false
	}
	return [2]uint32{uint32(lo), uint32(size)}, [2]uint32{0, uint32(lo + n - size)}, true
}

// SelfOverlaps reports whether the range wraps onto itself: more
// measurements than counter values.
func (r Range) SelfOverlaps(bits int) bool { return uint64(r.N) > uint64(1)<<uint(bits) }

// String formats the range as the dead-letter archive shows it.
func (r Range) String() string {
	return fmt.Sprintf("ts %d counters [%d, +%d)", r.TS, r.Base, r.N)
}

// RangeOf returns the range of a report of n measurements.
func RangeOf(r ooid.ReportIDs, n uint32) Range {
	return Range{TS: r.TS, Base: r.CounterBase(), N: n}
}

const shardBits = 12

// Index is a set of reports' IDs. The zero value is not usable; call
// [NewIndex].
type Index struct {
	bits   int
	shards []shard
}

type shard struct {
	mu    sync.Mutex
	ids   *roaring64.Bitmap // every ID added
	probe *roaring64.Bitmap // scratch: the IDs of the range being added
	ents  []entry           // every range added, to name the other report
}

type entry struct {
	Range
	ref uint32
}

// NewIndex returns an empty index for counters of bits bits.
func NewIndex(bits int) *Index {
	if bits < 1 || bits > 28 {
		panic(fmt.Sprintf("collisions: %d counter bits", bits))
	}
	return &Index{bits: bits, shards: make([]shard, 1<<shardBits)}
}

// Bits returns the counter width of the index.
func (x *Index) Bits() int { return x.bits }

// A shard holds the timestamps of one value of ts>>4 hashed: sixteen
// neighbouring seconds share a 32-bit roaring bitmap inside roaring64.
func (x *Index) shard(ts uint32) *shard {
	return &x.shards[((ts>>4)*0x9E3779B1)>>(32-shardBits)]
}

// segments returns the range as at most two [lo, hi) spans of the key
// space (the second when it wraps around 2^bits). A key is ts<<28|counter:
// the OOID without its constant 0xF nibble, so that roaring64, which keeps
// one 32-bit bitmap per value of the high 32 bits, keeps one per sixteen
// seconds rather than one per second, which takes a quarter of the memory.
func (x *Index) segments(r Range) [][2]uint64 {
	hi := uint64(r.TS) << 28
	first, second, wraps := r.Spans(x.bits)
	out := [][2]uint64{{hi + uint64(first[0]), hi + uint64(first[1])}}
	if wraps {
		out = append(out, [2]uint64{hi + uint64(second[0]), hi + uint64(second[1])})
	}
	return out
}

// Add adds the IDs of a report and returns the references of the reports
// added before whose IDs it shares, in the order they were added. A range
// that wraps onto itself (more measurements than counter values) names its
// own ref. A range of no measurements collides with nothing but is still
// recorded.
func (x *Index) Add(r Range, ref uint32) []uint32 {
	return x.add(r, ref, nil)
}

func (x *Index) add(r Range, ref uint32, hits []uint32) []uint32 {
	if r.SelfOverlaps(x.bits) {
		hits = append(hits, ref)
	}
	s := x.shard(r.TS)
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.N > 0 {
		segs := x.segments(r)
		if s.ids == nil {
			s.ids, s.probe = roaring64.New(), roaring64.New()
		} else {
			s.probe.Clear()
			for _, g := range segs {
				s.probe.AddRange(g[0], g[1])
			}
			if s.ids.Intersects(s.probe) {
				for _, e := range s.ents {
					if e.Overlaps(r, x.bits) {
						hits = append(hits, e.ref)
					}
				}
			}
		}
		for _, g := range segs {
			s.ids.AddRange(g[0], g[1])
		}
	}
	s.ents = append(s.ents, entry{r, ref})
	return hits
}

// Cardinality returns the number of distinct IDs in the index.
func (x *Index) Cardinality() uint64 {
	var n uint64
	for i := range x.shards {
		s := &x.shards[i]
		s.mu.Lock()
		if s.ids != nil {
			n += s.ids.GetCardinality()
		}
		s.mu.Unlock()
	}
	return n
}
