// Package parquetfile is the embedded sink: per bucket, Parquet files of
// measurements and reports, a JSON-lines dead-letter archive and a ledger
// entry, each made visible whole (a rename into place on disk, a completed
// PUT on S3).
//
// Layout under the output folder (or s3:// prefix), for bucket B:
//
//	measurements/B.parquet   ooid INT64, textname, ndx INT32, bucket_date DATE
//	reports/B.parquet        textname, ts, ts_source, counter_base, n, bucket_date,
//	                         container, offset, size, sha1, rejected_by: the
//	                         report manifest, collision losers included
//	dead-letters/B.jsonl     one deadletter.Record per line
//	ledger/B.json            Meta, Counts, the files' digests, the zone
//	                         and times: the commit record
//	input-dead-letters.jsonl the records of the input's folders that the
//	                         last run did not read (not bucket folders)
//	catalogue.json           a cache of the ledger (see CatalogueName)
//	settling.json            a settlement under way (see SettlingName)
//
// The Parquet key-value metadata carries the scheme (backfill.counter_bits,
// backfill.sha1_offset; for a keyed scheme also backfill.hash and
// backfill.key_table), backfill.ndx_policy, backfill.version,
// backfill.bucket and backfill.input_fingerprint. The ooid column holds the
// same 64 bits as the Postgres bigint (two's complement).
//
// The ledger entry is the commit point, and records the size and SHA-256
// of each of the bucket's files: whoever builds on a committed bucket
// checks them (CheckBucket). A commit removes the bucket's measurements
// file, then its ledger entry, puts the new reports and dead letters in
// place, writes the new entry, and puts the measurements file in place
// last: a measurements file is always a committed bucket's, a bucket whose
// entry is missing or whose files are not all there is redone by
// --resume, and every file is replaced whole, so a run killed at any point
// leaves either the old or the new version of each file, never a part of
// one, and never an old file beside a new entry.
package parquetfile

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/ooniuid"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Measurement is a row of measurements/B.parquet. (The type's name is the
// Parquet schema's root name: renaming it changes every file.)
type Measurement struct {
	OOID       int64  `parquet:"ooid,delta"`
	Textname   string `parquet:"textname,dict"`
	Ndx        int32  `parquet:"ndx,delta"`
	BucketDate int32  `parquet:"bucket_date,date"`
}

// Report is a row of reports/B.parquet (its name is the schema's, too).
type Report struct {
	Textname    string `parquet:"textname"`
	TS          int64  `parquet:"ts"` // seconds since the Unix epoch
	TSSource    string `parquet:"ts_source,dict"`
	CounterBase int32  `parquet:"counter_base"`
	N           int64  `parquet:"n"`
	BucketDate  int32  `parquet:"bucket_date,date"`
	Container   string `parquet:"container,dict"`
	Offset      int64  `parquet:"offset"`
	Size        int64  `parquet:"size"`
	SHA1        string `parquet:"sha1"` // hex, of the raw report (from the index); "" when unknown
	// RejectedBy names the report that keeps the IDs this one would share
	// with it; "" when the report has its measurement rows.
	RejectedBy string `parquet:"rejected_by,dict"`
}

// MeasurementID is a row of measurements/B.parquet of a run with
// --measurement-uid: a Measurement's columns and OONI's identity of the
// measurement (readers of Measurement read such a file too).
type MeasurementID struct {
	OOID       int64  `parquet:"ooid,delta"`
	Textname   string `parquet:"textname,dict"`
	Ndx        int32  `parquet:"ndx,delta"`
	BucketDate int32  `parquet:"bucket_date,date"`
	// MeasurementUID is OONI's measurement_uid; null where OONI's code
	// gives none (docs/ooni-ids.md).
	MeasurementUID *string `parquet:"measurement_uid,optional"`
	// ContentHash is the 30 hex digits of SHAKE128 of the measurement's
	// raw bytes: measurement_uid's last 30 characters; null where the raw
	// bytes were not read (an autoclaved report without an agreeing
	// canned form).
	ContentHash *string `parquet:"content_hash,optional"`
}

// Identity is OONI's identity of one measurement, as a report manifest
// of a run with --measurement-uid lists it for each of its measurements.
type Identity struct {
	MeasurementUID *string `parquet:"measurement_uid,optional"`
	ContentHash    *string `parquet:"content_hash,optional"`
}

// ReportIDs is a row of reports/B.parquet of a run with
// --measurement-uid: a Report's columns and the identity of each of its
// measurements, by ndx, collision losers' too (readers of Report read
// such a file too).
type ReportIDs struct {
	Textname    string     `parquet:"textname"`
	TS          int64      `parquet:"ts"`
	TSSource    string     `parquet:"ts_source,dict"`
	CounterBase int32      `parquet:"counter_base"`
	N           int64      `parquet:"n"`
	BucketDate  int32      `parquet:"bucket_date,date"`
	Container   string     `parquet:"container,dict"`
	Offset      int64      `parquet:"offset"`
	Size        int64      `parquet:"size"`
	SHA1        string     `parquet:"sha1"`
	RejectedBy  string     `parquet:"rejected_by,dict"`
	IDs         []Identity `parquet:"ids,list"`
}

// identities are the parquet form of a report's IDs.
func identities(ids []ooniuid.ID) []Identity {
	out := make([]Identity, len(ids))
	for i, id := range ids {
		if id.Hash.Known() {
			h := id.Hash.String()
			out[i].ContentHash = &h
		}
		if id.UID != "" {
			u := id.UID
			out[i].MeasurementUID = &u
		}
	}
	return out
}

// ooniIDs are a report's IDs as its manifest lists them.
func ooniIDs(rows []Identity) ([]ooniuid.ID, error) {
	out := make([]ooniuid.ID, len(rows))
	for i, r := range rows {
		if r.ContentHash == nil {
			if r.MeasurementUID != nil {
				return nil, fmt.Errorf("measurement_uid %q without a content_hash", *r.MeasurementUID)
			}
			continue
		}
		b, err := hex.DecodeString(*r.ContentHash)
		if err != nil || len(b) != len(out[i].Hash) || !ooniuid.Hash(b).Known() {
			return nil, fmt.Errorf("content_hash %q is not a content hash (30 hex digits, not all zero)", *r.ContentHash)
		}
		copy(out[i].Hash[:], b)
		if r.MeasurementUID != nil {
			out[i].UID = *r.MeasurementUID
		}
	}
	return out, nil
}

// Ledger is the content of ledger/B.json.
type Ledger struct {
	Bucket      string         `json:"bucket"`
	Fingerprint string         `json:"input_fingerprint"`
	Listing     string         `json:"input_listing,omitempty"` // the fingerprint of the bucket folder's listing alone (stamped.Meta.Listing)
	Source      string         `json:"input,omitempty"`         // the folder of bucket folders it was read from
	CounterBits int            `json:"counter_bits"`
	SHA1Offset  int            `json:"sha1_offset"`
	KeyTable    string         `json:"key_table,omitempty"` // of a keyed scheme
	NdxPolicy   string         `json:"ndx_policy"`
	Version     string         `json:"version"`
	Counts      stamped.Counts `json:"counts"`
	// UIDs is set when the bucket's files hold OONI's identity of each
	// measurement (--measurement-uid).
	UIDs bool `json:"measurement_uid,omitempty"`
	// Files are the size and SHA-256 of each of the bucket's files, by
	// name under the output: whoever builds on the bucket checks them.
	Files map[string]Digest `json:"files"`
	// Zone is the days the bucket's reports fall on: the committed
	// buckets a run's reports can reach are found from it, unread. nil
	// in entries older than it (such a bucket is read by every run).
	Zone     *stamped.Zone `json:"zone,omitempty"`
	Started  time.Time     `json:"started"`
	Finished time.Time     `json:"finished"`
}

// Dirs are the sub-folders of the output folder.
var Dirs = []string{"measurements", "reports", "dead-letters", "ledger"}

// rowGroup bounds the rows buffered before a row group is written.
const rowGroup = 128 << 10

// Sink writes under a folder or an s3:// prefix. It holds the output's lock
// from Open to Close: one writer per output.
type Sink struct {
	// Cleared is how many files Open removed from the temporary folder:
	// the leftovers of a run that died (killed, or interrupted twice).
	Cleared int

	st    store.Store
	lock  store.Lock
	owner bool // it holds the output's lock, not one of its own
	// cat is the catalogue as the sink last read it and brought up to
	// date (nil before the first read), dirty when it differs from the
	// file: Close writes it, when the sink holds the output's lock.
	cat      map[string]catEntry
	catDirty bool
	// known are the ledger entries the catalogue holds as they are, as
	// this sink, holding the output's lock, compared or wrote them.
	known map[string]bool
	// The files of the bucket folders as State last listed them, and
	// the stamps of those the listing or a Stat since gave.
	present map[string]bool
	stamps  map[string]string
}

var (
	_ sink.Rewriter        = (*Sink)(nil)
	_ sink.FailureRecorder = (*Sink)(nil)
	_ sink.InputRecorder   = (*Sink)(nil)
	_ sink.BucketWriter    = (*bucketWriter)(nil)
)

// LockName is the lock of an output: a file holding the PID of the run
// that has it (an flock), or on S3 an object naming its host and PID.
const LockName = ".lock"

// Open prepares the output st (a local folder or an s3:// prefix), takes
// its lock (a second writer fails at once with a *store.LockedError) and clears
// what runs that died left in its temporary folder.
func Open(ctx context.Context, st store.Store) (*Sink, error) { return OpenWait(ctx, st, 0, nil) }

// OpenWait is Open, which waits up to wait for another writer to release
// the output's lock (a *store.LockedError past it), telling waiting (if
// not nil) who holds it when the wait begins. Every writer of the output
// (a run, a load of a plan's shard) holds that one lock from its first
// read of the output to its last write.
func OpenWait(ctx context.Context, st store.Store, wait time.Duration, waiting func(*store.LockedError)) (*Sink, error) {
	return open(ctx, st, LockName, wait, waiting)
}

// OpenLocked opens st as Open does, under the lock lockName instead of
// the output's: a shard output a load reads takes a lock of its own, so
// that its map cannot run meanwhile.
func OpenLocked(ctx context.Context, st store.Store, lockName string) (*Sink, error) {
	return open(ctx, st, lockName, 0, nil)
}

func open(ctx context.Context, st store.Store, lockName string, wait time.Duration, waiting func(*store.LockedError)) (*Sink, error) {
	for _, d := range Dirs {
		if err := st.MkdirAll(ctx, d); err != nil {
			return nil, err
		}
	}
	named := func(le *store.LockedError) { le.Where, le.Verb = st.Where("."), "is writing to" }
	lock, err := store.LockWithin(ctx, st, lockName, wait, func(le *store.LockedError) {
		if waiting != nil {
			named(le)
			waiting(le)
		}
	})
	var le *store.LockedError
	if errors.As(err, &le) {
		named(le)
		le.Advice = "wait for it to finish, or write to another folder"
		if wait > 0 {
			le.Advice = fmt.Sprintf("it still held it after %v (--lock-wait); wait for it to finish, or write to another folder", wait)
		}
		return nil, le
	}
	if store.Failed(err) {
		return nil, err // it names the lock object and the failure
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", st.Where("."), err)
	}
	// Holding the output's lock, whatever is in the temporary folder was
	// left by a run that died. (Under a lock of its own, other writers may
	// be writing there.)
	whole := lockName == LockName
	s := &Sink{st: st, lock: lock, owner: whole}
	if whole {
		left, _ := st.ReadDir(ctx, store.TmpDir)
		if err := st.RemoveAll(ctx, store.TmpDir); err != nil {
			return nil, errors.Join(err, lock.Unlock())
		}
		s.Cleared = len(left)
	}
	return s, nil
}

// Holder returns the PID of the run that holds the lock of the output st,
// if any.
func Holder(ctx context.Context, st store.Store) (pid int, locked bool) {
	h, locked := st.Holder(ctx, LockName)
	return h.PID, locked
}

// Close removes the temporary folder and releases the lock. Every bucket
// is committed or aborted on its own before. It runs when a run stops,
// interrupted too, so nothing cancels it.
func (s *Sink) Close() error {
	if s.lock == nil {
		return nil
	}
	var err error
	if s.owner {
		if s.catDirty {
			err = writeCatalogue(context.Background(), s.st, s.cat)
		}
		err = errors.Join(err, s.st.RemoveAll(context.Background(), store.TmpDir))
	}
	err = errors.Join(err, s.lock.Unlock())
	s.lock = nil
	return err
}

// path is the name of a bucket's file in the output.
func (s *Sink) path(sub, bucket, ext string) string {
	return sub + "/" + bucket + ext
}

// ReadLedger reads a bucket's ledger entry.
func (s *Sink) ReadLedger(ctx context.Context, bucket string) (Ledger, error) {
	var l Ledger
	b, err := store.ReadFile(ctx, s.st, s.path("ledger", bucket, ".json"))
	if err != nil {
		return l, err
	}
	return l, json.Unmarshal(b, &l)
}

// Begin implements sink.Sink.
func (s *Sink) Begin(ctx context.Context, m stamped.Meta) (sink.BucketWriter, error) {
	day, err := time.Parse("2006-01-02", m.Bucket)
	if err != nil {
		return nil, fmt.Errorf("parquetfile: bucket %q: %w", m.Bucket, err)
	}
	w := &bucketWriter{s: s, m: m, days: int32(day.Unix() / 86400), started: time.Now().UTC()}
	opts := []parquet.WriterOption{
		parquet.CreatedBy("backfill", m.Version, ""),
		parquet.Compression(&fastSnappy{}),
		parquet.MaxRowsPerRowGroup(rowGroup),
		// Each page's bounds are in the column index and each row
		// group's in its statistics; the page headers' copy of them
		// (superseded by the column index) cost a pass over every value.
		parquet.DataPageStatistics(false),
		parquet.KeyValueMetadata("backfill.bucket", m.Bucket),
		parquet.KeyValueMetadata("backfill.counter_bits", strconv.Itoa(m.Scheme.CounterBits)),
		parquet.KeyValueMetadata("backfill.sha1_offset", strconv.Itoa(m.Scheme.SHA1Offset)),
		parquet.KeyValueMetadata("backfill.ndx_policy", m.NdxPolicy),
		parquet.KeyValueMetadata("backfill.version", m.Version),
		parquet.KeyValueMetadata("backfill.input_fingerprint", m.Fingerprint),
	}
	if m.Scheme.Keyed() {
		opts = append(opts, parquet.KeyValueMetadata("backfill.hash", ooid.HashSipHash),
			parquet.KeyValueMetadata("backfill.key_table", m.Scheme.Table))
	}
	if w.mf, err = s.st.Create(ctx, s.path("measurements", m.Bucket, ".parquet")); err != nil {
		w.Abort()
		return nil, err
	}
	if w.rf, err = s.st.Create(ctx, s.path("reports", m.Bucket, ".parquet")); err != nil {
		w.Abort()
		return nil, err
	}
	if w.df, err = s.st.Create(ctx, s.path("dead-letters", m.Bucket, ".jsonl")); err != nil {
		w.Abort()
		return nil, err
	}
	w.mdig, w.rdig, w.ddig = newDigester(w.mf), newDigester(w.rf), newDigester(w.df)
	w.mbuf, w.rbuf, w.dbuf = bufio.NewWriterSize(w.mdig, 1<<20), bufio.NewWriterSize(w.rdig, 256<<10), bufio.NewWriterSize(w.ddig, 64<<10)
	if m.UIDs {
		w.mwID = parquet.NewGenericWriter[MeasurementID](w.mbuf, opts...)
		w.rwID = parquet.NewGenericWriter[ReportIDs](w.rbuf, opts...)
	} else {
		w.mw = parquet.NewGenericWriter[Measurement](w.mbuf, opts...)
		w.rw = parquet.NewGenericWriter[Report](w.rbuf, opts...)
	}
	w.dl = json.NewEncoder(w.dbuf)
	w.dl.SetEscapeHTML(false)
	return w, nil
}

type bucketWriter struct {
	s                *Sink
	m                stamped.Meta
	days             int32
	started          time.Time
	mf, rf, df       store.Writer
	mdig, rdig, ddig *digester
	mbuf, rbuf, dbuf *bufio.Writer
	mw               *parquet.GenericWriter[Measurement]
	rw               *parquet.GenericWriter[Report]
	mwID             *parquet.GenericWriter[MeasurementID] // with Meta.UIDs, in place of mw
	rwID             *parquet.GenericWriter[ReportIDs]     // and of rw
	dl               *json.Encoder
	rows             []Measurement
	reports          []Report
	rowsID           []MeasurementID
	reportsID        []ReportIDs
	zone             []int32 // the days of the reports, as they come
	done             bool
}

// Report implements sink.BucketWriter: the report's row, and one row per
// measurement. Rows are held and written batch at a time: most reports
// have a few dozen measurements, and each write has a cost of its own.
func (w *bucketWriter) Report(r *stamped.Report) error {
	sha := ""
	if r.SHA1 != nil {
		sha = hex.EncodeToString(r.SHA1[:])
	}
	row := Report{
		Textname: r.Textname, TS: int64(r.ID.TS), TSSource: r.ID.Source.String(), CounterBase: int32(r.ID.CounterBase()),
		N: int64(r.N), BucketDate: w.days, Container: r.Container, Offset: r.Offset, Size: r.Size, SHA1: sha, RejectedBy: r.RejectedBy,
	}
	if d := stamped.Day(r.ID.TS); len(w.zone) == 0 || w.zone[len(w.zone)-1] != d {
		w.zone = append(w.zone, d)
	}
	if w.m.UIDs {
		return w.reportIDs(r, row)
	}
	if err := hold(w, &w.reports, row); err != nil {
		return err
	}
	if r.RejectedBy != "" {
		return nil
	}
	for ndx := uint32(0); ndx < r.N; ndx++ {
		if err := hold(w, &w.rows, Measurement{OOID: r.ID.ID(ndx).Int64(), Textname: r.Textname, Ndx: int32(ndx), BucketDate: w.days}); err != nil {
			return err
		}
	}
	return nil
}

// reportIDs is Report with --measurement-uid: the rows carry the
// measurements' identities.
func (w *bucketWriter) reportIDs(r *stamped.Report, row Report) error {
	if len(r.IDs) != int(r.N) {
		return fmt.Errorf("parquetfile: report %s has %d measurements and %d identities", r.Textname, r.N, len(r.IDs))
	}
	ids := identities(r.IDs)
	if err := hold(w, &w.reportsID, ReportIDs{Textname: row.Textname, TS: row.TS, TSSource: row.TSSource, CounterBase: row.CounterBase, N: row.N,
		BucketDate: row.BucketDate, Container: row.Container, Offset: row.Offset, Size: row.Size, SHA1: row.SHA1, RejectedBy: row.RejectedBy, IDs: ids}); err != nil {
		return err
	}
	if r.RejectedBy != "" {
		return nil
	}
	for ndx := uint32(0); ndx < r.N; ndx++ {
		row := MeasurementID{OOID: r.ID.ID(ndx).Int64(), Textname: r.Textname, Ndx: int32(ndx), BucketDate: w.days,
			MeasurementUID: ids[ndx].MeasurementUID, ContentHash: ids[ndx].ContentHash}
		if err := hold(w, &w.rowsID, row); err != nil {
			return err
		}
	}
	return nil
}

// batch is how many rows of each file a bucketWriter holds.
const batch = 4096

// hold adds row to held, and writes all held rows once held is a batch.
func hold[T any](w *bucketWriter, held *[]T, row T) error {
	*held = append(*held, row)
	if len(*held) < batch {
		return nil
	}
	return w.flush()
}

// flush writes the rows held.
func (w *bucketWriter) flush() error {
	if w.m.UIDs {
		if err := write(w.rwID, &w.reportsID); err != nil {
			return err
		}
		return write(w.mwID, &w.rowsID)
	}
	if err := write(w.rw, &w.reports); err != nil {
		return err
	}
	return write(w.mw, &w.rows)
}

// write writes the rows held to pw and empties held.
func write[T any](pw *parquet.GenericWriter[T], held *[]T) error {
	if _, err := pw.Write(*held); err != nil {
		return err
	}
	*held = (*held)[:0]
	return nil
}

// DeadLetter implements sink.BucketWriter.
func (w *bucketWriter) DeadLetter(d deadletter.Record) error { return w.dl.Encode(d.Classified()) }

// Commit implements sink.BucketWriter.
func (w *bucketWriter) Commit(ctx context.Context, c stamped.Counts) (stamped.Counts, error) {
	return c, w.commit(ctx, c)
}

func (w *bucketWriter) commit(ctx context.Context, c stamped.Counts) error {
	if err := ctx.Err(); err != nil {
		w.Abort()
		return err
	}
	// The lock is confirmed before the files are committed and again
	// before the ledger entry, the commit point: a run that was frozen
	// while another took its lock over commits nothing more.
	if err := w.s.lock.Held(ctx); err != nil {
		w.Abort()
		return err
	}
	if err := w.flush(); err != nil {
		w.Abort()
		return err
	}
	var cerr error
	if w.m.UIDs {
		cerr = errors.Join(w.mwID.Close(), w.rwID.Close())
	} else {
		cerr = errors.Join(w.mw.Close(), w.rw.Close())
	}
	if err := errors.Join(cerr, w.mbuf.Flush(), w.rbuf.Flush(), w.dbuf.Flush()); err != nil {
		w.Abort()
		return err
	}
	files := bucketFiles(w.m.Bucket)
	l := Ledger{Bucket: w.m.Bucket, Fingerprint: w.m.Fingerprint, Listing: w.m.Listing, Source: w.m.Source, CounterBits: w.m.Scheme.CounterBits, SHA1Offset: w.m.Scheme.SHA1Offset,
		KeyTable: w.m.Scheme.Table, NdxPolicy: w.m.NdxPolicy, Version: w.m.Version, UIDs: w.m.UIDs, Counts: c, Started: w.started, Finished: time.Now().UTC(),
		Files: map[string]Digest{files[0]: w.mdig.digest(), files[1]: w.rdig.digest(), files[2]: w.ddig.digest()}, Zone: zoneOf(w.zone)}
	lb, _ := json.MarshalIndent(l, "", "  ")
	// The bucket's measurements, which readers glob, leave first and come
	// back last, after the ledger entry: a measurements file is always
	// that of a committed bucket. Between the two the bucket is not whole
	// (State), and --resume redoes it; an old file never stands beside a
	// new ledger entry.
	st := w.s.st
	delete(w.s.known, w.m.Bucket) // its entry changes from here; catalogued once it has
	if err := st.Remove(ctx, files[0]); err != nil {
		w.Abort()
		return err
	}
	if err := st.Remove(ctx, w.s.path("ledger", w.m.Bucket, ".json")); err != nil {
		w.Abort()
		return err
	}
	for _, f := range []store.Writer{w.rf, w.df} {
		if err := f.Commit(); err != nil {
			w.Abort()
			return err
		}
	}
	if err := w.s.lock.Held(ctx); err != nil {
		w.Abort()
		return err
	}
	if err := store.WriteFile(ctx, st, w.s.path("ledger", w.m.Bucket, ".json"), append(lb, '\n')); err != nil {
		w.Abort()
		return err
	}
	if err := w.mf.Commit(); err != nil {
		w.Abort()
		return err
	}
	w.done = true
	w.s.catalogued(ctx, l)
	return st.Remove(ctx, w.s.path("ledger", w.m.Bucket, failedExt))
}

// Abort implements sink.BucketWriter.
func (w *bucketWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	var err error
	for _, f := range []store.Writer{w.mf, w.rf, w.df} {
		if f != nil {
			err = errors.Join(err, f.Abort())
		}
	}
	return err
}
