// Package collisions finds the backfilled OOIDs that two reports would
// share, exactly, and says which report keeps its IDs.
//
// Two reports collide only when they share a timestamp and their counter
// ranges [base, base+n) modulo 2^bits overlap (docs/design.md §3). Four tools
// work on that fact:
//
//   - [Settle] is the policy, written as it reads, over the reports of
//     one timestamp: a report loses its IDs to the first report before it
//     in textname order whose IDs overlap its own. The scale-out merge
//     settles each shared timestamp with it.
//   - [Index] holds the IDs of every report added to it as the reports'
//     ranges, by timestamp, and answers, as a report is added, which
//     reports added before share an ID with it: it compares the report
//     with those of its timestamp alone. Safe for concurrent use: a shard
//     is chosen by the timestamp, so adders rarely wait on each other.
//   - [Resolver] applies the policy on top of an Index, as reports come in
//     any order: of two colliding reports, the one whose textname sorts
//     first keeps its IDs. It is tested against Settle.
//   - [Sweep] counts the collisions of many schemes (counter widths ×
//     SHA-1 offsets) in one pass, hashing each textname once, for
//     `backfill audit --offsets all`.
//
// # Memory
//
// The Index keeps 20 bytes per report (its range, its reference and the
// link to the report before it under the same timestamp) and 4/3 to 8/3
// table slots of 8 bytes per timestamp. A Resolver's index keeps no range
// (8 bytes per report); the Resolver adds 28 (the range, a tag, a verdict,
// where its textname is) and keeps the textnames themselves in memory up
// to 8 MiB, in a temporary file beyond (read back only to order two
// colliding reports and to name a winner). BenchmarkResolverMemory
// measures about 66 bytes of live heap per report at 2^20 reports, under a
// fifth of the 352 the bitmap index and in-memory textnames took; at the
// full archive's 3.6 M reports, about 230 MB. The Sweep keeps 32 bytes
// per report. None of it grows with the number of measurements.
package collisions

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

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

// Index is a set of reports' IDs, kept as the reports' ranges: for each
// timestamp, the ranges added under it, newest first. Two ranges can share
// an ID only under the same timestamp, so adding one compares it with
// those alone. The zero value is not usable; call [NewIndex].
type Index struct {
	bits   int
	shards []shard
	// rangeOf, when set, returns the range of a ref: the index then keeps
	// no range of its own (a Resolver keeps them all, by ref).
	rangeOf func(ref uint32) Range
}

// A shard holds the timestamps that hash to it: an open-addressing table
// from a timestamp to its newest entry, and the entries, each linked to
// the one added before it under the same timestamp.
type shard struct {
	mu    sync.Mutex
	slots []uint64 // ts<<32 | (entry+1); 0 is a free slot
	used  int
	ents  []entry
	rgs   []Range // by entry, unless the index has rangeOf
}

type entry struct {
	ref  uint32
	prev int32 // the entry added before under the same timestamp, or -1
}

// NewIndex returns an empty index for counters of bits bits.
func NewIndex(bits int) *Index {
	if bits < 1 || bits > 28 {
		panic(fmt.Sprintf("collisions: %d counter bits", bits))
	}
	return &Index{bits: bits, shards: make([]shard, 1<<shardBits)}
}

// rangeAt returns the range of entry e of shard s.
func (x *Index) rangeAt(s *shard, e int32) Range {
	if x.rangeOf != nil {
		return x.rangeOf(s.ents[e].ref)
	}
	return s.rgs[e]
}

// Bits returns the counter width of the index.
func (x *Index) Bits() int { return x.bits }

func hashTS(ts uint32) uint64 { return uint64(ts) * 0x9E3779B97F4A7C15 }

func (x *Index) shard(ts uint32) *shard { return &x.shards[hashTS(ts)>>(64-shardBits)] }

// slot returns the slot of ts: the one that holds it, or the free one
// where it goes.
func (s *shard) slot(ts uint32) int {
	mask := len(s.slots) - 1
	for i := int(hashTS(ts)>>20) & mask; ; i = (i + 1) & mask {
		if v := s.slots[i]; v == 0 || uint32(v>>32) == ts {
			return i
		}
	}
}

// grow doubles the table (it starts at 16 slots) once it is three
// quarters full.
func (s *shard) grow() {
	if 4*(s.used+1) <= 3*len(s.slots) {
		return
	}
	old := s.slots
	s.slots = make([]uint64, max(16, 2*len(old)))
	for _, v := range old {
		if v != 0 {
			s.slots[s.slot(uint32(v>>32))] = v
		}
	}
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
	s.grow()
	i := s.slot(r.TS)
	prev := int32(-1)
	if v := s.slots[i]; v != 0 {
		prev = int32(uint32(v)) - 1
	} else {
		s.used++
	}
	from := len(hits)
	for e := prev; e >= 0; e = s.ents[e].prev {
		if x.rangeAt(s, e).Overlaps(r, x.bits) {
			hits = append(hits, s.ents[e].ref)
		}
	}
	slices.Reverse(hits[from:]) // oldest first
	s.ents = append(s.ents, entry{ref: ref, prev: prev})
	if x.rangeOf == nil {
		s.rgs = append(s.rgs, r)
	}
	s.slots[i] = uint64(r.TS)<<32 | uint64(len(s.ents))
	return hits
}

// Cardinality returns the number of distinct IDs in the index.
func (x *Index) Cardinality() uint64 {
	var n uint64
	var spans [][2]uint32
	for i := range x.shards {
		s := &x.shards[i]
		s.mu.Lock()
		for _, v := range s.slots {
			if v == 0 {
				continue
			}
			spans = spans[:0]
			for e := int32(uint32(v)) - 1; e >= 0; e = s.ents[e].prev {
				rg := x.rangeAt(s, e)
				if rg.N == 0 {
					continue
				}
				first, second, wraps := rg.Spans(x.bits)
				spans = append(spans, first)
				if wraps {
					spans = append(spans, second)
				}
			}
			n += union(spans)
		}
		s.mu.Unlock()
	}
	return n
}

// union returns the number of values the half-open spans cover.
func union(spans [][2]uint32) uint64 {
	slices.SortFunc(spans, func(a, b [2]uint32) int { return cmp.Compare(a[0], b[0]) })
	var n uint64
	var end uint32
	for i, sp := range spans {
		lo := sp[0]
		if i > 0 && lo < end {
			lo = end
		}
		if sp[1] > lo {
			n += uint64(sp[1] - lo)
		}
		if i == 0 || sp[1] > end {
			end = sp[1]
		}
	}
	return n
}
