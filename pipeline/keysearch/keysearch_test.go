package keysearch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

type report struct {
	name string
	n    uint32
}

// crafted returns groups of reports sharing timestamps: groups of 2..k
// reports whose sizes fill about fill of a 2^bits space each, plus lone
// reports that can never collide.
func crafted(rng *rand.Rand, groups, k int, bits int, fill float64) []report {
	var out []report
	base := time.Date(2014, 3, 1, 0, 0, 0, 0, time.UTC)
	for g := range groups {
		t := base.Add(time.Duration(g) * 7 * time.Second)
		kk := 2 + rng.IntN(k-1)
		for i := range kk {
			n := uint32(1 + rng.Float64()*fill*float64(uint64(1)<<bits)/float64(kk))
			out = append(out, report{textname(t, i, g), n})
		}
		out = append(out, report{textname(t.Add(3*time.Second), 0, g), uint32(rng.IntN(1000))})
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func textname(t time.Time, i, g int) string {
	return fmt.Sprintf("%s/%s-ZZ-AS%d-web_connectivity-no_report_id-0.2.0-probe.json",
		t.Format("2006-01-02"), t.Format("20060102T150405Z"), 1000*g+i+1)
}

func corpusOf(t testing.TB, reps []report) (*Corpus, *Shape) {
	t.Helper()
	var c Census
	for _, r := range reps {
		tn, err := ooid.ParseTextname(r.name)
		if err != nil {
			t.Fatal(err)
		}
		c.Add(tn.TS, r.n)
	}
	s := c.Shape()
	cp := NewCorpus(s)
	for _, r := range reps {
		tn, _ := ooid.ParseTextname(r.name)
		if err := cp.Add(tn.TS, []byte(r.name), r.n); err != nil {
			t.Fatal(err)
		}
	}
	return cp, s
}

// bruteCollides sets a bit for every ID of every report under the scheme,
// one bitset of 2^bits bits per timestamp, and reports whether one repeats.
func bruteCollides(t testing.TB, reps []report, s ooid.Scheme) bool {
	t.Helper()
	seen := map[uint32][]uint64{}
	for _, r := range reps {
		ri, err := s.Report(r.name)
		if err != nil {
			t.Fatal(err)
		}
		if uint64(r.n) > uint64(1)<<s.CounterBits {
			return true
		}
		set := seen[ri.TS]
		if set == nil {
			set = make([]uint64, (1<<s.CounterBits)/64)
			seen[ri.TS] = set
		}
		for ndx := range r.n {
			c := uint32(ri.ID(ndx)) & s.Mask()
			if set[c/64]&(1<<(c%64)) != 0 {
				return true
			}
			set[c/64] |= 1 << (c % 64)
		}
	}
	return false
}

func auditPairs(t testing.TB, reps []report, s ooid.Scheme) int64 {
	t.Helper()
	a, err := collisions.NewSchemeSweep([]ooid.Scheme{s}, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		if err := a.Add([]byte(r.name), r.n); err != nil {
			t.Fatal(err)
		}
	}
	return a.Finish()[0].Pairs
}

func keyScheme(t testing.TB, bits int, seed string, i uint64, ov ...ooid.Override) ooid.Scheme {
	kt, err := ooid.NewKeyTable(seed, i, ov)
	if err != nil {
		t.Fatal(err)
	}
	return ooid.KeyedScheme(bits, kt)
}

func TestSearchKey_FindsTheFirstCleanKey(t *testing.T) {
	const bits = 20
	rng := rand.New(rand.NewPCG(1, 2))
	reps := crafted(rng, 40, 4, bits, 0.04)
	c, shape := corpusOf(t, reps)
	if c.Reports() == len(reps) || c.Reports() == 0 {
		t.Fatalf("corpus kept %d of %d reports; want only the shared timestamps", c.Reports(), len(reps))
	}
	exp := shape.ExpectedTrials(bits)
	if exp < 3 || exp > 200 {
		t.Fatalf("expected trials %.1f: the crafted corpus should need a few dozen", exp)
	}
	// A seed whose first clean key is not among its first three, so that
	// the keys before it are checked too.
	var f Found
	var seed string
	for i := 0; f.Index < 3; i++ {
		if i == 20 {
			t.Fatal("20 seeds found a clean key among their first three")
		}
		seed = fmt.Sprint("crafted-", i)
		var err error
		if f, err = c.SearchKey(context.Background(), Options{Bits: bits, Seed: seed, From: 0, To: 10000, Workers: 2}); err != nil {
			t.Fatal(err)
		}
	}
	// Every key before the one found collides, the one found does not:
	// by brute force over every ID and by the audit.
	for i := uint64(0); i <= f.Index; i++ {
		s := keyScheme(t, bits, seed, i)
		brute := bruteCollides(t, reps, s)
		if brute != (i < f.Index) {
			t.Fatalf("key %d: brute force says collides=%v; the search found %d", i, brute, f.Index)
		}
		if pairs := auditPairs(t, reps, s); (pairs > 0) != brute {
			t.Fatalf("key %d: audit finds %d pairs, brute force collides=%v", i, pairs, brute)
		}
	}
	if f.Trials < f.Index+1 {
		t.Errorf("%d trials to find index %d", f.Trials, f.Index)
	}
	t.Logf("seed %s: found key %d after %d trials; %.1f expected", seed, f.Index, f.Trials, exp)

	// The same seed gives the same key with any number of workers, and
	// two halves of the range searched apart give it too.
	for _, w := range []int{1, 3} {
		g, err := c.SearchKey(context.Background(), Options{Bits: bits, Seed: seed, From: 0, To: 10000, Workers: w})
		if err != nil || g.Index != f.Index {
			t.Errorf("%d workers: %v %v, want index %d", w, g, err, f.Index)
		}
	}
	mid := f.Index/2 + 1
	lo, errLo := c.SearchKey(context.Background(), Options{Bits: bits, Seed: seed, From: 0, To: mid})
	hi, errHi := c.SearchKey(context.Background(), Options{Bits: bits, Seed: seed, From: mid, To: 10000})
	if !errors.Is(errLo, ErrNotFound) && f.Index >= mid {
		t.Errorf("lower half: %v %v", lo, errLo)
	}
	got := hi.Index
	if errLo == nil {
		got = min(lo.Index, got)
	}
	if errHi != nil || got != f.Index {
		t.Errorf("halves found %d (%v, %v), one search %d", got, errLo, errHi, f.Index)
	}
}

func TestSearchTable_DenseGroups(t *testing.T) {
	const bits = 20
	rng := rand.New(rand.NewPCG(3, 4))
	reps := crafted(rng, 60, 6, bits, 0.5) // a single key is hopeless
	c, shape := corpusOf(t, reps)
	if exp := shape.ExpectedTrials(bits); exp < 1e9 {
		t.Fatalf("expected trials %.3g: want a corpus no single key can fix", exp)
	}
	if _, err := c.SearchKey(context.Background(), Options{Bits: bits, Seed: "dense", From: 0, To: 200}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("single key over 200 trials: %v", err)
	}
	tab, err := c.SearchTable(context.Background(), Options{Bits: bits, Seed: "dense", From: 5, To: 1 << 20, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	s := ooid.KeyedScheme(bits, tab.Keys)
	if tab.Colliding == 0 || len(tab.Keys.Overrides()) != tab.Colliding || tab.Keys.Default() != 5 {
		t.Fatalf("table: %d colliding groups, %d overrides, default %d", tab.Colliding, len(tab.Keys.Overrides()), tab.Keys.Default())
	}
	if bruteCollides(t, reps, s) || auditPairs(t, reps, s) != 0 {
		t.Fatal("IDs collide under the table")
	}
	if auditPairs(t, reps, keyScheme(t, bits, "dense", 5)) == 0 {
		t.Fatal("the default key alone is already clean")
	}
	// Each override is the first key that fixes its group.
	for _, o := range tab.Keys.Overrides()[:5] {
		var group []report
		for _, r := range reps {
			if tn, _ := ooid.ParseTextname(r.name); tn.TS == o.TS {
				group = append(group, r)
			}
		}
		for i := uint64(6); i <= o.Index; i++ {
			if bruteCollides(t, group, keyScheme(t, bits, "dense", i)) != (i < o.Index) {
				t.Fatalf("timestamp %d: key %d is not the first clean one (%d)", o.TS, i, o.Index)
			}
		}
	}
	again, err := c.SearchTable(context.Background(), Options{Bits: bits, Seed: "dense", From: 5, To: 1 << 20, Workers: 1})
	if err != nil || again.Keys.ID() != tab.Keys.ID() {
		t.Errorf("one worker gives table %v (%v), two gave %s", again.Keys, err, tab.Keys.ID())
	}
}

func TestSearch_TooNarrow(t *testing.T) {
	reps := []report{
		{textname(time.Unix(1400000000, 0).UTC(), 0, 0), 1 << 19},
		{textname(time.Unix(1400000000, 0).UTC(), 1, 0), 1<<19 + 1},
	}
	c, shape := corpusOf(t, reps)
	if shape.MinBits() != 21 {
		t.Errorf("MinBits = %d, want 21", shape.MinBits())
	}
	if _, err := c.SearchKey(context.Background(), Options{Bits: 20, Seed: "x", To: 10}); !errors.Is(err, ErrNotFound) {
		t.Errorf("SearchKey: %v", err)
	}
	if _, err := c.SearchTable(context.Background(), Options{Bits: 20, Seed: "x", To: 10}); !errors.Is(err, ErrNotFound) {
		t.Errorf("SearchTable: %v", err)
	}
}

// TestOverlap holds the sorted check to every pair, with wrap-around.
func TestOverlap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		bits := 4 + rng.IntN(4)
		size := uint64(1) << bits
		s := make([]span, 2+rng.IntN(5))
		for i := range s {
			s[i] = span{uint32(rng.Uint64N(size)), uint32(rng.Uint64N(size/2 + 1))}
		}
		want := false
		for i := range s {
			for j := i + 1; j < len(s); j++ {
				a := collisions.Range{Base: s[i].base, N: s[i].n}
				if a.Overlaps(collisions.Range{Base: s[j].base, N: s[j].n}, bits) {
					want = true
				}
			}
		}
		in := fmt.Sprint(s)
		if got := overlap(s, size); got != want {
			t.Fatalf("overlap(%s, 2^%d) = %v, want %v", in, bits, got, want)
		}
	}
}

func TestSearch_Cancel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	c, _ := corpusOf(t, crafted(rng, 200, 6, 20, 0.5))
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	_, err := c.SearchKey(ctx, Options{Bits: 20, Seed: "x", To: 1 << 40, Progress: func(Progress) {
		calls++
		cancel()
	}})
	if !errors.Is(err, context.Canceled) || calls < 2 {
		t.Errorf("cancelled search: %v after %d progress calls", err, calls)
	}
}

// The table's expectations follow the model: for one group of K reports
// of M measurements, 1 − P and (1 − P)/P with P = Π_{i<K} (N − M + i)/N.
func TestExpectedTable(t *testing.T) {
	var c Census
	for i := range 3 {
		c.Add(100, uint32(1000+i*500))
	}
	c.Add(200, 7)
	s := c.Shape()
	n := float64(1 << 20)
	p := 1.0
	for i := 1; i <= 2; i++ {
		p *= (n - 4500 + float64(i)) / n
	}
	ov, tr := s.ExpectedTable(20)
	if math.Abs(ov-(1-p)) > 1e-9 || math.Abs(tr-(1-p)/p) > 1e-9 {
		t.Errorf("ExpectedTable = %g, %g; want %g, %g", ov, tr, 1-p, (1-p)/p)
	}
	if e := s.ExpectedTrials(20); math.Abs(e-1/p) > 1e-6 {
		t.Errorf("ExpectedTrials = %g, want %g", e, 1/p)
	}
	if s.Reports != 4 || s.SharedReports != 3 || len(s.Groups) != 1 || s.MinBits() != 13 {
		t.Errorf("shape: %+v, MinBits %d", s, s.MinBits())
	}
}
