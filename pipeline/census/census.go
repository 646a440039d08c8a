// Package census finds the measurements of an output that are the same
// measurement more than once: the groups of measurements whose raw bytes
// are equal (their content hashes, from run --measurement-uid), over
// every committed bucket, whatever runs, shards or buckets made them.
//
// It reads each bucket's report manifest once and writes each
// measurement's hash and place to one of Partitions temporary files, by
// the hash's first byte; it then reads the files one at a time, sorts
// each by hash and names the groups. So it holds one partition in memory
// (23 bytes a measurement: a 147 M-measurement archive is 53 MB a
// partition), the reports' places (17 bytes a report), and their
// textnames in a temporary file, read back for the members of groups.
package census

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/ooniuid"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Partitions is how many temporary files the measurements are spread
// over, by their hash's first byte.
const Partitions = 64

// The kinds of duplicate, by how it stands to its group's first member.
const (
	SameReport = "same_report" // a measurement of the same report (the same textname)
	Retry      = "retry"       // of a report of the same basename in another bucket: an upload retried
	Other      = "other"       // anything else
)

// Result is what a census found.
type Result struct {
	Buckets      int   `json:"buckets"`      // with measurements
	Reports      int64 `json:"reports"`      // with measurements, collision losers included
	Measurements int64 `json:"measurements"` // collision losers' included
	// Unhashed are the measurements without a content hash (raw bytes not
	// read: an autoclaved report without an agreeing canned form), in
	// Measurements but in no group.
	Unhashed int64 `json:"unhashed"`
	// Listed are the measurements OONI's code gives a uid that no row
	// carries, listed in dead letters (measurement_uids): not in
	// Measurements, but in the groups, by the hash their uid ends with.
	Listed int64 `json:"listed"`
	// Groups are the sets of two or more measurements with equal bytes;
	// Duplicates every member of a group after its first, in (textname,
	// ndx) byte order.
	Groups     int64            `json:"groups"`
	Duplicates int64            `json:"duplicates"`
	ByKind     map[string]int64 `json:"by_kind"`
}

// report is what the census keeps of a report.
type report struct {
	name     int64 // offset of its textname in the names file
	nameLen  uint32
	ts, base uint32
	bits     uint8
	rejected bool
}

const recordSize = 15 + 4 + 4 // hash, report, ndx

// Report is a report with measurements as a census reads it: its textname, where its IDs
// are (ts, counter base, counter bits), whether it lost them to a
// collision (its measurements have no rows), and the content hash of each
// of its measurements, by ndx.
type Report struct {
	Textname string
	TS, Base uint32
	Bits     int
	Loser    bool
	Hashes   []ooniuid.Hash
	// Listed are the hashes of the uids the report's dead letters list:
	// measurements OONI's code has that no row carries.
	Listed    []ooniuid.Hash
	NewBucket bool // the first report of a bucket
}

// listedNdx is where the ndx of a listed measurement starts: after every
// measurement's, so that it sorts after them; it has no ndx of its own.
const listedNdx = 1 << 31

// ListedHashes returns, by textname, the hashes the uids of records list.
func ListedHashes(recs []deadletter.Record) (map[string][]ooniuid.Hash, error) {
	out := map[string][]ooniuid.Hash{}
	for _, d := range recs {
		for _, uid := range d.MeasurementUIDs {
			h, err := HashOfUID(uid)
			if err != nil {
				return nil, fmt.Errorf("report %s: %w", d.Textname, err)
			}
			out[d.Textname] = append(out[d.Textname], h)
		}
	}
	return out, nil
}

// HashOfUID is the content hash a measurement_uid ends with.
func HashOfUID(uid string) (ooniuid.Hash, error) {
	var h ooniuid.Hash
	if len(uid) < 2*len(h)+2 || !strings.HasPrefix(uid, "01") {
		return h, fmt.Errorf("%q is not a measurement_uid", uid)
	}
	if _, err := hex.Decode(h[:], []byte(uid[len(uid)-2*len(h):])); err != nil {
		return h, fmt.Errorf("%q is not a measurement_uid: %w", uid, err)
	}
	return h, nil
}

// Source calls fn with every report of an output, bucket by bucket.
type Source func(ctx context.Context, fn func(Report) error) error

// Parquet is the Source of the Parquet output st: each committed bucket's
// report manifest, checked against its ledger entry.
func Parquet(st store.Store) Source {
	return func(ctx context.Context, fn func(Report) error) error {
		states, err := parquetfile.ReadState(ctx, st)
		if err != nil {
			return err
		}
		for _, s := range states {
			if s.Status != stamped.StatusCommitted {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			l, rows, ids, err := parquetfile.ReadIdentities(ctx, st, s.Meta.Bucket)
			if err != nil {
				return err
			}
			dead, err := parquetfile.ReadDeadLetters(ctx, st, "dead-letters/"+s.Meta.Bucket+".jsonl")
			if err != nil {
				return err
			}
			listed, err := ListedHashes(dead)
			if err != nil {
				return fmt.Errorf("bucket %s: %w", s.Meta.Bucket, err)
			}
			first := true
			for i, r := range rows {
				if len(ids[i]) == 0 && len(listed[r.Textname]) == 0 {
					continue // no measurement
				}
				hashes := make([]ooniuid.Hash, len(ids[i]))
				for j, id := range ids[i] {
					hashes[j] = id.Hash
				}
				if err := fn(Report{Textname: r.Textname, TS: uint32(r.TS), Base: uint32(r.CounterBase), Bits: l.CounterBits,
					Loser: r.RejectedBy != "", Hashes: hashes, Listed: listed[r.Textname], NewBucket: first}); err != nil {
					return err
				}
				delete(listed, r.Textname)
				first = false
			}
			if err := Rest(listed, first, fn); err != nil {
				return err
			}
		}
		return nil
	}
}

// Rest calls fn with a report for each textname of listed, in order:
// the listed measurements of reports a bucket holds without any other.
func Rest(listed map[string][]ooniuid.Hash, first bool, fn func(Report) error) error {
	for _, tn := range slices.Sorted(maps.Keys(listed)) {
		if err := fn(Report{Textname: tn, Loser: true, Listed: listed[tn], NewBucket: first}); err != nil {
			return err
		}
		first = false
	}
	return nil
}

// WithListed is the Source of an output whose reports with measurements
// each gives, by bucket in order (NewBucket not set), and whose listed
// measurements listed gives (the dead letters that list uids, of every
// committed bucket): each report has its own, and a bucket's reports that
// have only listed ones come after its others (a bucket of only those, in
// its place).
func WithListed(each func(ctx context.Context, fn func(bucket string, r Report) error) error, listed func(context.Context) ([]deadletter.Record, error)) Source {
	return func(ctx context.Context, fn func(Report) error) error {
		recs, err := listed(ctx)
		if err != nil {
			return err
		}
		byBucket := map[string][]deadletter.Record{}
		for _, d := range recs {
			byBucket[d.Bucket] = append(byBucket[d.Bucket], d)
		}
		left := map[string]map[string][]ooniuid.Hash{}
		for b, ds := range byBucket {
			if left[b], err = ListedHashes(ds); err != nil {
				return fmt.Errorf("bucket %s: %w", b, err)
			}
		}
		// rest gives the reports of only listed measurements of the
		// buckets before upTo ("" for all): of last after its others.
		last, first := "", true
		rest := func(upTo string) error {
			for _, b := range slices.Sorted(maps.Keys(left)) {
				if upTo != "" && b >= upTo {
					break
				}
				if err := Rest(left[b], b != last, fn); err != nil {
					return err
				}
				delete(left, b)
			}
			return nil
		}
		err = each(ctx, func(bucket string, r Report) error {
			if bucket != last {
				if err := rest(bucket); err != nil {
					return err
				}
				last, first = bucket, true
			}
			r.Listed, r.NewBucket = left[bucket][r.Textname], first
			delete(left[bucket], r.Textname)
			first = false
			return fn(r)
		})
		if err != nil {
			return err
		}
		return rest("")
	}
}

// Run takes the census of the output src reads. With pairs, it writes
// there, as CSV with a header line, a line for each duplicate: its OOID
// beside its group's first's (empty for a collision loser, which has no
// row), the kind, and both textnames and ndx. Temporary files go to
// tmpDir ("" for the system's).
func Run(ctx context.Context, src Source, pairs io.Writer, tmpDir string) (res Result, err error) {
	res.ByKind = map[string]int64{SameReport: 0, Retry: 0, Other: 0}
	names, err := os.CreateTemp(tmpDir, "backfill-census-names-*")
	if err != nil {
		return res, err
	}
	defer removeTemp(names, &err)
	parts := make([]*os.File, Partitions)
	bufs := make([]*bufio.Writer, Partitions)
	for i := range parts {
		if parts[i], err = os.CreateTemp(tmpDir, "backfill-census-*"); err != nil {
			return res, err
		}
		defer removeTemp(parts[i], &err)
		bufs[i] = bufio.NewWriterSize(parts[i], 64<<10)
	}
	nw := bufio.NewWriterSize(names, 256<<10)
	var reports []report
	var off int64
	var rec [recordSize]byte
	err = src(ctx, func(r Report) error {
		if r.NewBucket {
			res.Buckets++
		}
		if len(reports) == 1<<32-1 {
			return errors.New("census: more than 2^32 reports")
		}
		ref := uint32(len(reports))
		reports = append(reports, report{name: off, nameLen: uint32(len(r.Textname)), ts: r.TS, base: r.Base, bits: uint8(r.Bits), rejected: r.Loser})
		if _, err := nw.WriteString(r.Textname); err != nil {
			return err
		}
		off += int64(len(r.Textname))
		res.Reports++
		for ndx, h := range r.Hashes {
			res.Measurements++
			if !h.Known() {
				res.Unhashed++
				continue
			}
			copy(rec[:15], h[:])
			binary.LittleEndian.PutUint32(rec[15:], ref)
			binary.LittleEndian.PutUint32(rec[19:], uint32(ndx))
			if _, err := bufs[int(h[0])%Partitions].Write(rec[:]); err != nil {
				return err
			}
		}
		if len(r.Listed) >= listedNdx {
			return fmt.Errorf("census: report %s lists %d uids", r.Textname, len(r.Listed))
		}
		for i, h := range r.Listed {
			res.Listed++
			copy(rec[:15], h[:])
			binary.LittleEndian.PutUint32(rec[15:], ref)
			binary.LittleEndian.PutUint32(rec[19:], uint32(listedNdx+i))
			if _, err := bufs[int(h[0])%Partitions].Write(rec[:]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	if err := nw.Flush(); err != nil {
		return res, err
	}
	var out *bufio.Writer
	if pairs != nil {
		out = bufio.NewWriter(pairs)
		fmt.Fprintln(out, "duplicate_ooid,first_ooid,kind,duplicate_textname,duplicate_ndx,first_textname,first_ndx")
	}
	c := &counter{reports: reports, names: names, res: &res, out: out}
	for i, b := range bufs {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if err := b.Flush(); err != nil {
			return res, err
		}
		if err := c.partition(parts[i]); err != nil {
			return res, err
		}
	}
	if out != nil {
		return res, out.Flush()
	}
	return res, nil
}

func removeTemp(f *os.File, err *error) {
	*err = errors.Join(*err, f.Close(), os.Remove(f.Name()))
}

// counter names the groups of each partition.
type counter struct {
	reports []report
	names   *os.File
	res     *Result
	out     *bufio.Writer
}

// member is a measurement of a group, named.
type member struct {
	textname string
	ref, ndx uint32
}

func (c *counter) partition(f *os.File) error {
	data, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<62))
	if err != nil {
		return err
	}
	n := len(data) / recordSize
	idx := make([]int32, n)
	for i := range idx {
		idx[i] = int32(i)
	}
	hash := func(i int32) []byte { return data[int(i)*recordSize : int(i)*recordSize+15] }
	slices.SortFunc(idx, func(a, b int32) int { return bytes.Compare(hash(a), hash(b)) })
	for i := 0; i < n; {
		j := i + 1
		for j < n && bytes.Equal(hash(idx[i]), hash(idx[j])) {
			j++
		}
		if j-i > 1 {
			if err := c.group(data, idx[i:j]); err != nil {
				return err
			}
		}
		i = j
	}
	return nil
}

// group names a group's members in (textname, ndx) order and counts its
// duplicates by kind.
func (c *counter) group(data []byte, idx []int32) error {
	ms := make([]member, len(idx))
	for k, i := range idx {
		r := data[int(i)*recordSize:]
		ms[k].ref = binary.LittleEndian.Uint32(r[15:])
		ms[k].ndx = binary.LittleEndian.Uint32(r[19:])
		rep := c.reports[ms[k].ref]
		name := make([]byte, rep.nameLen)
		if _, err := c.names.ReadAt(name, rep.name); err != nil {
			return err
		}
		ms[k].textname = string(name)
	}
	slices.SortFunc(ms, func(a, b member) int {
		if x := strings.Compare(a.textname, b.textname); x != 0 {
			return x
		}
		return int(int64(a.ndx) - int64(b.ndx))
	})
	c.res.Groups++
	first := ms[0]
	for _, m := range ms[1:] {
		kind := Other
		switch {
		case m.textname == first.textname:
			kind = SameReport
		case base(m.textname) == base(first.textname) && bucketOf(m.textname) != bucketOf(first.textname):
			kind = Retry
		}
		c.res.Duplicates++
		c.res.ByKind[kind]++
		if c.out != nil {
			fmt.Fprintf(c.out, "%s,%s,%s,%s,%s,%s,%s\n", c.ooid(m), c.ooid(first), kind, csv(m.textname), ndxOf(m), csv(first.textname), ndxOf(first))
		}
	}
	return nil
}

// ndxOf is a member's ndx, "" for a listed measurement, which has none.
func ndxOf(m member) string {
	if m.ndx >= listedNdx {
		return ""
	}
	return strconv.FormatUint(uint64(m.ndx), 10)
}

// ooid is a member's OOID in decimal (the bigint's value), "" for a
// collision loser's and a listed measurement's, which have no row.
func (c *counter) ooid(m member) string {
	r := c.reports[m.ref]
	if r.rejected || m.ndx >= listedNdx {
		return ""
	}
	mask := uint32(1)<<r.bits - 1
	return strconv.FormatInt(ooid.NewBackfilledID(r.ts, (r.base+m.ndx)&mask).Int64(), 10)
}

func base(textname string) string {
	if i := strings.LastIndexByte(textname, '/'); i >= 0 {
		return textname[i+1:]
	}
	return textname
}

func bucketOf(textname string) string {
	if i := strings.IndexByte(textname, '/'); i >= 0 {
		return textname[:i]
	}
	return ""
}

// csv quotes a field when it holds a comma, a quote or a line break.
func csv(s string) string {
	if !strings.ContainsAny(s, ",\"\r\n") {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
