package collisions

import (
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
	// First holds up to the auditor's keep pairs, in timestamp order.
	First []Pair
	// Groups are the timestamps shared by two reports or more, for
	// [Predict].
	Groups []Group
}

// Group is the reports sharing one timestamp: K reports holding M
// measurements in all.
type Group struct{ K, M int64 }

// Auditor counts the collisions of a set of reports under one or many
// schemes. It keeps each report's timestamp, size and SHA-1 (32 bytes a
// report), then, in [Auditor.Finish], sorts them by timestamp and checks
// every scheme on each group of reports sharing one: only those can
// collide. For one scheme that finds exactly what an [Index] finds (the
// tests hold both to a brute-force set of IDs), in a tenth of the memory,
// because the audit has every report before it starts; a run, which gets
// them one bucket at a time and must answer at once, uses the Index.
type Auditor struct {
	schemes []ooid.Scheme
	keep    int
	reps    []sweepRep
	keyed   [][]uint32 // per scheme, for keyed schemes: the counter base of each report by ref

	Reports, Measurements int64
}

type sweepRep struct {
	ts, n uint32
	sum   [sha1.Size]byte
	ref   uint32
}

// NewAuditor returns an auditor for every combination of the counter
// widths and SHA-1 offsets, keeping up to keep pairs of each.
func NewAuditor(bits, offsets []int, keep int) (*Auditor, error) {
	var schemes []ooid.Scheme
	for _, b := range bits {
		for _, o := range offsets {
			schemes = append(schemes, ooid.Scheme{CounterBits: b, SHA1Offset: o})
		}
	}
	return NewSchemeAuditor(schemes, keep)
}

// NewSchemeAuditor returns an auditor for the given schemes, SHA-1
// windows or keyed, keeping up to keep pairs of each. A keyed scheme costs
// 4 more bytes a report.
func NewSchemeAuditor(schemes []ooid.Scheme, keep int) (*Auditor, error) {
	a := &Auditor{keep: keep, schemes: schemes, keyed: make([][]uint32, len(schemes))}
	for _, s := range schemes {
		if err := s.Validate(); err != nil {
			return nil, err
		}
	}
	if len(a.schemes) == 0 {
		return nil, fmt.Errorf("collisions: no scheme to audit")
	}
	return a, nil
}

// Add adds a report of n measurements. It fails, adding nothing, for a
// textname that gets no IDs.
func (a *Auditor) Add(textname []byte, n uint32) error {
	t, err := ooid.ParseTextnameBytes(textname)
	if err != nil {
		return err
	}
	for i, s := range a.schemes {
		if s.Keyed() {
			r, err := s.ReportBytes(textname)
			if err != nil {
				return err
			}
			a.keyed[i] = append(a.keyed[i], r.CounterBase())
		}
	}
	a.reps = append(a.reps, sweepRep{ts: t.TS, n: n, sum: sha1.Sum(textname), ref: uint32(a.Reports)})
	a.Reports++
	a.Measurements += int64(n)
	return nil
}

// Finish returns one result per scheme, widths in the order given, then
// offsets.
func (a *Auditor) Finish() []Result {
	return sweep(a.reps, a.schemes, a.keep, func(si int, p *sweepRep) uint32 {
		if a.schemes[si].Keyed() {
			return a.keyed[si][p.ref]
		}
		return ooid.Window(&p.sum, a.schemes[si].SHA1Offset) & a.schemes[si].Mask()
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

// sweep evaluates every scheme on the reports, grouped by timestamp. Only
// groups of two reports or more can collide, and a report too long for the
// counter space collides with itself.
func sweep(reps []sweepRep, schemes []ooid.Scheme, keep int, base func(si int, p *sweepRep) uint32) []Result {
	slices.SortFunc(reps, func(a, b sweepRep) int {
		if a.ts != b.ts {
			return int(int64(a.ts) - int64(b.ts))
		}
		if c := slices.Compare(a.sum[:], b.sum[:]); c != 0 {
			return c
		}
		return int(int64(a.ref) - int64(b.ref))
	})
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
