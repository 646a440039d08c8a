// Package keysearch finds the key of a keyed OOID scheme under which a
// corpus has no colliding IDs at a given counter width, or, where one key
// cannot do it, a key table: a default key and another key for each
// timestamp whose reports collide under it.
//
// Two reports can share an ID only if they share a timestamp, so the
// search keeps only those reports ([Census] finds them in a first pass
// over the corpus, [Corpus] keeps them in a second). A trial hashes the
// reports group by group, the groups most likely to collide first, and
// stops at the first collision: most failing trials end after a few
// groups. Keys are numbered by their index in a seeded family
// ([ooid.DeriveKey]); a search returns the smallest index in its range
// that works, so it can be repeated and split across machines by range.
package keysearch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// Census is the first pass: every report's timestamp and size.
type Census struct {
	reps []tsN
}

type tsN struct{ ts, n uint32 }

// Add counts a report of n measurements at timestamp ts.
func (c *Census) Add(ts, n uint32) { c.reps = append(c.reps, tsN{ts, n}) }

// Shape is what the census tells: the timestamps shared by two reports or
// more, the groups they form and the corpus's size.
type Shape struct {
	Reports, Measurements int64
	// Groups are the shared timestamps' groups, for collisions.Predict.
	Groups []collisions.Group
	// SharedReports is the number of reports in Groups.
	SharedReports int64
	// MaxGroup is the most measurements under one timestamp (a lone
	// report included): no width below log2 of it can work.
	MaxGroup int64
	shared   []uint32 // sorted
}

// Shape sorts the census and returns its shape. The census is spent.
func (c *Census) Shape() *Shape {
	slices.SortFunc(c.reps, func(a, b tsN) int { return cmp.Compare(a.ts, b.ts) })
	s := &Shape{}
	for i := 0; i < len(c.reps); {
		j, m := i, int64(0)
		for ; j < len(c.reps) && c.reps[j].ts == c.reps[i].ts; j++ {
			m += int64(c.reps[j].n)
		}
		s.Reports += int64(j - i)
		s.Measurements += m
		s.MaxGroup = max(s.MaxGroup, m)
		if j-i > 1 {
			s.Groups = append(s.Groups, collisions.Group{K: int64(j - i), M: m})
			s.SharedReports += int64(j - i)
			s.shared = append(s.shared, c.reps[i].ts)
		}
		i = j
	}
	c.reps = nil
	return s
}

// Shared reports whether ts is shared by two reports or more.
func (s *Shape) Shared(ts uint32) bool {
	_, ok := slices.BinarySearch(s.shared, ts)
	return ok
}

// MinBits returns the smallest counter width that can hold every
// timestamp's measurements: below it no key, nor key table, can work.
func (s *Shape) MinBits() int {
	b := 0
	for b < 64 && int64(1)<<b < s.MaxGroup {
		b++
	}
	return b
}

// ExpectedTrials returns the number of keys a single-key search is
// expected to try at the width: 1/P(no collision) on the counter circle
// (collisions.PredictCircular), exact for a keyed hash that behaves as a
// random function; +Inf when the width is too small for some timestamp.
func (s *Shape) ExpectedTrials(bits int) float64 {
	return math.Exp2(-collisions.PredictCircular(s.Groups, bits))
}

// NotebookTrials is ExpectedTrials in the ooid-hash-prob notebook's model
// (collisions.Predict), which treats the counter space as a line and so
// overstates the trials.
func (s *Shape) NotebookTrials(bits int) float64 {
	return math.Exp2(-collisions.Predict(s.Groups, bits))
}

// ExpectedTable returns, for a key table at the width, the expected number
// of timestamps that collide under the default key (each gets its own
// key), Σ (1 − P_g), and the expected number of keys tried to find
// theirs, Σ (1 − P_g)/P_g, with P_g a group's probability of no
// collision (collisions.PredictCircular).
func (s *Shape) ExpectedTable(bits int) (overrides, trials float64) {
	for _, g := range s.Groups {
		p := math.Exp2(collisions.PredictCircular([]collisions.Group{g}, bits))
		overrides += 1 - p
		trials += (1 - p) / p
	}
	return overrides, trials
}

// Corpus holds the reports of the shared timestamps, by group.
type Corpus struct {
	shape  *Shape
	names  []byte
	reps   []rep
	groups []group // after Seal: most likely to collide first
	sealed bool
}

type rep struct {
	ts, off, len, n uint32
}

type group struct {
	ts          uint32
	first, k    int32
	score       float64
	measurement int64
}

// NewCorpus returns an empty corpus for the census's shared timestamps.
func NewCorpus(s *Shape) *Corpus { return &Corpus{shape: s} }

// Add keeps a report if its timestamp is shared. The textname is copied.
func (c *Corpus) Add(ts uint32, textname []byte, n uint32) error {
	if c.sealed {
		return errors.New("keysearch: Add after the search started")
	}
	if !c.shape.Shared(ts) {
		return nil
	}
	if len(c.names)+len(textname) > math.MaxUint32 {
		return errors.New("keysearch: more than 4 GiB of shared textnames")
	}
	c.reps = append(c.reps, rep{ts: ts, off: uint32(len(c.names)), len: uint32(len(textname)), n: n})
	c.names = append(c.names, textname...)
	return nil
}

// Reports returns the number of reports kept.
func (c *Corpus) Reports() int { return len(c.reps) }

func (c *Corpus) seal() {
	if c.sealed {
		return
	}
	c.sealed = true
	slices.SortStableFunc(c.reps, func(a, b rep) int { return cmp.Compare(a.ts, b.ts) })
	for i := 0; i < len(c.reps); {
		j := i
		g := group{ts: c.reps[i].ts, first: int32(i)}
		for ; j < len(c.reps) && c.reps[j].ts == g.ts; j++ {
			g.measurement += int64(c.reps[j].n)
		}
		g.k = int32(j - i)
		// The expected number of colliding pairs is about (K-1)·M/2^bits.
		g.score = float64(g.k-1) * float64(g.measurement)
		if g.k > 1 {
			c.groups = append(c.groups, g)
		}
		i = j
	}
	slices.SortStableFunc(c.groups, func(a, b group) int {
		if a.score != b.score {
			return cmp.Compare(b.score, a.score)
		}
		return cmp.Compare(a.ts, b.ts)
	})
}

// checker tests groups under a key; one per goroutine.
type checker struct {
	c     *Corpus
	bits  int
	spans []span
}

type span struct{ base, n uint32 }

// collides reports whether the reports of group g share an ID under key k.
func (ch *checker) collides(g *group, k ooid.Key) bool {
	mask := uint32(1)<<ch.bits - 1
	size := uint64(1) << ch.bits
	ch.spans = ch.spans[:0]
	for _, r := range ch.c.reps[g.first : g.first+g.k] {
		if uint64(r.n) > size {
			return true
		}
		ch.spans = append(ch.spans, span{uint32(ooid.SipHash24(k, ch.c.names[r.off:r.off+r.len])) & mask, r.n})
	}
	return overlap(ch.spans, size)
}

// overlap reports whether any two spans [base, base+n) modulo size meet.
// Sorted by base, some two meet exactly when two neighbours do, or when a
// span that runs past the end of the space reaches the first one.
func overlap(s []span, size uint64) bool {
	if len(s) == 2 {
		a, b := s[0], s[1]
		if a.n == 0 || b.n == 0 {
			return false
		}
		m := uint32(size - 1)
		return (b.base-a.base)&m < a.n || (a.base-b.base)&m < b.n
	}
	slices.SortFunc(s, func(a, b span) int { return cmp.Compare(a.base, b.base) })
	var wrap uint64
	first := -1
	for i, x := range s {
		if x.n == 0 {
			continue
		}
		if first < 0 {
			first = i
		}
		end := uint64(x.base) + uint64(x.n)
		if end > size {
			wrap = max(wrap, end-size)
		}
		for j := i + 1; j < len(s); j++ {
			if s[j].n == 0 {
				continue
			}
			if uint64(s[j].base) < end {
				return true
			}
			break
		}
	}
	return first >= 0 && wrap > uint64(s[first].base)
}

// Options set a search.
type Options struct {
	Bits     int
	Seed     string
	From, To uint64 // the key indexes tried, [From, To)
	Workers  int    // default: the number of CPUs
	// Progress, when set, is called about once a second and at the end.
	Progress func(Progress)
}

// Progress is how far a search has gone.
type Progress struct {
	Trials  uint64 // keys tried
	Elapsed time.Duration
	// Groups is the number of groups left to fix, for a key table.
	Groups int
}

// start checks the options and the width against the corpus, and seals
// the corpus for searching.
func (c *Corpus) start(o *Options) error {
	if err := o.check(); err != nil {
		return err
	}
	if c.shape.MinBits() > o.Bits {
		return fmt.Errorf("keysearch: %d measurements share one timestamp, more than 2^%d: %w", c.shape.MaxGroup, o.Bits, ErrNotFound)
	}
	c.seal()
	return nil
}

func (o *Options) check() error {
	if o.Bits < ooid.MinCounterBits || o.Bits > ooid.MaxCounterBits {
		return fmt.Errorf("keysearch: counter bits %d: want %d..%d", o.Bits, ooid.MinCounterBits, ooid.MaxCounterBits)
	}
	if o.To <= o.From {
		return fmt.Errorf("keysearch: empty key range [%d, %d)", o.From, o.To)
	}
	if o.Workers < 1 {
		o.Workers = runtime.NumCPU()
	}
	return nil
}

// ErrNotFound is returned when no key (or no key of the table) in the
// range works.
var ErrNotFound = errors.New("no key in the range makes the corpus collision-free")

// Found is the outcome of a single-key search.
type Found struct {
	Index  uint64 // the smallest index in the range that works
	Trials uint64 // keys tried, the winner included
}

// SearchKey tries the keys of the range in index order, on Workers
// goroutines, and returns the smallest index under which no two reports
// of the corpus collide. Splitting a range and taking the smallest index
// found gives the same key.
func (c *Corpus) SearchKey(ctx context.Context, o Options) (Found, error) {
	if err := c.start(&o); err != nil {
		return Found{}, err
	}
	var next, trials atomic.Uint64
	next.Store(o.From)
	var best atomic.Uint64
	best.Store(math.MaxUint64)
	stop := progress(o, &trials, func() int { return 0 })
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := &checker{c: c, bits: o.Bits}
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= o.To || i >= best.Load() {
					return
				}
				trials.Add(1)
				if ch.clean(ooid.DeriveKey(o.Seed, i)) {
					for {
						b := best.Load()
						if i >= b || best.CompareAndSwap(b, i) {
							break
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	stop()
	if b := best.Load(); b != math.MaxUint64 {
		return Found{Index: b, Trials: trials.Load()}, nil
	}
	if err := ctx.Err(); err != nil {
		return Found{Trials: trials.Load()}, err
	}
	return Found{Trials: trials.Load()}, fmt.Errorf("keysearch: keys %d..%d at %d bits: %w", o.From, o.To-1, o.Bits, ErrNotFound)
}

// clean reports whether no group collides under k.
func (ch *checker) clean(k ooid.Key) bool {
	for gi := range ch.c.groups {
		if ch.collides(&ch.c.groups[gi], k) {
			return false
		}
	}
	return true
}

// progress calls o.Progress every second until the returned stop is
// called, then once more.
func progress(o Options, trials *atomic.Uint64, groups func() int) (stop func()) {
	if o.Progress == nil {
		return func() {}
	}
	start := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				o.Progress(Progress{Trials: trials.Load(), Elapsed: time.Since(start), Groups: groups()})
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		o.Progress(Progress{Trials: trials.Load(), Elapsed: time.Since(start), Groups: groups()})
	}
}

// Table is the outcome of a key-table search.
type Table struct {
	Keys *ooid.KeyTable
	// Colliding is the number of groups that collide under the default
	// key, each given its own key.
	Colliding int
	Trials    uint64 // keys tried over all groups
}

// SearchTable keeps key From as the default and, for each group that
// collides under it, finds the smallest index in [From+1, To) under which
// the group alone is collision-free. Groups are searched on Workers
// goroutines; the table does not depend on their number.
func (c *Corpus) SearchTable(ctx context.Context, o Options) (Table, error) {
	if err := c.start(&o); err != nil {
		return Table{}, err
	}
	def := ooid.DeriveKey(o.Seed, o.From)
	ch := &checker{c: c, bits: o.Bits}
	var bad []int
	for gi := range c.groups {
		if ch.collides(&c.groups[gi], def) {
			bad = append(bad, gi)
		}
	}
	var trials atomic.Uint64
	var left atomic.Int64
	left.Store(int64(len(bad)))
	stop := progress(o, &trials, func() int { return int(left.Load()) })
	defer stop()
	ov := make([]ooid.Override, len(bad))
	errs := make([]error, len(bad))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := &checker{c: c, bits: o.Bits}
			for {
				x := int(next.Add(1) - 1)
				if x >= len(bad) {
					return
				}
				g := &c.groups[bad[x]]
				errs[x] = fmt.Errorf("keysearch: timestamp %d (%d reports, %d measurements): keys %d..%d at %d bits: %w",
					g.ts, g.k, g.measurement, o.From+1, o.To-1, o.Bits, ErrNotFound)
				for i := o.From + 1; i < o.To && ctx.Err() == nil; i++ {
					trials.Add(1)
					if !ch.collides(g, ooid.DeriveKey(o.Seed, i)) {
						ov[x], errs[x] = ooid.Override{TS: g.ts, Index: i}, nil
						break
					}
				}
				left.Add(-1)
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Table{}, err
	}
	if err := errors.Join(errs...); err != nil {
		return Table{}, err
	}
	kt, err := ooid.NewKeyTable(o.Seed, o.From, ov)
	if err != nil {
		return Table{}, err
	}
	return Table{Keys: kt, Colliding: len(bad), Trials: trials.Load() + 1}, nil
}
