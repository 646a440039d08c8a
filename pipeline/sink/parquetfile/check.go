package parquetfile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooniuid"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Digest is what a ledger entry records of one of its bucket's files:
// whoever builds on the committed bucket compares the file with it first.
type Digest struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// digester counts and hashes what is written through it.
type digester struct {
	w io.Writer
	h hash.Hash
	n int64
}

func newDigester(w io.Writer) *digester { return &digester{w: w, h: sha256.New()} }

func (d *digester) Write(p []byte) (int, error) {
	n, err := d.w.Write(p)
	d.h.Write(p[:n])
	d.n += int64(n)
	return n, err
}

func (d *digester) digest() Digest {
	return Digest{Size: d.n, SHA256: hex.EncodeToString(d.h.Sum(nil))}
}

// bucketFiles are a bucket's files, by the names a ledger entry records
// their digests under.
func bucketFiles(bucket string) []string {
	return []string{"measurements/" + bucket + ".parquet", "reports/" + bucket + ".parquet", "dead-letters/" + bucket + ".jsonl"}
}

// MismatchError is a committed bucket whose files or counts are not what
// its ledger entry recorded: changed, replaced or edited after the commit.
// Nothing is built on it; running the bucket again writes it anew.
type MismatchError struct {
	Bucket, File, What string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("bucket %s: %s %s: it changed after the bucket was committed, and nothing is built on it; write the bucket again from its input (backfill run without --resume, naming the bucket)", e.Bucket, e.File, e.What)
}

// checked is a committed bucket read whole and checked against its
// ledger entry.
type checked struct {
	ledger  Ledger
	reports []Report
	ids     [][]ooniuid.ID // of each report, with ledger.UIDs
	dead    []deadletter.Record
}

// CheckBucket reads the committed bucket of the output st and checks it
// against its ledger entry: each file's size and SHA-256, and the counts
// the ledger records against those of its report manifest and dead
// letters. A difference is a *MismatchError naming the file.
func CheckBucket(ctx context.Context, st store.Store, bucket string) error {
	_, err := readChecked(ctx, st, bucket)
	return err
}

// ReadIdentities reads the report manifest of a committed bucket of a
// run with --measurement-uid, checked as CheckBucket checks it: its
// ledger entry, its reports, and the identities of each report's
// measurements (by ndx).
func ReadIdentities(ctx context.Context, st store.Store, bucket string) (Ledger, []Report, [][]ooniuid.ID, error) {
	c, err := readChecked(ctx, st, bucket)
	if err == nil && !c.ledger.UIDs {
		err = fmt.Errorf("bucket %s holds no identities of its measurements: run it again with --measurement-uid", bucket)
	}
	return c.ledger, c.reports, c.ids, err
}

func readChecked(ctx context.Context, st store.Store, bucket string) (checked, error) {
	var c checked
	lb, err := store.ReadFile(ctx, st, "ledger/"+bucket+".json")
	if err != nil {
		return c, fmt.Errorf("bucket %s: ledger: %w", bucket, err)
	}
	if c.ledger, err = parseLedger(lb); err != nil {
		return c, fmt.Errorf("bucket %s: ledger/%s.json: %w", bucket, bucket, err)
	}
	ledgerFile := "ledger/" + bucket + ".json"
	if c.ledger.Bucket != bucket {
		return c, &MismatchError{bucket, ledgerFile, fmt.Sprintf("names bucket %q", c.ledger.Bucket)}
	}
	if len(c.ledger.Files) == 0 {
		return c, &MismatchError{bucket, ledgerFile, "records no digest of the bucket's files (an older version wrote it, or it was edited)"}
	}
	var data [3][]byte
	for i, f := range bucketFiles(bucket) {
		want, ok := c.ledger.Files[f]
		if !ok {
			return c, &MismatchError{bucket, ledgerFile, "records no digest of " + f}
		}
		var got Digest
		if i == 0 { // the measurements: streamed, never whole in memory
			got, err = DigestFile(ctx, st, f)
		} else {
			data[i], err = store.ReadFile(ctx, st, f)
			sum := sha256.Sum256(data[i])
			got = Digest{Size: int64(len(data[i])), SHA256: hex.EncodeToString(sum[:])}
		}
		if err != nil {
			return c, fmt.Errorf("bucket %s: %w", bucket, err)
		}
		if got != want {
			return c, &MismatchError{bucket, st.Where(f), fmt.Sprintf("is not the file its ledger entry recorded (%d bytes, sha256 %s; recorded %d bytes, sha256 %s)", got.Size, short(got.SHA256), want.Size, short(want.SHA256))}
		}
	}
	if c.ledger.UIDs {
		rows, err := parseRows[ReportIDs](data[1], st.Where(bucketFiles(bucket)[1]))
		if err != nil {
			return c, err
		}
		c.reports, c.ids = make([]Report, len(rows)), make([][]ooniuid.ID, len(rows))
		for i, r := range rows {
			c.reports[i] = Report{Textname: r.Textname, TS: r.TS, TSSource: r.TSSource, CounterBase: r.CounterBase, N: r.N, BucketDate: r.BucketDate,
				Container: r.Container, Offset: r.Offset, Size: r.Size, SHA1: r.SHA1, RejectedBy: r.RejectedBy}
			if c.ids[i], err = ooniIDs(r.IDs); err != nil || int64(len(c.ids[i])) != r.N {
				return c, &MismatchError{bucket, st.Where(bucketFiles(bucket)[1]), fmt.Sprintf("report %s lists %d identities for %d measurements (%v)", r.Textname, len(r.IDs), r.N, err)}
			}
		}
	} else if c.reports, err = parseRows[Report](data[1], st.Where(bucketFiles(bucket)[1])); err != nil {
		return c, err
	}
	if c.dead, err = readDeadLetters(readerFile{bytes.NewReader(data[2])}, st.Where(bucketFiles(bucket)[2])); err != nil {
		return c, err
	}
	if z := c.ledger.Zone; z != nil {
		days := make([]int32, len(c.reports))
		for i, r := range c.reports {
			days[i] = stamped.Day(uint32(r.TS))
		}
		if got := zoneOf(days); !slices.Equal(got.Days, z.Days) {
			return c, &MismatchError{bucket, st.Where(ledgerFile), fmt.Sprintf("says its reports fall on days %v where they fall on %v", z.Days, got.Days)}
		}
	}
	if got := recount(c.reports, c.dead); !sameCounts(got, c.ledger.Counts) {
		return c, &MismatchError{bucket, st.Where(ledgerFile), fmt.Sprintf("counts %s where its files hold %s", countsText(c.ledger.Counts), countsText(got))}
	}
	return c, nil
}

// zoneOf is the zone of the days of a bucket's reports, as a ledger
// entry records it.
func zoneOf(days []int32) *stamped.Zone {
	z := stamped.NewZone(days)
	return &z
}

func short(h string) string { return h[:min(len(h), 12)] }

// DigestFile is the size and SHA-256 of the file name of st, hashed as
// it streams.
func DigestFile(ctx context.Context, st store.Store, name string) (Digest, error) {
	f, err := st.Open(ctx, name)
	if err != nil {
		return Digest{}, err
	}
	defer f.Close()
	d := newDigester(io.Discard)
	if _, err := io.Copy(d, f); err != nil {
		return Digest{}, fmt.Errorf("%s: %w", st.Where(name), err)
	}
	return d.digest(), nil
}

// recount counts a bucket from its report manifest and dead letters, as
// a run counts it: the reports that keep their IDs, their measurements,
// and every record by reason.
func recount(reports []Report, dead []deadletter.Record) stamped.Counts {
	c := stamped.NewCounts()
	for _, r := range reports {
		if r.RejectedBy == "" {
			c.Reports++
			c.Measurements += r.N
		}
	}
	for _, d := range dead {
		c.Add(d)
	}
	return c
}

func sameCounts(a, b stamped.Counts) bool {
	return a.Reports == b.Reports && a.Measurements == b.Measurements &&
		maps.Equal(nonZero(a.DeadLetters), nonZero(b.DeadLetters)) && maps.Equal(nonZero(a.Rejects), nonZero(b.Rejects))
}

func nonZero(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func countsText(c stamped.Counts) string {
	rejects, notices := c.Totals()
	return fmt.Sprintf("%d reports, %d measurements, %d rejects, %d notices", c.Reports, c.Measurements, rejects, notices)
}

// readerFile is an fs.File over bytes already read.
type readerFile struct{ *bytes.Reader }

func (readerFile) Stat() (fs.FileInfo, error) { return nil, errors.New("no stat") }
func (readerFile) Close() error               { return nil }

// Strays returns the files under the output st's bucket folders and
// ledger that no committed bucket holds: a bucket's files whose ledger
// entry is missing (a run stopped between the two, or files put there),
// or any other name. Readers that glob a folder see them; verify names
// them.
func Strays(ctx context.Context, st store.Store) ([]string, error) {
	s, err := Survey(ctx, st)
	return s.Strays, err
}

// Surveyed is what the folders of an output hold beside its ledger.
type Surveyed struct {
	States []stamped.State
	// Strays are the files no committed bucket holds.
	Strays []string
	// Absent are, by committed bucket, those of its files that are not
	// there (a run stopped inside the bucket's commit, or a file removed):
	// run --resume writes such a bucket again.
	Absent map[string][]string
}

// Survey reads the ledger of the output st and lists its folders.
func Survey(ctx context.Context, st store.Store) (Surveyed, error) {
	var out Surveyed
	states, err := readState(ctx, st)
	if err != nil {
		return out, err
	}
	out.States, out.Absent = states, map[string][]string{}
	held := map[string]bool{}
	for _, s := range states {
		b := s.Meta.Bucket
		if s.Status == stamped.StatusCommitted {
			held["ledger/"+b+".json"] = true
			for _, f := range bucketFiles(b) {
				held[f] = true
			}
		} else {
			held["ledger/"+b+failedExt] = true
		}
	}
	present := map[string]bool{}
	for _, d := range Dirs {
		ents, err := st.ReadDir(ctx, d)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return out, err
		}
		for _, e := range ents {
			name := d + "/" + e.Name()
			present[name] = true
			if !held[name] {
				out.Strays = append(out.Strays, name)
			}
		}
	}
	sort.Strings(out.Strays)
	for _, s := range states {
		if s.Status != stamped.StatusCommitted {
			continue
		}
		for _, f := range bucketFiles(s.Meta.Bucket) {
			if !present[f] {
				out.Absent[s.Meta.Bucket] = append(out.Absent[s.Meta.Bucket], f)
			}
		}
	}
	return out, nil
}

// AbsentError is a committed bucket one of whose files is not there.
type AbsentError struct {
	Bucket string
	Files  []string // as shown to a person
}

func (e *AbsentError) Error() string {
	return fmt.Sprintf("bucket %s is committed in its ledger, but %s %s not there (a run stopped inside the bucket's commit, or a file was removed): run --resume writes the bucket again",
		e.Bucket, strings.Join(e.Files, " and "), map[bool]string{true: "is", false: "are"}[len(e.Files) == 1])
}

// parseLedger reads a ledger entry.
func parseLedger(b []byte) (Ledger, error) {
	var l Ledger
	err := json.Unmarshal(b, &l)
	return l, err
}

// parseRows reads the rows of a Parquet file held in memory.
func parseRows[T any](data []byte, where string) ([]T, error) {
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	r := parquet.NewGenericReader[T](pf)
	defer r.Close()
	rows := make([]T, pf.NumRows())
	n, err := r.Read(rows)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if n != len(rows) {
		return nil, fmt.Errorf("%s: %d of %d rows read", where, n, len(rows))
	}
	return rows, nil
}
