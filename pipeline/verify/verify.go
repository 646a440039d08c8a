// Package verify proves, from an output alone, that its IDs are what the
// scheme it records gives and that no ID is given twice (backfill verify):
// every measurement row's ID is recomputed from its report and ndx; every
// kept report has its measurements 0..n-1, each once, and a rejected one
// none; every report's verdict is the one docs/design.md §3 gives (a report
// loses to the first-sorting report whose IDs overlap its own, and only
// then), over the whole output; optionally, the output is complete against
// the input it was made from (Input); and it computes a digest of the ID
// set per bucket and for the whole output, which anyone can recompute with
// standard tools (Digest says how).
//
// A bucket's reports are read first: their verdicts are checked, and each
// kept report's IDs held (its time, counter base and count) with a bit for
// each of its measurements. Rows may then come in any order: each is
// checked against its report's IDs and sets its bit, and a bit set twice
// is a measurement with two rows. Once every row is in, a bucket with every
// bit set has exactly its kept reports' IDs, so its digest is made from
// them. A Parquet output is read a bucket at a time; a PostgreSQL schema's
// measurements table has no index on bucket, so it is read once, after
// every bucket's reports: about 16 bytes a report and a bit a measurement
// are held for the whole output then.
package verify

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"slices"
	"strings"

	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/ooniuid"
)

// Report is a report row of an output.
type Report struct {
	Textname   string
	N          uint32
	RejectedBy string // "" when kept
	// IDs are OONI's identities of its measurements, by ndx, in an
	// output made with --measurement-uid (nil otherwise); verify --in
	// computes them again from the input and compares.
	IDs []ooniuid.ID
	// Listed are the measurement_uids its dead letters list (those
	// OONI gives to measurements of it no row carries), sorted.
	Listed []string
}

// Row is a measurement row of an output.
type Row struct {
	Bucket int   // its bucket: an index into the list Source.Buckets gave; -1 for a bucket not in it
	Report int   // its report: an index into its bucket's Source.Reports; -1 for none
	Ndx    int32 // its ndx and ID, as the output holds them
	OOID   int64
	// Where the row is, for messages: its number in its bucket's rows,
	// and its textname where the output holds one.
	Pos      int64
	Textname string
}

// Source is an output: its buckets, in order, and for each the scheme it
// was made under, its reports and its measurement rows.
type Source interface {
	Buckets(ctx context.Context) ([]string, error)
	Scheme(ctx context.Context, bucket string) (ooid.Scheme, error)
	// Reports returns the bucket's reports, in the order its rows name
	// them (Row.Report).
	Reports(ctx context.Context, bucket string) ([]Report, error)
	// Rows calls fn with every measurement row of the buckets first to
	// end-1 (indexes into the list Buckets gave), in any order. A source
	// that is not PerBucket is asked once, for every bucket, after every
	// bucket's reports, and gives every row it holds.
	Rows(ctx context.Context, first, end int, fn func(Row) error) error
	// PerBucket says that Rows reads only the buckets asked for: verify
	// then reads each bucket's rows after its reports and forgets it.
	PerBucket() bool
	// Where names a bucket's reports in messages: a file, a table.
	Where(bucket string) string
	// RowAt names a row in messages.
	RowAt(r Row) string
}

// Bucket is what one bucket holds.
type Bucket struct {
	Date    string `json:"bucket"`
	Reports int    `json:"reports"`
	// CollisionLosers are the reports that lost their IDs to a collision:
	// they have no measurement rows.
	CollisionLosers int    `json:"collision_losers"`
	Measurements    int64  `json:"measurements"`
	Digest          string `json:"digest"`
}

// Result is what the whole output holds.
type Result struct {
	Scheme          string   `json:"scheme"`
	Buckets         []Bucket `json:"buckets"`
	Reports         int      `json:"reports"`
	CollisionLosers int      `json:"collision_losers"`
	Measurements    int64    `json:"measurements"`
	Digest          string   `json:"digest"`
}

// Failure is the first thing verify finds wrong: where (a file or table,
// and the row or report) and what.
type Failure struct {
	At   string
	What string
	row  *Row // a row whose textname is yet to be found
}

func (f *Failure) Error() string { return f.At + ": " + f.What }

// Digest is how the digests are made, for a reader who recomputes them:
// a bucket's is the SHA-256 of its IDs as 16 lowercase hex digits a line,
// sorted; the output's, of the lines "BUCKET DIGEST" in bucket order.
const Digest = "sha256 of the IDs as 16 lowercase hex digits a line, sorted (per bucket); sha256 of the lines \"BUCKET DIGEST\" (whole output)"

// Options say what else Run checks and tells.
type Options struct {
	// Keyed is the scheme file's scheme: a keyed scheme needs its keys.
	Keyed *ooid.Scheme
	// Input, when set, is the input the output was made from: the output
	// must be complete against it.
	Input *Input
	// Done is called after each bucket.
	Done func(Bucket)
}

// Run verifies the output of src and returns what it holds or the first
// *Failure (any other error is src's or the input's).
func Run(ctx context.Context, src Source, opt Options) (Result, error) {
	var res Result
	buckets, err := src.Buckets(ctx)
	if err != nil {
		return res, err
	}
	if len(buckets) == 0 {
		return res, &Failure{At: src.Where("*"), What: "the output holds no committed bucket: there is nothing to verify"}
	}
	v := &verifier{src: src, in: opt.Input, seed: maphash.MakeSeed(), buckets: buckets, held: make([]*held, len(buckets))}
	whole := sha256.New()
	finish := func(i int) error {
		bk, err := v.finish(ctx, i)
		if err != nil {
			return err
		}
		v.held[i] = nil
		fmt.Fprintf(whole, "%s %s\n", bk.Date, bk.Digest)
		res.Buckets = append(res.Buckets, bk)
		res.Reports += bk.Reports
		res.CollisionLosers += bk.CollisionLosers
		res.Measurements += bk.Measurements
		if opt.Done != nil {
			opt.Done(bk)
		}
		return nil
	}
	for i, b := range buckets {
		scheme, err := src.Scheme(ctx, b)
		if err != nil {
			return res, err
		}
		if scheme, err = v.useScheme(b, scheme, opt.Keyed); err != nil {
			return res, err
		}
		if err := v.reports(ctx, i, scheme); err != nil {
			return res, err
		}
		if src.PerBucket() {
			if err := src.Rows(ctx, i, i+1, v.row); err != nil {
				return res, v.named(ctx, err)
			}
			if err := finish(i); err != nil {
				return res, err
			}
		}
	}
	if opt.Input != nil {
		if err := opt.Input.end(src.Where("*")); err != nil {
			return res, err
		}
	}
	if !src.PerBucket() {
		v.index, v.names = nil, nil // every verdict is checked
		if err := src.Rows(ctx, 0, len(buckets), v.row); err != nil {
			return res, v.named(ctx, err)
		}
		for i := range buckets {
			if err := finish(i); err != nil {
				return res, err
			}
		}
	}
	res.Scheme = v.scheme.String()
	res.Digest = hex.EncodeToString(whole.Sum(nil))
	return res, nil
}

type verifier struct {
	src     Source
	in      *Input // nil for none
	buckets []string
	held    []*held // by bucket: what its rows are checked against, until its digest is made
	scheme  ooid.Scheme
	index   *collisions.Index // nil until the first bucket's scheme is known
	seed    maphash.Seed
	names   []uint64 // by ref: the hash of each report's textname, in textname order
	last    string   // the last textname added
}

// held is what a bucket's rows are checked against: its reports, in the
// order its rows name them, and a bit for each measurement of its kept
// reports, set when its row is read.
type held struct {
	reports      []report
	seen         []uint64
	measurements uint32 // of its kept reports
	rejected     int
}

// report is a report's IDs: the measurements of a kept one are bits off
// to off+n-1 of its bucket's set.
type report struct{ ts, base, n, off uint32 }

// rejected is the off of a rejected report.
const rejected = ^uint32(0)

func (r report) id(ndx, mask uint32) int64 {
	return ooid.NewBackfilledID(r.ts, (r.base+ndx)&mask).Int64()
}

// useScheme checks that every bucket has the scheme of the first (an
// output is one ID space) and gives a keyed scheme its keys.
func (v *verifier) useScheme(bucket string, s ooid.Scheme, keyed *ooid.Scheme) (ooid.Scheme, error) {
	fail := func(what string) error { return &Failure{At: v.src.Where(bucket), What: what} }
	if v.index == nil {
		if keyed != nil && !s.Keyed() {
			return s, fail(fmt.Sprintf("the output's scheme is %s, not keyed: no scheme file is needed", s))
		}
		if s.Keyed() {
			if keyed == nil || !keyed.Equal(s) {
				return s, fail(fmt.Sprintf("the output's scheme is %s: its IDs are recomputed with its scheme file (--scheme FILE)", s))
			}
			s = *keyed
		}
		if err := s.Validate(); err != nil {
			return s, fail(fmt.Sprintf("the output records the scheme %s: %v", s, err))
		}
		v.scheme, v.index = s, collisions.NewIndex(s.CounterBits)
		return s, nil
	}
	if !s.Equal(v.scheme) {
		return s, fail(fmt.Sprintf("the bucket was made under %s and the buckets before it under %s: an output is one ID space", s, v.scheme))
	}
	return v.scheme, nil
}

// reports checks the verdicts of bucket i's reports and holds their IDs.
func (v *verifier) reports(ctx context.Context, i int, scheme ooid.Scheme) error {
	b := v.buckets[i]
	reports, err := v.src.Reports(ctx, b)
	if err != nil {
		return err
	}
	if v.in != nil {
		if err := v.in.complete(v.src.Where(b), b, reports); err != nil {
			return err
		}
	}
	// The verdicts, in textname order over the whole output: a bucket's
	// textnames start with its date.
	order := make([]int, len(reports))
	for j := range order {
		order[j] = j
	}
	slices.SortFunc(order, func(x, y int) int { return strings.Compare(reports[x].Textname, reports[y].Textname) })
	h := &held{reports: make([]report, len(reports))}
	var measurements uint64
	for _, j := range order {
		r := reports[j]
		fail := func(what string) error { return &Failure{At: v.src.Where(b) + ": report " + r.Textname, What: what} }
		switch {
		case !strings.HasPrefix(r.Textname, b+"/"):
			return fail("its textname is not in bucket " + b)
		case r.Textname <= v.last:
			return fail("listed twice, or out of the order of the buckets")
		}
		v.last = r.Textname
		id, err := scheme.Report(r.Textname)
		if err != nil {
			return fail(err.Error())
		}
		rg := collisions.RangeOf(id, r.N)
		if rg.SelfOverlaps(scheme.CounterBits) {
			return fail(fmt.Sprintf("%d measurements: more than the %d-bit counter holds", r.N, scheme.CounterBits))
		}
		ref := uint32(len(v.names))
		v.names = append(v.names, maphash.String(v.seed, r.Textname))
		// The reports added before sort before it: the first of those it
		// collides with is the one it loses to.
		hits := v.index.Add(rg, ref)
		switch {
		case len(hits) == 0 && r.RejectedBy != "":
			return fail("rejected by " + r.RejectedBy + ", but its IDs overlap no report that sorts before it")
		case len(hits) > 0 && r.RejectedBy == "":
			return fail(fmt.Sprintf("kept, but its IDs overlap those of %d report(s) that sort before it", len(hits)))
		case len(hits) > 0 && maphash.String(v.seed, r.RejectedBy) != v.names[slices.Min(hits)]:
			return fail("rejected by " + r.RejectedBy + ", which is not the first report that sorts before it and shares its IDs")
		}
		h.reports[j] = report{ts: id.TS, base: id.CounterBase(), n: r.N, off: rejected}
		if r.RejectedBy != "" {
			h.rejected++
			continue
		}
		// No two kept reports share an ID (checked above), so a bucket
		// of 2^32 measurements or more would have more than the IDs of
		// its second.
		if measurements+uint64(r.N) > 1<<32-1 {
			return fail("the bucket has more measurements than IDs of one second")
		}
		h.reports[j].off = uint32(measurements)
		measurements += uint64(r.N)
	}
	h.seen, h.measurements = make([]uint64, (measurements+63)/64), uint32(measurements)
	v.held[i] = h
	return nil
}

// row checks a measurement row: its report is a kept report of its
// bucket, its ndx one of the report's, its ID the one the scheme gives,
// and no row before it had that measurement.
func (v *verifier) row(r Row) error {
	if r.Bucket < 0 || r.Bucket >= len(v.held) || v.held[r.Bucket] == nil {
		return v.failRow(r, "its bucket is not one of the output's committed buckets")
	}
	h := v.held[r.Bucket]
	if r.Report < 0 || r.Report >= len(h.reports) {
		return v.failRow(r, "no report of the bucket has this textname")
	}
	rp := h.reports[r.Report]
	switch {
	case rp.off == rejected:
		return v.failRow(r, "its report was rejected and keeps no measurement")
	case r.Ndx < 0 || uint32(r.Ndx) >= rp.n:
		return v.failRow(r, fmt.Sprintf("ndx out of its report's %d measurements", rp.n))
	}
	if want := rp.id(uint32(r.Ndx), v.scheme.Mask()); r.OOID != want {
		return v.failRow(r, fmt.Sprintf("the ID is %016x, the scheme gives %016x", uint64(r.OOID), uint64(want)))
	}
	bit := rp.off + uint32(r.Ndx)
	if h.seen[bit/64]&(1<<(bit%64)) != 0 {
		return v.failRow(r, fmt.Sprintf("measurement %d has two rows", r.Ndx))
	}
	h.seen[bit/64] |= 1 << (bit % 64)
	return nil
}

// failRow is the failure of a row. A row the output names by its
// report's place gets its textname once Rows has returned (named).
func (v *verifier) failRow(r Row, what string) error {
	if r.Textname == "" && r.Bucket >= 0 && r.Report >= 0 {
		return &Failure{At: v.src.RowAt(r), What: what, row: &r}
	}
	return &Failure{At: v.src.RowAt(r), What: what}
}

// named gives the failure of a row named by its report's place the
// report's textname, read again.
func (v *verifier) named(ctx context.Context, err error) error {
	var f *Failure
	if !errors.As(err, &f) || f.row == nil {
		return err
	}
	r := *f.row
	if reports, rerr := v.src.Reports(ctx, v.buckets[r.Bucket]); rerr == nil && r.Report < len(reports) {
		r.Textname = reports[r.Report].Textname
		return &Failure{At: v.src.RowAt(r), What: f.What}
	}
	return err
}

// finish checks that every measurement of bucket i's kept reports had its
// row, and makes the bucket's digest from their IDs.
func (v *verifier) finish(ctx context.Context, i int) (Bucket, error) {
	h, b := v.held[i], v.buckets[i]
	bk := Bucket{Date: b, Reports: len(h.reports), CollisionLosers: h.rejected}
	mask := v.scheme.Mask()
	ids := make([]int64, 0, h.measurements)
	for j, r := range h.reports {
		if r.off == rejected {
			continue
		}
		if n := count(h.seen, r.off, r.n); n != r.n {
			name := fmt.Sprintf("the report at %d", j)
			if reports, err := v.src.Reports(ctx, b); err == nil && j < len(reports) {
				name = reports[j].Textname
			}
			return bk, &Failure{At: v.src.Where(b) + ": report " + name, What: fmt.Sprintf("%d measurement rows, the report has %d", n, r.n)}
		}
		for ndx := range r.n {
			ids = append(ids, r.id(ndx, mask))
		}
	}
	slices.Sort(ids)
	bk.Measurements = int64(len(ids))
	bk.Digest = digest(ids)
	return bk, nil
}

// count returns how many of bits off to off+n-1 are set.
func count(set []uint64, off, n uint32) uint32 {
	var c int
	for b := uint64(off); b < uint64(off)+uint64(n); {
		w := set[b/64] >> (b % 64)
		take := min(64-b%64, uint64(off)+uint64(n)-b)
		if take < 64 {
			w &= 1<<take - 1
		}
		c += bits.OnesCount64(w)
		b += take
	}
	return uint32(c)
}

// digest is the SHA-256 of the IDs, sorted, as 16 lowercase hex digits a
// line.
func digest(sorted []int64) string {
	h := sha256.New()
	var raw [8]byte
	line := make([]byte, 0, 17)
	for _, id := range sorted {
		binary.BigEndian.PutUint64(raw[:], uint64(id))
		line = append(hex.AppendEncode(line[:0], raw[:]), '\n')
		_, _ = h.Write(line) // a hash does not fail
	}
	return hex.EncodeToString(h.Sum(nil))
}
