package collisions

import (
	"cmp"
	"crypto/sha1"
	"fmt"
	"math"
	"slices"

	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// Pair is two colliding reports, by the references they were added with.
// A report whose range wraps onto itself is a pair with itself.
type Pair struct{ A, B uint32 }

// Result is the outcome of one scheme over a set of reports.
type Result struct {
	Scheme ooid.Scheme
	// Pairs is the number of colliding report pairs.
	Pairs int64
	// Measurements is the number of measurements of the reports in at
	// least one pair.
	Measurements int64
	// First holds up to the sweep's keep pairs, in timestamp order.
	First []Pair
	// Groups are the timestamps shared by two reports or more, for
	// [Predict].
	Groups []Group
}

// Group is the reports sharing one timestamp: K reports holding M
// measurements in all.
type Group struct{ K, M int64 }

// Sweep counts the collisions of a set of reports under one or many
// schemes. It keeps each report's timestamp, size and counter base under
// each hash the schemes use (16 bytes a report for one scheme; for more
// than four SHA-1 offsets, the SHA-1 itself), then, in [Sweep.Finish],
// sorts them by timestamp and checks every scheme on each group of reports
// sharing one: only those can collide. For one scheme that finds exactly
// what an [Index] finds (the tests hold both to a brute-force set of IDs),
// in a tenth of the memory, because the audit has every report before it
// starts; a run, which gets them one bucket at a time and must answer at
// once, uses the Index.
type Sweep struct {
	schemes []ooid.Scheme
	keep    int
	hashes  hashes
	reps    []sweepRep
	bases   []uint32   // stride hashes.stride, by ref
	sums    [][20]byte // by ref, when hashes.sums

	Reports, Measurements int64
}

type sweepRep struct{ ts, n, ref uint32 }

// maxWindows is the most SHA-1 offsets whose windows the sweep keeps
// (4 bytes each); beyond, it keeps the 20-byte SHA-1.
const maxWindows = 4

// hashes are the distinct counter-base hashes of the audited schemes:
// SHA-1 windows by offset and keyed schemes by key table.
type hashes struct {
	offsets []int            // distinct SHA-1 offsets, in bases unless sums
	keyed   []*ooid.KeyTable // distinct key tables, in bases after the windows
	sums    bool             // the SHA-1 is kept; offsets are not in bases
	stride  int              // bases per report
	of      []int            // per scheme: its position in bases, or -1 for a window read from sums
}

func newHashes(schemes []ooid.Scheme) hashes {
	var h hashes
	for _, s := range schemes {
		if !s.Keyed() && !slices.Contains(h.offsets, s.SHA1Offset) {
			h.offsets = append(h.offsets, s.SHA1Offset)
		}
		if s.Keyed() && !slices.ContainsFunc(h.keyed, func(k *ooid.KeyTable) bool { return k.ID() == s.Table }) {
			h.keyed = append(h.keyed, s.Keys())
		}
	}
	h.sums = len(h.offsets) > maxWindows
	windows := len(h.offsets)
	if h.sums {
		windows = 0
	}
	h.stride = windows + len(h.keyed)
	for _, s := range schemes {
		switch {
		case s.Keyed():
			h.of = append(h.of, windows+slices.IndexFunc(h.keyed, func(k *ooid.KeyTable) bool { return k.ID() == s.Table }))
		case h.sums:
			h.of = append(h.of, -1)
		default:
			h.of = append(h.of, slices.Index(h.offsets, s.SHA1Offset))
		}
	}
	return h
}

// base returns the bases of a textname under each hash (28 bits each) and,
// when kept, its SHA-1.
func (h *hashes) base(textname []byte, ts uint32, out []uint32, sum *[20]byte) []uint32 {
	if h.sums || len(h.offsets) > 0 {
		*sum = sha1.Sum(textname)
	}
	if !h.sums {
		for _, off := range h.offsets {
			out = append(out, ooid.Window(sum, off))
		}
	}
	for _, k := range h.keyed {
		out = append(out, uint32(ooid.SipHash24(k.KeyFor(ts), textname))&(1<<28-1))
	}
	return out
}

// NewSweep returns a sweep for every combination of the counter
// widths and SHA-1 offsets, keeping up to keep pairs of each.
func NewSweep(bits, offsets []int, keep int) (*Sweep, error) {
	var schemes []ooid.Scheme
	for _, b := range bits {
		for _, o := range offsets {
			schemes = append(schemes, ooid.Scheme{CounterBits: b, SHA1Offset: o})
		}
	}
	return NewSchemeSweep(schemes, keep)
}

// NewSchemeSweep returns a sweep for the given schemes, SHA-1
// windows or keyed, keeping up to keep pairs of each.
func NewSchemeSweep(schemes []ooid.Scheme, keep int) (*Sweep, error) {
	for _, s := range schemes {
		if err := s.Validate(); err != nil {
			return nil, err
		}
	}
	if len(schemes) == 0 {
		return nil, fmt.Errorf("collisions: no scheme to audit")
	}
	return &Sweep{keep: keep, schemes: schemes, hashes: newHashes(schemes)}, nil
}

// Grow makes room for n more reports, so that adding them does not copy
// what was added before (a manifest's size over a short line is a bound).
// The room is not written to until reports fill it, so what a bound too
// high leaves unused costs no memory.
func (a *Sweep) Grow(n int) {
	a.reps = room(a.reps, n)
	a.bases = room(a.bases, n*a.hashes.stride)
	if a.hashes.sums {
		a.sums = room(a.sums, n)
	}
}

// room returns s with room for n more elements. Unlike slices.Grow, which
// zeroes the whole new room (touching every page of it), it leaves the
// room as the allocator gives it: memory new from the system is not
// touched until it is used.
func room[E any](s []E, n int) []E {
	if n <= cap(s)-len(s) {
		return s
	}
	return append(make([]E, 0, len(s)+n), s...)
}

// Add adds a report of n measurements. It fails, adding nothing, for a
// textname that gets no IDs.
func (a *Sweep) Add(textname []byte, n uint32) error {
	t, err := ooid.ParseTextnameBytes(textname)
	if err != nil {
		return err
	}
	var sum [20]byte
	a.bases = a.hashes.base(textname, t.TS, a.bases, &sum)
	if a.hashes.sums {
		a.sums = append(a.sums, sum)
	}
	a.reps = append(a.reps, sweepRep{ts: t.TS, n: n, ref: uint32(a.Reports)})
	a.Reports++
	a.Measurements += int64(n)
	return nil
}

// Finish returns one result per scheme, widths in the order given, then
// offsets.
func (a *Sweep) Finish() []Result {
	h := &a.hashes
	return sweepSchemes(a.reps, a.schemes, a.keep, func(si int, p *sweepRep) uint32 {
		mask := a.schemes[si].Mask()
		if at := h.of[si]; at >= 0 {
			return a.bases[int(p.ref)*h.stride+at] & mask
		}
		return ooid.Window(&a.sums[p.ref], a.schemes[si].SHA1Offset) & mask
	})
}

func appendGroups(out []Group, n int, at func(int) (ts, n uint32)) []Group {
	for i := 0; i < n; {
		ts, _ := at(i)
		g := Group{}
		for ; i < n; i++ {
			t, m := at(i)
			if t != ts {
				break
			}
			g.K++
			g.M += int64(m)
		}
		if g.K > 1 {
			out = append(out, g)
		}
	}
	return out
}

// sweepSchemes evaluates every scheme on the reports, grouped by timestamp. Only
// groups of two reports or more can collide, and a report too long for the
// counter space collides with itself.
func sweepSchemes(reps []sweepRep, schemes []ooid.Scheme, keep int, base func(si int, p *sweepRep) uint32) []Result {
	reps = sortByTS(reps)
	res := make([]Result, len(schemes))
	for i, s := range schemes {
		res[i].Scheme = s
	}
	groups := appendGroups(nil, len(reps), func(i int) (uint32, uint32) { return reps[i].ts, reps[i].n })
	for i := range res {
		res[i].Groups = groups
	}
	minBits := schemes[0].CounterBits
	for _, s := range schemes {
		minBits = min(minBits, s.CounterBits)
	}
	var rgs []Range
	var inv []bool
	for lo := 0; lo < len(reps); {
		hi := lo + 1
		for hi < len(reps) && reps[hi].ts == reps[lo].ts {
			hi++
		}
		g := reps[lo:hi]
		lo = hi
		if len(g) == 1 && uint64(g[0].n) <= uint64(1)<<uint(minBits) {
			continue
		}
		for si, s := range schemes {
			r := &res[si]
			rgs, inv = rgs[:0], inv[:0]
			for pi := range g {
				p := &g[pi]
				rgs = append(rgs, Range{TS: p.ts, Base: base(si, p), N: p.n})
				inv = append(inv, false)
			}
			for x := range g {
				if rgs[x].SelfOverlaps(s.CounterBits) {
					r.add(Pair{g[x].ref, g[x].ref}, keep)
					inv[x] = true
				}
				for y := x + 1; y < len(g); y++ {
					if rgs[x].Overlaps(rgs[y], s.CounterBits) {
						r.add(Pair{g[x].ref, g[y].ref}, keep)
						inv[x], inv[y] = true, true
					}
				}
			}
			for x, in := range inv {
				if in {
					r.Measurements += int64(g[x].n)
				}
			}
		}
	}
	return res
}

func (r *Result) add(p Pair, keep int) {
	r.Pairs++
	if len(r.First) < keep {
		r.First = append(r.First, p)
	}
}

// Predict returns log2 of the probability that no two reports collide
// when every report of a group gets a uniformly random counter base in a
// space of 2^bits values: the model of the ooid-hash-prob notebook,
//
//	P_group = C(2^bits − M + K, K) · K! / (2^bits)^K,   P = Π P_group,
//
// the number of placements of K non-overlapping intervals of total length
// M on a line of 2^bits points over the number of all placements (it
// ignores wrap-around, as the notebook does). The product is taken as a
// sum of logarithms, so it neither underflows nor loses precision. A group
// with more measurements than counter values gives -Inf.
func Predict(groups []Group, bits int) float64 { return predict(groups, bits, 0) }

// PredictCircular is [Predict] for the counter space as it is: a circle of
// 2^bits values, on which a range may wrap around. Fixing the first range
// of a group anywhere, the other K−1 ranges and the N−M free values can be
// laid out after it in (N−M+K−1)!/(N−M)! ways, so
//
//	P_group = Π_{i=1..K−1} (N−M+i) / N^(K−1),
//
// the notebook's product without its last factor, (N−M+K)/N. It is exact
// for independent, uniformly drawn counter bases; the notebook's line
// overstates −log P by about M/N a group, nearly twice the true figure for
// groups of two reports.
func PredictCircular(groups []Group, bits int) float64 { return predict(groups, bits, 1) }

func predict(groups []Group, bits int, circle int64) float64 {
	n := math.Ldexp(1, bits)
	var ln float64
	for _, g := range groups {
		if float64(g.M) > n {
			return math.Inf(-1)
		}
		// C(N−M+K, K)·K! = Π_{i=1..K} (N−M+i)
		for i := int64(1); i <= g.K-circle; i++ {
			ln += math.Log1p((float64(i) - float64(g.M)) / n)
		}
	}
	return ln / math.Ln2
}

// sortByTS sorts reports by timestamp, stably (a group keeps the order
// the reports were added in), by a least-significant-digit radix sort:
// four passes of a byte each. It returns the sorted slice, which is reps
// or a buffer of its size.
func sortByTS(reps []sweepRep) []sweepRep {
	if len(reps) < 256 {
		slices.SortStableFunc(reps, func(a, b sweepRep) int { return cmp.Compare(a.ts, b.ts) })
		return reps
	}
	buf := make([]sweepRep, len(reps))
	src, dst := reps, buf
	for shift := 0; shift < 32; shift += 8 {
		var count [257]int
		for i := range src {
			count[int(byte(src[i].ts>>shift))+1]++
		}
		if count[int(byte(src[0].ts>>shift))+1] == len(src) {
			continue // one value of this byte: already in order
		}
		for i := 1; i < 257; i++ {
			count[i] += count[i-1]
		}
		for i := range src {
			b := byte(src[i].ts >> shift)
			dst[count[b]] = src[i]
			count[b]++
		}
		src, dst = dst, src
	}
	return src
}
