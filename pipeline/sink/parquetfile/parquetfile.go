// Package parquetfile is the embedded sink: per bucket, Parquet files of
// measurements and reports, a JSON-lines dead-letter archive and a ledger
// entry, each made visible by an atomic rename.
//
// Layout under the output folder, for bucket B:
//
//	measurements/B.parquet   ooid INT64, textname, ndx INT32, bucket_date DATE
//	reports/B.parquet        textname, ts, ts_source, counter_base, n, bucket_date,
//	                         container, offset, size, sha1, rejected_by: the
//	                         report manifest, collision losers included
//	dead-letters/B.jsonl     one deadletter.Record per line
//	ledger/B.json            Meta, Counts and times: the commit record
//
// The Parquet key-value metadata carries the scheme (backfill.counter_bits,
// backfill.sha1_offset; for a keyed scheme also backfill.hash and
// backfill.key_table), backfill.ndx_policy, backfill.version,
// backfill.bucket and backfill.input_fingerprint. The ooid column holds the
// same 64 bits as the Postgres bigint (two's complement).
//
// The ledger entry is written last: a bucket whose ledger entry is
// missing or stale is redone by --resume, and every file is replaced
// whole, so a run killed at any point leaves either the old or the new
// version of each file, never a part of one.
package parquetfile

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooid"
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

// Ledger is the content of ledger/B.json.
type Ledger struct {
	Bucket      string         `json:"bucket"`
	Fingerprint string         `json:"input_fingerprint"`
	CounterBits int            `json:"counter_bits"`
	SHA1Offset  int            `json:"sha1_offset"`
	KeyTable    string         `json:"key_table,omitempty"` // of a keyed scheme
	NdxPolicy   string         `json:"ndx_policy"`
	Version     string         `json:"version"`
	Counts      stamped.Counts `json:"counts"`
	Started     time.Time      `json:"started"`
	Finished    time.Time      `json:"finished"`
}

// Dirs are the sub-folders of the output folder.
var Dirs = []string{"measurements", "reports", "dead-letters", "ledger"}

// rowGroup bounds the rows buffered before a row group is written.
const rowGroup = 128 << 10

// Sink writes under a folder. It holds the folder's lock from Open to
// Close: one writer per output folder.
type Sink struct {
	dir  string
	lock *os.File
}

var (
	_ sink.Rewriter        = (*Sink)(nil)
	_ sink.FailureRecorder = (*Sink)(nil)
	_ sink.BucketWriter    = (*bucketWriter)(nil)
)

// LockName is the lock file of an output folder; it holds the PID of the
// run that has it.
const LockName = ".lock"

// LockedError is returned by Open when another process writes to the
// folder.
type LockedError struct {
	Dir string
	PID int // 0 when the holder did not write its PID yet
}

func (e *LockedError) Error() string {
	who := "another run"
	if e.PID > 0 {
		who = fmt.Sprintf("another run (pid %d)", e.PID)
	}
	return fmt.Sprintf("%s is writing to %s; wait for it to finish, or write to another folder", who, e.Dir)
}

// Open prepares dir, takes its lock (a second writer fails at once with a
// *LockedError) and clears what runs that died left in its temporary
// folder.
func Open(dir string) (*Sink, error) {
	for _, d := range Dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	lock, err := os.OpenFile(filepath.Join(dir, LockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid, _ := Holder(dir)
			return nil, &LockedError{Dir: dir, PID: pid}
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := errors.Join(lock.Truncate(0), writeAt0(lock, strconv.Itoa(os.Getpid())+"\n")); err != nil {
		lock.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	// Holding the lock, whatever is in .tmp was left by a run that died.
	if err := os.RemoveAll(filepath.Join(dir, ".tmp")); err != nil {
		lock.Close()
		return nil, err
	}
	return &Sink{dir: dir, lock: lock}, nil
}

func writeAt0(f *os.File, s string) error {
	_, err := f.WriteAt([]byte(s), 0)
	return err
}

// Holder returns the PID of the run that holds dir's lock, if any.
func Holder(dir string) (pid int, locked bool) {
	f, err := os.Open(filepath.Join(dir, LockName))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return 0, false
	}
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, _ = strconv.Atoi(strings.TrimSpace(string(b[:n])))
	return pid, true
}

// Close removes the temporary folder and releases the lock. Every bucket
// is committed or aborted on its own before.
func (s *Sink) Close() error {
	if s.lock == nil {
		return nil
	}
	err := os.RemoveAll(filepath.Join(s.dir, ".tmp"))
	err = errors.Join(err, s.lock.Close()) // closing releases the lock
	s.lock = nil
	return err
}

func (s *Sink) path(sub, bucket, ext string) string {
	return filepath.Join(s.dir, sub, bucket+ext)
}

// ReadLedger reads a bucket's ledger entry.
func (s *Sink) ReadLedger(bucket string) (Ledger, error) {
	var l Ledger
	b, err := os.ReadFile(s.path("ledger", bucket, ".json"))
	if err != nil {
		return l, err
	}
	return l, json.Unmarshal(b, &l)
}

// Begin implements sink.Sink.
func (s *Sink) Begin(_ context.Context, m stamped.Meta) (sink.BucketWriter, error) {
	day, err := time.Parse("2006-01-02", m.Bucket)
	if err != nil {
		return nil, fmt.Errorf("parquetfile: bucket %q: %w", m.Bucket, err)
	}
	if err := os.MkdirAll(filepath.Join(s.dir, ".tmp"), 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, ".tmp"), m.Bucket+"-")
	if err != nil {
		return nil, err
	}
	w := &bucketWriter{s: s, m: m, tmp: tmp, days: int32(day.Unix() / 86400), started: time.Now().UTC()}
	opts := []parquet.WriterOption{
		parquet.CreatedBy("backfill", m.Version, ""),
		parquet.Compression(&fastSnappy{}),
		parquet.MaxRowsPerRowGroup(rowGroup),
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
	if w.mf, err = w.create("measurements.parquet"); err != nil {
		w.Abort()
		return nil, err
	}
	if w.rf, err = w.create("reports.parquet"); err != nil {
		w.Abort()
		return nil, err
	}
	if w.df, err = w.create("dead-letters.jsonl"); err != nil {
		w.Abort()
		return nil, err
	}
	w.mbuf, w.rbuf, w.dbuf = bufio.NewWriterSize(w.mf, 1<<20), bufio.NewWriterSize(w.rf, 256<<10), bufio.NewWriterSize(w.df, 64<<10)
	w.mw = parquet.NewGenericWriter[Measurement](w.mbuf, opts...)
	w.rw = parquet.NewGenericWriter[Report](w.rbuf, opts...)
	w.dl = json.NewEncoder(w.dbuf)
	w.dl.SetEscapeHTML(false)
	return w, nil
}

type bucketWriter struct {
	s                *Sink
	m                stamped.Meta
	tmp              string
	days             int32
	started          time.Time
	mf, rf, df       *os.File
	mbuf, rbuf, dbuf *bufio.Writer
	mw               *parquet.GenericWriter[Measurement]
	rw               *parquet.GenericWriter[Report]
	dl               *json.Encoder
	rows             []Measurement
	done             bool
}

func (w *bucketWriter) create(name string) (*os.File, error) {
	return os.Create(filepath.Join(w.tmp, name))
}

// Report implements sink.BucketWriter: the report's row, and one row per
// measurement.
func (w *bucketWriter) Report(r *stamped.Report) error {
	sha := ""
	if r.SHA1 != nil {
		sha = hex.EncodeToString(r.SHA1[:])
	}
	_, err := w.rw.Write([]Report{{
		Textname: r.Textname, TS: int64(r.ID.TS), TSSource: r.ID.Source.String(), CounterBase: int32(r.ID.CounterBase()),
		N: int64(r.N), BucketDate: w.days, Container: r.Container, Offset: r.Offset, Size: r.Size, SHA1: sha, RejectedBy: r.RejectedBy,
	}})
	if err != nil || r.RejectedBy != "" {
		return err
	}
	const batch = 4096
	for lo := uint32(0); lo < r.N; lo += batch {
		hi := min(r.N, lo+batch)
		w.rows = w.rows[:0]
		for ndx := lo; ndx < hi; ndx++ {
			w.rows = append(w.rows, Measurement{OOID: r.ID.ID(ndx).Int64(), Textname: r.Textname, Ndx: int32(ndx), BucketDate: w.days})
		}
		if _, err := w.mw.Write(w.rows); err != nil {
			return err
		}
		if lo+batch < lo {
			break // the last batch below 2^32
		}
	}
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
	err := errors.Join(w.mw.Close(), w.rw.Close(), w.mbuf.Flush(), w.rbuf.Flush(), w.dbuf.Flush())
	for _, f := range []*os.File{w.mf, w.rf, w.df} {
		err = errors.Join(err, f.Sync(), f.Close())
	}
	if err != nil {
		w.Abort()
		return err
	}
	l := Ledger{Bucket: w.m.Bucket, Fingerprint: w.m.Fingerprint, CounterBits: w.m.Scheme.CounterBits, SHA1Offset: w.m.Scheme.SHA1Offset,
		KeyTable: w.m.Scheme.Table, NdxPolicy: w.m.NdxPolicy, Version: w.m.Version, Counts: c, Started: w.started, Finished: time.Now().UTC()}
	lb, _ := json.MarshalIndent(l, "", "  ")
	if err := writeSynced(filepath.Join(w.tmp, "ledger.json"), append(lb, '\n')); err != nil {
		w.Abort()
		return err
	}
	// Drop the old ledger entry first: from here until the new one lands,
	// --resume redoes the bucket.
	if err := os.Remove(w.s.path("ledger", w.m.Bucket, ".json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		w.Abort()
		return err
	}
	for _, mv := range [][2]string{
		{"measurements.parquet", w.s.path("measurements", w.m.Bucket, ".parquet")},
		{"reports.parquet", w.s.path("reports", w.m.Bucket, ".parquet")},
		{"dead-letters.jsonl", w.s.path("dead-letters", w.m.Bucket, ".jsonl")},
		{"ledger.json", w.s.path("ledger", w.m.Bucket, ".json")},
	} {
		if err := os.Rename(filepath.Join(w.tmp, mv[0]), mv[1]); err != nil {
			w.Abort()
			return err
		}
		if err := syncDir(filepath.Dir(mv[1])); err != nil {
			w.Abort()
			return err
		}
	}
	w.done = true
	os.Remove(w.s.path("ledger", w.m.Bucket, failedExt))
	return os.RemoveAll(w.tmp)
}

// Abort implements sink.BucketWriter.
func (w *bucketWriter) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	for _, f := range []*os.File{w.mf, w.rf, w.df} {
		if f != nil {
			f.Close()
		}
	}
	return os.RemoveAll(w.tmp)
}

func writeSynced(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}
