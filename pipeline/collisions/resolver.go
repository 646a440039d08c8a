package collisions

import "fmt"

// Settle is the collision policy of docs/design.md §3 over a group of
// reports given in textname order (equal textnames in the order they were
// listed), written as the rule reads: report i is rejected exactly when a
// report before it has IDs that overlap its own, whether or not that report
// was itself rejected, and its winner is the first of those; winners[i] is
// that report's index, or -1 when report i keeps its IDs. A report marked
// out (one whose range wraps onto itself, which its caller rejects on its
// own) takes no part. It compares every pair: it is for groups that share
// a timestamp, which are small, and it is what Resolver, which applies the
// same rule as reports come in any order, is tested against.
func Settle(ranges []Range, bits int, out []bool) (winners []int) {
	winners = make([]int, len(ranges))
	for i := range ranges {
		winners[i] = -1
		if out != nil && out[i] {
			continue
		}
		for j := range i {
			if (out == nil || !out[j]) && ranges[j].Overlaps(ranges[i], bits) {
				winners[i] = j
				break
			}
		}
	}
	return winners
}

// Resolver applies the collision policy of docs/design.md §3 to reports as they
// are added: of two reports whose IDs overlap, the one whose textname sorts
// first keeps its IDs and the other is rejected whole.
//
// The rule is applied to every colliding pair, whether or not the
// earlier-sorting report was itself rejected: a report is rejected exactly
// when some report colliding with it sorts before it, and its winner is the
// first-sorting of those. That makes the verdicts a function of the set of
// reports, never of the order they were added in, and a verdict only
// changes one way while reports are added (accepted → rejected, or to a
// winner that sorts earlier). Equal textnames (the same report listed
// twice) go to the one added first.
//
// A Resolver is not safe for concurrent use.
type Resolver struct {
	idx    *Index
	names  names
	ranges []Range
	tags   []uint32
	winner []int32 // ref of the first-sorting colliding report that sorts before, or -1
	hits   []uint32
}

// NewResolver returns an empty resolver for counters of bits bits.
func NewResolver(bits int) *Resolver {
	r := &Resolver{idx: NewIndex(bits)}
	r.idx.rangeOf = func(ref uint32) Range { return r.ranges[ref] }
	return r
}

// Add adds a report, tagged with a number of the caller's (its bucket,
// say), and returns its reference and the references of the reports whose
// verdict changed, the new one included when it loses. A range that wraps
// onto itself must be rejected by the caller before it gets here; Add
// ignores the self-overlap.
func (r *Resolver) Add(name string, rg Range, tag uint32) (ref uint32, changed []uint32) {
	ref = uint32(r.names.len())
	r.names.add(name)
	r.ranges = append(r.ranges, rg)
	r.tags = append(r.tags, tag)
	r.winner = append(r.winner, -1)
	r.hits = r.idx.add(rg, ref, r.hits[:0])
	for _, h := range r.hits {
		if h == ref {
			continue
		}
		if r.before(h, ref) {
			if w := r.winner[ref]; w < 0 || r.before(h, uint32(w)) {
				r.winner[ref] = int32(h)
			}
			continue
		}
		if w := r.winner[h]; w < 0 || r.before(ref, uint32(w)) {
			r.winner[h] = int32(ref)
			changed = append(changed, h)
		}
	}
	if r.winner[ref] >= 0 {
		changed = append(changed, ref)
	}
	return ref, changed
}

// before reports whether a keeps its IDs over b.
func (r *Resolver) before(a, b uint32) bool {
	if na, nb := r.names.get(a), r.names.get(b); na != nb {
		return na < nb
	}
	return a < b
}

// Len returns the number of reports added.
func (r *Resolver) Len() int { return r.names.len() }

// Name returns the textname of a report.
func (r *Resolver) Name(ref uint32) string { return r.names.get(ref) }

// Range returns the range of a report.
func (r *Resolver) Range(ref uint32) Range { return r.ranges[ref] }

// Tag returns the tag a report was added with.
func (r *Resolver) Tag(ref uint32) uint32 { return r.tags[ref] }

// Winner returns the report that keeps the IDs a report shares with it
// (the first-sorting one when there are several), and false when the
// report keeps its own.
func (r *Resolver) Winner(ref uint32) (uint32, bool) {
	w := r.winner[ref]
	return uint32(w), w >= 0
}

// Message says why loser lost to winner, as the dead-letter archive
// records it. It depends only on the two reports, so every path to the
// same verdict writes the same record.
func Message(winner string, wr, lr Range, bits int) string {
	return fmt.Sprintf("its IDs overlap those of %s (%s; this report %s; mod 2^%d): the textname that sorts first keeps its IDs",
		winner, wr, lr, bits)
}

// Bits returns the counter width.
func (r *Resolver) Bits() int { return r.idx.Bits() }

// Err returns the first error of the file the textnames go to once they
// are many: past it, verdicts and names may be wrong, and the caller must
// fail.
func (r *Resolver) Err() error { return r.names.err }

// Close releases the textnames' file. The Resolver is not used after.
func (r *Resolver) Close() error { return r.names.close() }
