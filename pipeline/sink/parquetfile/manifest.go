package parquetfile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// isBucket reports whether name is a bucket's (YYYY-MM-DD), as the
// ledger's file names are.
func isBucket(name string) bool {
	_, err := time.Parse(time.DateOnly, name)
	return err == nil && len(name) == len(time.DateOnly)
}

// Buckets implements sink.Rewriter: the buckets with a ledger entry.
func (s *Sink) Buckets(ctx context.Context) ([]string, error) {
	ents, err := s.st.ReadDir(ctx, "ledger")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if b, ok := strings.CutSuffix(e.Name(), ".json"); ok && isBucket(b) {
			out = append(out, b)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Manifest implements sink.Rewriter: the bucket checked against its
// ledger entry first (CheckBucket).
//
// A bucket whose ledger entry and files have the stamps they had when
// they were last checked is not checked again: its report manifest alone
// is read.
func (s *Sink) Manifest(ctx context.Context, bucket string) (stamped.Meta, []stamped.ManifestEntry, error) {
	if e, ok := s.cat[bucket]; ok && s.unchanged(ctx, bucket) {
		f := bucketFiles(bucket)[1]
		data, err := store.ReadFile(ctx, s.st, f)
		if err != nil {
			return stamped.Meta{}, nil, fmt.Errorf("bucket %s: %w", bucket, err)
		}
		rows, err := parseRows[manifestRow](data, s.st.Where(f))
		if err != nil {
			return stamped.Meta{}, nil, err
		}
		out := make([]stamped.ManifestEntry, len(rows))
		for i, r := range rows {
			out[i] = stamped.ManifestEntry{Textname: r.Textname, N: uint32(r.N), RejectedBy: r.RejectedBy}
		}
		return e.Ledger.meta(), out, nil
	}
	c, err := readChecked(ctx, s.st, bucket)
	if err != nil {
		return stamped.Meta{}, nil, err
	}
	s.checked(ctx, bucket)
	out := make([]stamped.ManifestEntry, len(c.reports))
	for i, r := range c.reports {
		out[i] = stamped.ManifestEntry{Textname: r.Textname, N: uint32(r.N), RejectedBy: r.RejectedBy}
	}
	return c.ledger.meta(), out, nil
}

// manifestRow is the columns of a report manifest that a run settles
// with: a reader of it reads those columns alone.
type manifestRow struct {
	Textname   string `parquet:"textname"`
	N          int64  `parquet:"n"`
	RejectedBy string `parquet:"rejected_by,dict"`
}

// Scheme is the scheme the bucket was made under.
func (l Ledger) Scheme() ooid.Scheme { return l.meta().Scheme }

func (l Ledger) meta() stamped.Meta {
	return stamped.Meta{Bucket: l.Bucket, Fingerprint: l.Fingerprint, Listing: l.Listing, Source: l.Source, Scheme: ooid.Scheme{CounterBits: l.CounterBits, SHA1Offset: l.SHA1Offset, Table: l.KeyTable},
		NdxPolicy: l.NdxPolicy, Version: l.Version, UIDs: l.UIDs}
}

// ReadReports reads the reports/B.parquet file name of the output st.
func ReadReports(ctx context.Context, st store.Store, name string) ([]Report, error) {
	return readRows[Report](ctx, st, name)
}

// ReadMeasurements reads the measurements/B.parquet file name of the
// output st, in its order.
func ReadMeasurements(ctx context.Context, st store.Store, name string) ([]Measurement, error) {
	return readRows[Measurement](ctx, st, name)
}

// ReadMeasurementIDs reads the measurements/B.parquet file name of a run
// with --measurement-uid, in its order.
func ReadMeasurementIDs(ctx context.Context, st store.Store, name string) ([]MeasurementID, error) {
	return readRows[MeasurementID](ctx, st, name)
}

// ReadReportIDs reads the reports/B.parquet file name of a run with
// --measurement-uid.
func ReadReportIDs(ctx context.Context, st store.Store, name string) ([]ReportIDs, error) {
	return readRows[ReportIDs](ctx, st, name)
}

// EachMeasurement calls fn with each row of the measurements/B.parquet
// file name of the output st and its number (from 0), in the file's order,
// a few thousand rows in memory at a time; it stops at fn's first error.
func EachMeasurement(ctx context.Context, st store.Store, name string, fn func(i int64, m Measurement) error) error {
	r, closeFile, total, err := openRows[Measurement](ctx, st, name)
	if err != nil {
		return err
	}
	defer closeFile()
	buf := make([]Measurement, 4096)
	var i int64
	for i < total {
		n, err := r.Read(buf)
		for _, m := range buf[:n] {
			if err := fn(i, m); err != nil {
				return err
			}
			i++
		}
		if errors.Is(err, io.EOF) || err == nil && n == 0 { // no row is ever read again
			break
		} else if err != nil {
			return fmt.Errorf("%s: %w", st.Where(name), err)
		}
	}
	if i != total {
		return fmt.Errorf("%s: %d of %d rows read", st.Where(name), i, total)
	}
	return nil
}

// wholeRead bounds the objects read whole into memory before their
// Parquet footer is parsed.
const wholeRead = 256 << 20

func readRows[T any](ctx context.Context, st store.Store, name string) ([]T, error) {
	r, closeFile, total, err := openRows[T](ctx, st, name)
	if err != nil {
		return nil, err
	}
	defer closeFile()
	rows := make([]T, total)
	n, err := r.Read(rows)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", st.Where(name), err)
	}
	if n != len(rows) {
		return nil, fmt.Errorf("%s: %d of %d rows read", st.Where(name), n, len(rows))
	}
	return rows, nil
}

// openRows opens the Parquet file name of st for reading rows of T, and
// returns the reader, what closes it and the file, and the number of rows.
func openRows[T any](ctx context.Context, st store.Store, name string) (*parquet.GenericReader[T], func(), int64, error) {
	f, err := st.Open(ctx, name)
	if err != nil {
		return nil, nil, 0, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, 0, err
	}
	ra, ok := f.(io.ReaderAt)
	if !ok {
		f.Close()
		return nil, nil, 0, fmt.Errorf("%s: not readable at offsets", st.Where(name))
	}
	if store.ETag(info) != "" && info.Size() <= wholeRead {
		// An object: one streamed read instead of a GET per page.
		data, err := io.ReadAll(f)
		if err != nil {
			f.Close()
			return nil, nil, 0, err
		}
		ra = bytes.NewReader(data)
	}
	pf, err := parquet.OpenFile(ra, info.Size())
	if err != nil {
		f.Close()
		return nil, nil, 0, fmt.Errorf("%s: %w", st.Where(name), err)
	}
	r := parquet.NewGenericReader[T](pf)
	return r, func() { r.Close(); f.Close() }, pf.NumRows(), nil
}

// ReadDeadLetters reads the dead-letters/B.jsonl file name of the output
// st.
func ReadDeadLetters(ctx context.Context, st store.Store, name string) ([]deadletter.Record, error) {
	f, err := st.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return readDeadLetters(f, st.Where(name))
}

func readDeadLetters(f fs.File, path string) ([]deadletter.Record, error) {
	defer f.Close()
	var out []deadletter.Record
	dec := json.NewDecoder(bufio.NewReader(f))
	for {
		var d deadletter.Record
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, d)
	}
}

// Reassign implements sink.Rewriter: it rewrites the bucket from its report
// manifest and dead letters, through the same writer as a run, so the
// files are those a run with the new verdicts writes.
func (s *Sink) Reassign(ctx context.Context, scheme ooid.Scheme, bucket string, verdicts []stamped.Verdict) error {
	c, err := readChecked(ctx, s.st, bucket)
	if err != nil {
		return fmt.Errorf("reassign %s: %w", bucket, err)
	}
	l, rows, dead := c.ledger, c.reports, c.dead
	byName := map[string]stamped.Verdict{}
	for _, v := range verdicts {
		byName[v.Textname] = v
	}
	// The collision records of the reports rejected so far, by textname.
	rejected := map[string]bool{}
	for _, r := range rows {
		if r.RejectedBy != "" {
			rejected[r.Textname] = true
		}
	}
	old := map[string]deadletter.Record{}
	var kept []deadletter.Record
	for _, d := range dead {
		if d.Reason == deadletter.Collision && rejected[d.Textname] {
			old[d.Textname] = d
			continue
		}
		kept = append(kept, d)
	}
	m := l.meta()
	if !m.Scheme.Equal(scheme) {
		return fmt.Errorf("reassign %s: the bucket was made under %s, not %s", bucket, m.Scheme, scheme)
	}
	m.Scheme = scheme
	counts := l.Counts.Clone()
	reports := make([]stamped.Report, len(rows))
	var collided []deadletter.Record
	for i, row := range rows {
		r, err := row.stamped(m.Scheme)
		if err != nil {
			return fmt.Errorf("reassign %s: %w", bucket, err)
		}
		if c.ids != nil {
			r.IDs = c.ids[i]
		}
		d, had := old[row.Textname]
		if v, ok := byName[row.Textname]; ok {
			d, had = collisions.Apply(bucket, &r, &counts, v)
		}
		if r.RejectedBy != "" {
			if !had {
				return fmt.Errorf("reassign %s: report %s is rejected but has no collision dead letter", bucket, row.Textname)
			}
			collided = append(collided, d)
		}
		reports[i] = r
	}
	collisions.SortRecords(collided)
	w, err := s.Begin(ctx, m)
	if err != nil {
		return err
	}
	for i := range reports {
		if err := w.Report(&reports[i]); err != nil {
			w.Abort()
			return err
		}
	}
	for _, d := range append(kept, collided...) {
		if err := w.DeadLetter(d); err != nil {
			w.Abort()
			return err
		}
	}
	_, err = w.Commit(ctx, counts)
	return err
}

// stamped is the report of a row, its IDs recomputed under scheme.
func (row Report) stamped(scheme ooid.Scheme) (stamped.Report, error) {
	id, err := scheme.Report(row.Textname)
	if err != nil {
		return stamped.Report{}, fmt.Errorf("report %s: %w", row.Textname, err)
	}
	r := stamped.Report{Textname: row.Textname, Container: row.Container, Offset: row.Offset, Size: row.Size,
		ID: id, N: uint32(row.N), RejectedBy: row.RejectedBy}
	if row.SHA1 != "" {
		var sum [20]byte
		if _, err := hex.Decode(sum[:], []byte(row.SHA1)); err != nil {
			return stamped.Report{}, fmt.Errorf("report %s: sha1: %w", row.Textname, err)
		}
		r.SHA1 = &sum
	}
	return r, nil
}

// Stamped returns a committed bucket of the output as a run commits it:
// its reports with their collision verdicts, and its dead letters, the
// collision records of the reports rejected included. Loaded into a sink
// that settles verdicts itself, through a Loader, the verdicts are where
// the sink's settling starts: a report keeps its verdict, or loses to a
// report that sorts earlier still.
func (s *Sink) Stamped(ctx context.Context, bucket string) (*stamped.Bucket, error) {
	c, err := readChecked(ctx, s.st, bucket)
	if err != nil {
		return nil, err
	}
	b := &stamped.Bucket{Meta: c.ledger.meta(), BytesIn: c.ledger.Counts.BytesIn, BytesOut: c.ledger.Counts.BytesOut, Records: c.dead}
	for i, row := range c.reports {
		r, err := row.stamped(b.Meta.Scheme)
		if err != nil {
			return nil, fmt.Errorf("bucket %s: %w", bucket, err)
		}
		if c.ids != nil {
			r.IDs = c.ids[i]
		}
		b.Reports = append(b.Reports, r)
	}
	return b, nil
}
