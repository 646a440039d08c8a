package collisions

import (
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// bruteForce is the reference: a hash set of every ID, naming every pair
// of reports that share one, and the measurements of the reports involved.
func bruteForce(rgs []Range, bits int) (pairs map[Pair]bool, msm int64) {
	mask := uint32(1)<<uint(bits) - 1
	if bits == 32 {
		mask = ^uint32(0)
	}
	first := make(map[uint64]uint32, 1<<20) // an owner of each ID
	more := map[uint64][]uint32{}           // the other owners
	pairs = map[Pair]bool{}
	for i, r := range rgs {
		ref := uint32(i)
		if r.SelfOverlaps(bits) {
			pairs[Pair{ref, ref}] = true
		}
		for i := uint32(0); i < r.N; i++ {
			id := uint64(r.TS)<<32 | uint64((r.Base+i)&mask)
			o, ok := first[id]
			if !ok {
				first[id] = ref
				continue
			}
			pairs[Pair{o, ref}] = true
			if o == ref {
				continue // wrapped onto itself
			}
			dup := false
			for _, m := range more[id] {
				pairs[Pair{m, ref}] = true
				dup = dup || m == ref
			}
			if !dup {
				more[id] = append(more[id], ref)
			}
		}
	}
	inv := map[uint32]bool{}
	for p := range pairs {
		inv[p.A], inv[p.B] = true, true
	}
	for r := range inv {
		msm += int64(rgs[r].N)
	}
	return pairs, msm
}

// crafted returns ranges with the cases that break interval arithmetic:
// wrap-around at 2^bits, ranges that touch without overlapping, a report of
// 1,000,003 measurements, 20 reports on one timestamp, empty reports.
func crafted(bits int, rng *rand.Rand) []Range {
	size := uint32(1) << uint(bits)
	var rgs []Range
	add := func(ts, base, n uint32) { rgs = append(rgs, Range{TS: ts, Base: base & (size - 1), N: n}) }
	// Wrap-around: the second wraps onto the first's start; the third
	// ends exactly at 2^bits and touches the fourth at 0 without overlap.
	add(100, size-3, 10)
	add(100, 5, 3)
	add(101, size-7, 7)
	add(101, 0, 4)
	add(101, 4, 1) // touches the one before
	add(101, 5, 2) // touches that one
	add(102, size-1, 2)
	add(102, 1, 1) // touches the wrapped end
	add(102, 0, 1) // inside the wrapped part
	// Touching, not overlapping, then overlapping by one.
	add(200, 1000, 50)
	add(200, 1050, 50)
	add(200, 1099, 1)
	// The largest report of the corpus, and one inside it, one after it.
	add(300, 7, 1_000_003)
	add(300, 500_000, 3)
	add(300, 7+1_000_003, 5)
	// 20 reports on one timestamp.
	for range 20 {
		add(400, rng.Uint32(), 1+rng.Uint32N(min(size/20, 50_000)))
	}
	// Empty reports collide with nothing.
	add(100, 0, 0)
	add(300, 10, 0)
	// Many small reports on few timestamps.
	for range 300 {
		add(500+rng.Uint32N(3), rng.Uint32(), 1+rng.Uint32N(min(size/64, 8_000)))
	}
	return rgs
}

func indexPairs(rgs []Range, bits int, order []int) map[Pair]bool {
	x := NewIndex(bits)
	got := map[Pair]bool{}
	for _, i := range order {
		for _, h := range x.Add(rgs[i], uint32(i)) {
			a, b := min(h, uint32(i)), max(h, uint32(i))
			got[Pair{a, b}] = true
		}
	}
	return got
}

func norm(pairs map[Pair]bool) map[Pair]bool {
	out := map[Pair]bool{}
	for p := range pairs {
		out[Pair{min(p.A, p.B), max(p.A, p.B)}] = true
	}
	return out
}

func samePairs(t *testing.T, what string, got, want map[Pair]bool) {
	t.Helper()
	for p := range want {
		if !got[p] {
			t.Errorf("%s: pair %v missed", what, p)
		}
	}
	for p := range got {
		if !want[p] {
			t.Errorf("%s: pair %v reported but the IDs are distinct", what, p)
		}
	}
}

func TestIndexMatchesBruteForce(t *testing.T) {
	for _, bits := range []int{20, 24, 28} {
		t.Run(fmt.Sprint(bits), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(bits), 1))
			rgs := crafted(bits, rng)
			want, _ := bruteForce(rgs, bits)
			want = norm(want)
			if len(want) < 4 {
				t.Fatalf("the crafted set has only %d colliding pairs", len(want))
			}
			order := make([]int, len(rgs))
			for i := range order {
				order[i] = i
			}
			samePairs(t, "in order", indexPairs(rgs, bits, order), want)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			samePairs(t, "shuffled", indexPairs(rgs, bits, order), want)

			x := NewIndex(bits)
			for i, r := range rgs {
				x.Add(r, uint32(i))
			}
			if got, want := x.Cardinality(), bruteIDs(rgs, bits); got != want {
				t.Errorf("bitmap holds %d IDs, want %d", got, want)
			}
		})
	}
}

func bruteIDs(rgs []Range, bits int) uint64 {
	mask := uint32(1)<<uint(bits) - 1
	set := map[uint64]bool{}
	for _, r := range rgs {
		for i := uint32(0); i < r.N; i++ {
			set[uint64(r.TS)<<32|uint64((r.Base+i)&mask)] = true
		}
	}
	return uint64(len(set))
}

func TestRangeSelfOverlap(t *testing.T) {
	x := NewIndex(20)
	hits := x.Add(Range{TS: 1, Base: 5, N: 1<<20 + 1}, 7)
	if !slices.Equal(hits, []uint32{7}) {
		t.Errorf("a range longer than the counter space: hits %v, want itself", hits)
	}
	if hits := x.Add(Range{TS: 1, Base: 0, N: 1}, 8); !slices.Equal(hits, []uint32{7}) {
		t.Errorf("after a full range: hits %v", hits)
	}
	if got := x.Cardinality(); got != 1<<20 {
		t.Errorf("cardinality %d, want the whole space", got)
	}
}

// textnames returns textnames whose timestamps fall on few distinct values,
// with sizes, so that collisions happen at small widths: two buckets hold
// the same basename (a retried upload), a timestamp holds 20 reports, one
// report has 1,000,003 measurements.
func textnames(rng *rand.Rand, count int) (names []string, ns []uint32) {
	for i := range count {
		sec := rng.IntN(40)
		day := 1 + rng.IntN(2)
		base := fmt.Sprintf("20180620T0029%02dZ-DE-AS%d-web_connectivity-no_report_id-0.2.0-probe.json", sec, 1000+i)
		names = append(names, fmt.Sprintf("2018-06-%02d/%s", 20+day, base))
		ns = append(ns, 1+uint32(rng.ExpFloat64()*3000))
		if i%50 == 0 { // the same report uploaded again the next day
			names = append(names, fmt.Sprintf("2018-06-%02d/%s", 21+day, base))
			ns = append(ns, ns[len(ns)-1])
		}
	}
	for i := range 20 {
		names = append(names, fmt.Sprintf("2018-06-21/20180620T003000Z-IT-AS%d-ndt-no_report_id-0.2.0-probe.json", 77+i))
		ns = append(ns, 1+uint32(rng.IntN(20000)))
	}
	names = append(names, "2014-11-22/20141122T040940Z-US-AS1968-tcp_connect-no_report_id-0.1.0-probe.yaml",
		"2014-11-23/20141122T040940Z-US-AS1968-tcp_connect-no_report_id-0.1.0-probe.yaml")
	ns = append(ns, 1_000_003, 17)
	return names, ns
}

func rangesOf(t *testing.T, names []string, ns []uint32, s ooid.Scheme) []Range {
	t.Helper()
	var rgs []Range
	for i, n := range names {
		r, err := s.Report(n)
		if err != nil {
			t.Fatal(err)
		}
		rgs = append(rgs, RangeOf(r, ns[i]))
	}
	return rgs
}

// The sweep and the index both equal the brute force, for
// every scheme: SHA-1 windows kept as windows (two offsets) or read from
// the kept SHA-1 (five), and keyed schemes beside them.
func TestSweepMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	names, ns := textnames(rng, 600)
	kt, err := ooid.NewKeyTable("audit-test", 1, []ooid.Override{{TS: 1354691661, Index: 2}})
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, c := range []struct{ bits, offsets []int }{{[]int{20, 28}, []int{0, 33}}, {[]int{20}, []int{0, 5, 11, 17, 33}}} {
		bits, offsets := c.bits, c.offsets
		var schemes []ooid.Scheme
		for _, b := range bits {
			for _, o := range offsets {
				schemes = append(schemes, ooid.Scheme{CounterBits: b, SHA1Offset: o})
			}
			schemes = append(schemes, ooid.KeyedScheme(b, kt))
		}
		multi, err := NewSchemeSweep(schemes, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range names {
			if err := multi.Add([]byte(n), ns[i]); err != nil {
				t.Fatal(err)
			}
		}
		results := multi.Finish()
		if len(results) != len(schemes) {
			t.Fatalf("%d results", len(results))
		}
		for _, res := range results {
			s := res.Scheme
			want, msm := bruteForce(rangesOf(t, names, ns, s), s.CounterBits)
			want = norm(want)
			total += int64(len(want))
			got := map[Pair]bool{}
			for _, p := range res.First {
				got[Pair{min(p.A, p.B), max(p.A, p.B)}] = true
			}
			samePairs(t, "sweep "+s.String(), got, want)
			if res.Pairs != int64(len(want)) || res.Measurements != msm {
				t.Errorf("sweep %s: %d pairs, %d measurements; want %d, %d", s, res.Pairs, res.Measurements, len(want), msm)
			}

			// The index, fed in a random order, finds the same pairs
			// (once a scheme: it does not keep SHA-1s).
			if len(offsets) > maxWindows {
				continue
			}
			rgs := rangesOf(t, names, ns, s)
			got = norm(indexPairs(rgs, s.CounterBits, rng.Perm(len(rgs))))
			samePairs(t, "index "+s.String(), got, want)
		}
	}
	if total == 0 {
		t.Fatal("no scheme had a collision: the test proves nothing")
	}
}

func TestSweepRejectsBadTextname(t *testing.T) {
	a, err := NewSweep([]int{28}, []int{33}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Add([]byte("2018-06-20/not-a-report.json"), 3); err == nil {
		t.Error("a bad textname was taken")
	}
	if a.Reports != 0 || a.Measurements != 0 {
		t.Errorf("a rejected textname was counted: %d reports", a.Reports)
	}
	if _, err := NewSweep([]int{19}, []int{33}, 1); err == nil {
		t.Error("19 counter bits accepted")
	}
}

// sumWith returns a SHA-1 whose window at offset 33 is base.
func sumWith(base uint32) (s [sha1.Size]byte) {
	binary.BigEndian.PutUint32(s[16:], base)
	return s
}

func TestSweepCrafted(t *testing.T) {
	for _, bits := range []int{20, 28} {
		rng := rand.New(rand.NewPCG(9, uint64(bits)))
		rgs := crafted(bits, rng)
		var reps []sweepRep
		var sums [][20]byte
		for i, r := range rgs {
			reps = append(reps, sweepRep{ts: r.TS, n: r.N, ref: uint32(i)})
			sums = append(sums, sumWith(r.Base))
		}
		s := ooid.Scheme{CounterBits: bits, SHA1Offset: 33}
		res := sweepSchemes(reps, []ooid.Scheme{s}, 1<<20, func(_ int, p *sweepRep) uint32 { return ooid.Window(&sums[p.ref], 33) & s.Mask() })[0]
		want, msm := bruteForce(rgs, bits)
		got := map[Pair]bool{}
		for _, p := range res.First {
			got[p] = true
		}
		samePairs(t, fmt.Sprint("sweep ", bits), norm(got), norm(want))
		if res.Measurements != msm {
			t.Errorf("%d bits: %d measurements involved, want %d", bits, res.Measurements, msm)
		}
	}
}
