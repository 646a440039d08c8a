// Package verify proves, from an output alone, that its IDs are what the
// scheme it records gives and that no ID is given twice (backfill verify):
// every measurement row's ID is recomputed from its textname and ndx; every
// kept report has its measurements 0..n-1, each once, and a rejected one
// none; every report's verdict is the one docs/design.md §3 gives (a report
// loses to the first-sorting report whose IDs overlap its own, and only
// then), over the whole output; and it computes a digest of the ID set per
// bucket and for the whole output, which anyone can recompute with
// standard tools (Digest says how).
package verify

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"

	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// Report is a report row of an output.
type Report struct {
	Textname   string
	N          uint32
	RejectedBy string // "" when kept
}

// Row is a measurement row of an output.
type Row struct {
	OOID     int64
	Textname string
	Ndx      int32
}

// Source is an output: its buckets, in order, and for each the scheme it
// was made under, its reports and its measurement rows.
type Source interface {
	Buckets(ctx context.Context) ([]string, error)
	Scheme(ctx context.Context, bucket string) (ooid.Scheme, error)
	Reports(ctx context.Context, bucket string) ([]Report, error)
	// Rows calls fn with every measurement row of the bucket, numbered
	// from 0 in the order the output holds them.
	Rows(ctx context.Context, bucket string, fn func(i int64, r Row) error) error
	// Where names the rows of a bucket in messages: a file, a table.
	Where(bucket string) string
}

// Bucket is what one bucket holds.
type Bucket struct {
	Date         string `json:"bucket"`
	Reports      int    `json:"reports"`
	Rejected     int    `json:"rejected"`
	Measurements int64  `json:"measurements"`
	Digest       string `json:"digest"`
}

// Result is what the whole output holds.
type Result struct {
	Scheme       string   `json:"scheme"`
	Buckets      []Bucket `json:"buckets"`
	Reports      int      `json:"reports"`
	Rejected     int      `json:"rejected"`
	Measurements int64    `json:"measurements"`
	Digest       string   `json:"digest"`
}

// Failure is the first thing verify finds wrong. Row is the measurement
// row (-1 for a report's failure).
type Failure struct {
	Where    string
	Row      int64
	Textname string
	Ndx      int32
	What     string
}

func (f *Failure) Error() string {
	if f.Row < 0 {
		return fmt.Sprintf("%s: report %s: %s", f.Where, f.Textname, f.What)
	}
	return fmt.Sprintf("%s: row %d (%s, ndx %d): %s", f.Where, f.Row, f.Textname, f.Ndx, f.What)
}

// Digest is how the digests are made, for a reader who recomputes them:
// a bucket's is the SHA-256 of its IDs as 16 lowercase hex digits a line,
// sorted; the output's, of the lines "BUCKET DIGEST" in bucket order.
const Digest = "sha256 of the IDs as 16 lowercase hex digits a line, sorted (per bucket); sha256 of the lines \"BUCKET DIGEST\" (whole output)"

// Run verifies the output of src bucket by bucket, calling done after each,
// and returns what it holds or the first *Failure (any other error is
// src's). A keyed scheme needs its keys: keyed, when not nil, is the
// scheme file's scheme.
func Run(ctx context.Context, src Source, keyed *ooid.Scheme, done func(Bucket)) (Result, error) {
	var res Result
	buckets, err := src.Buckets(ctx)
	if err != nil {
		return res, err
	}
	if len(buckets) == 0 {
		return res, &Failure{Where: src.Where("*"), Row: -1, What: "the output holds no committed bucket: there is nothing to verify"}
	}
	v := &verifier{src: src, seed: maphash.MakeSeed()}
	whole := sha256.New()
	for _, b := range buckets {
		scheme, err := src.Scheme(ctx, b)
		if err != nil {
			return res, err
		}
		if scheme, err = v.useScheme(b, scheme, keyed); err != nil {
			return res, err
		}
		bk, err := v.bucket(ctx, b, scheme)
		if err != nil {
			return res, err
		}
		fmt.Fprintf(whole, "%s %s\n", bk.Date, bk.Digest)
		res.Buckets = append(res.Buckets, bk)
		res.Reports += bk.Reports
		res.Rejected += bk.Rejected
		res.Measurements += bk.Measurements
		if done != nil {
			done(bk)
		}
	}
	res.Scheme = v.scheme.String()
	res.Digest = hex.EncodeToString(whole.Sum(nil))
	return res, nil
}

type verifier struct {
	src    Source
	scheme ooid.Scheme
	index  *collisions.Index // nil until the first bucket's scheme is known
	seed   maphash.Seed
	names  []uint64 // by ref: the hash of each report's textname, in textname order
	last   string   // the last textname added
}

// useScheme checks that every bucket has the scheme of the first (an
// output is one ID space) and gives a keyed scheme its keys.
func (v *verifier) useScheme(bucket string, s ooid.Scheme, keyed *ooid.Scheme) (ooid.Scheme, error) {
	fail := func(what string) error { return &Failure{Where: v.src.Where(bucket), Row: -1, What: what} }
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

// bucket verifies one bucket.
func (v *verifier) bucket(ctx context.Context, b string, scheme ooid.Scheme) (Bucket, error) {
	where := v.src.Where(b)
	reports, err := v.src.Reports(ctx, b)
	if err != nil {
		return Bucket{}, err
	}
	// The verdicts, in textname order over the whole output: a bucket's
	// textnames start with its date.
	slices.SortFunc(reports, func(x, y Report) int { return strings.Compare(x.Textname, y.Textname) })
	bk := Bucket{Date: b, Reports: len(reports)}
	byName := make(map[string]int, len(reports))
	ids := make([]ooid.ReportIDs, len(reports))
	for i, r := range reports {
		fail := func(what string) error { return &Failure{Where: where, Row: -1, Textname: r.Textname, What: what} }
		switch {
		case !strings.HasPrefix(r.Textname, b+"/"):
			return bk, fail("its textname is not in bucket " + b)
		case r.Textname <= v.last:
			return bk, fail("listed twice, or out of the order of the buckets")
		}
		v.last = r.Textname
		id, err := scheme.Report(r.Textname)
		if err != nil {
			return bk, fail(err.Error())
		}
		rg := collisions.RangeOf(id, r.N)
		if rg.SelfOverlaps(scheme.CounterBits) {
			return bk, fail(fmt.Sprintf("%d measurements: more than the %d-bit counter holds", r.N, scheme.CounterBits))
		}
		ids[i], byName[r.Textname] = id, i
		ref := uint32(len(v.names))
		v.names = append(v.names, maphash.String(v.seed, r.Textname))
		// The reports added before sort before it: the first of those it
		// collides with is the one it loses to.
		hits := v.index.Add(rg, ref)
		switch {
		case len(hits) == 0 && r.RejectedBy != "":
			return bk, fail("rejected by " + r.RejectedBy + ", but its IDs overlap no report that sorts before it")
		case len(hits) > 0 && r.RejectedBy == "":
			return bk, fail(fmt.Sprintf("kept, but its IDs overlap those of %d report(s) that sort before it", len(hits)))
		case len(hits) > 0 && maphash.String(v.seed, r.RejectedBy) != v.names[slices.Min(hits)]:
			return bk, fail("rejected by " + r.RejectedBy + ", which is not the first report that sorts before it and shares its IDs")
		}
		if r.RejectedBy != "" {
			bk.Rejected++
		}
	}
	// The rows: each kept report's ndx 0..n-1 once, each ID its own. An ID
	// is its report's ndx (checked as each row is read), and no two kept
	// reports share one (checked above): two rows with one ID are one
	// measurement twice. The IDs are sized for the rows the reports
	// announce, so a bucket of millions of rows is not copied as it grows.
	var expect uint64
	for _, r := range reports {
		if r.RejectedBy == "" {
			expect += uint64(r.N)
		}
	}
	count := make([]uint32, len(reports))
	out := make([]int64, 0, min(expect, 1<<26))
	err = v.src.Rows(ctx, b, func(i int64, row Row) error {
		fail := func(what string) error {
			return &Failure{Where: where, Row: i, Textname: row.Textname, Ndx: row.Ndx, What: what}
		}
		ri, ok := byName[row.Textname]
		switch {
		case !ok:
			return fail("no report of the bucket has this textname")
		case reports[ri].RejectedBy != "":
			return fail("its report was rejected (by " + reports[ri].RejectedBy + ") and keeps no measurement")
		case row.Ndx < 0 || uint32(row.Ndx) >= reports[ri].N:
			return fail(fmt.Sprintf("ndx out of its report's %d measurements", reports[ri].N))
		}
		if want := ids[ri].ID(uint32(row.Ndx)).Int64(); row.OOID != want {
			return fail(fmt.Sprintf("the ID is %016x, the scheme gives %016x", uint64(row.OOID), uint64(want)))
		}
		count[ri]++
		out = append(out, row.OOID)
		return nil
	})
	if err != nil {
		return bk, err
	}
	slices.Sort(out)
	for i := 1; i < len(out); i++ {
		if out[i] == out[i-1] {
			ri, ndx := owner(reports, ids, scheme, out[i])
			return bk, &Failure{Where: where, Row: -1, Textname: reports[ri].Textname, What: fmt.Sprintf("measurement %d has two rows", ndx)}
		}
	}
	for i, r := range reports {
		if r.RejectedBy == "" && count[i] != r.N {
			return bk, &Failure{Where: where, Row: -1, Textname: r.Textname, What: fmt.Sprintf("%d measurement rows, the report has %d", count[i], r.N)}
		}
	}
	bk.Measurements = int64(len(out))
	bk.Digest = digest(out)
	return bk, nil
}

// owner returns the kept report whose measurement has the ID, and its ndx.
func owner(reports []Report, ids []ooid.ReportIDs, scheme ooid.Scheme, id int64) (int, uint32) {
	mask := uint32(1)<<uint(scheme.CounterBits) - 1
	for ri, r := range reports {
		ndx := (uint32(id) - ids[ri].CounterBase()) & mask
		if r.RejectedBy == "" && ndx < r.N && ids[ri].ID(ndx).Int64() == id {
			return ri, ndx
		}
	}
	return 0, 0 // not reached: every ID read is its report's
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
