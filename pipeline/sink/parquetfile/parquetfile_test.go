package parquetfile_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

const bucket = "2017-06-01"

var textnames = []string{
	"2017-06-01/20170601T101010Z-IT-AS3269-web_connectivity-20170601T101011Z_AS3269_aaaa-0.2.0-probe.json",
	"2017-06-01/20170601T101010Z-IT-AS3269-web_connectivity-20170601T101011Z_AS3269_bbbb-0.2.0-probe.json",
	"2017-06-01/20390713T211336Z-IT-AS3269-web_connectivity-20390713T211337Z_AS3269_cccc-0.2.0-probe.json",
}

func meta() stamped.Meta {
	return stamped.Meta{Bucket: bucket, Fingerprint: "fp", Scheme: ooid.DefaultScheme, NdxPolicy: "blobs", Version: "test"}
}

func reports(t *testing.T) []stamped.Report {
	t.Helper()
	var out []stamped.Report
	for i, tn := range textnames {
		id, err := ooid.DefaultScheme.Report(tn)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, stamped.Report{Textname: tn, Container: bucket + "/web_connectivity.0.tar.lz4", Offset: int64(512 * i), Size: 100, ID: id, N: uint32(3 + i)})
	}
	return out
}

// commit writes rs and records as a run does, and commits.
func commit(t *testing.T, s *parquetfile.Sink, rs []stamped.Report, records []deadletter.Record) stamped.Counts {
	t.Helper()
	w, err := s.Begin(context.Background(), meta())
	if err != nil {
		t.Fatal(err)
	}
	c := stamped.NewCounts()
	for i := range rs {
		if err := w.Report(&rs[i]); err != nil {
			t.Fatal(err)
		}
		if rs[i].RejectedBy == "" {
			c.Reports++
			c.Measurements += int64(rs[i].N)
		}
	}
	for _, d := range records {
		c.Add(d)
		if err := w.DeadLetter(d); err != nil {
			t.Fatal(err)
		}
	}
	c, err = w.Commit(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func open(t *testing.T, dir string) *parquetfile.Sink {
	t.Helper()
	s, err := parquetfile.Open(t.Context(), store.Local(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A committed bucket reads back: one row per measurement with the ID
// pipeline/ooid gives it (a 2039 one negative), the report manifest, the
// records with their kinds, the ledger's counts.
func TestSink_Commit(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	rs := reports(t)
	empty := deadletter.Record{Bucket: bucket, File: rs[0].Container, Textname: "x", Reason: deadletter.EmptyReport, Message: "m"}
	bad := deadletter.Record{Bucket: bucket, File: rs[0].Container, Textname: "y", Reason: deadletter.BadTextname, Message: "m"}
	c := commit(t, s, rs, []deadletter.Record{empty, bad})
	ms, err := parquetfile.ReadMeasurements(t.Context(), store.Local(dir), "measurements/"+bucket+".parquet")
	if err != nil {
		t.Fatal(err)
	}
	i, negative := 0, 0
	for _, r := range rs {
		for ndx := range r.N {
			m := ms[i]
			if m.Textname != r.Textname || m.Ndx != int32(ndx) || m.OOID != r.ID.ID(ndx).Int64() {
				t.Fatalf("row %d = %+v, want %s #%d %016x", i, m, r.Textname, ndx, uint64(r.ID.ID(ndx)))
			}
			if m.OOID < 0 {
				negative++
			}
			i++
		}
	}
	if i != len(ms) || negative != int(rs[2].N) {
		t.Errorf("%d rows, %d negative; want %d, %d", len(ms), negative, i, rs[2].N)
	}
	got, err := parquetfile.ReadReports(t.Context(), store.Local(dir), "reports/"+bucket+".parquet")
	if err != nil || len(got) != len(rs) || got[1].Textname != rs[1].Textname || got[1].N != int64(rs[1].N) || got[1].CounterBase != int32(rs[1].ID.CounterBase()) {
		t.Errorf("reports %+v, %v", got, err)
	}
	ds, err := parquetfile.ReadDeadLetters(t.Context(), store.Local(dir), "dead-letters/"+bucket+".jsonl")
	if err != nil || len(ds) != 2 || ds[0].Kind != deadletter.Notice || ds[1].Kind != deadletter.Reject {
		t.Errorf("records %+v, %v; want a notice and a reject", ds, err)
	}
	l, err := s.ReadLedger(t.Context(), bucket)
	if err != nil || l.Counts.Measurements != c.Measurements || l.Counts.Rejects[deadletter.BadTextname] != 1 || l.Counts.DeadLetters[deadletter.EmptyReport] != 1 {
		t.Errorf("ledger %+v, %v", l, err)
	}
	states, err := s.State(context.Background())
	if err != nil || len(states) != 1 || states[0].Status != stamped.StatusCommitted || states[0].Meta != meta() {
		t.Errorf("State = %+v, %v", states, err)
	}
	// A file gone: the bucket is not committed any more.
	os.Remove(filepath.Join(dir, "reports", bucket+".parquet"))
	if states, _ := s.State(context.Background()); len(states) != 0 {
		t.Errorf("State with a file gone = %+v", states)
	}
}

// An aborted bucket leaves nothing; a failure is recorded until the
// bucket commits.
func TestSink_AbortAndFailure(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	rs := reports(t)
	w, err := s.Begin(context.Background(), meta())
	if err != nil {
		t.Fatal(err)
	}
	testutil.Check(t, w.Report(&rs[0]))
	w.Abort()
	for _, sub := range parquetfile.Dirs {
		if ents, _ := os.ReadDir(filepath.Join(dir, sub)); len(ents) != 0 {
			t.Errorf("%s holds %d files after Abort", sub, len(ents))
		}
	}
	s.RecordFailure(t.Context(), meta(), errors.New("disk full"))
	states, _ := parquetfile.ReadState(t.Context(), store.Local(dir))
	if len(states) != 1 || states[0].Status != stamped.StatusFailed || states[0].Error != "disk full" {
		t.Errorf("after a failure: %+v", states)
	}
	commit(t, s, rs, nil)
	states, _ = parquetfile.ReadState(t.Context(), store.Local(dir))
	if len(states) != 1 || states[0].Status != stamped.StatusCommitted {
		t.Errorf("after the commit: %+v", states)
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, ".tmp")); !os.IsNotExist(err) {
		t.Errorf(".tmp left after Close: %v", err)
	}
}

// Reassign writes the files a run with the new verdicts writes, and
// back.
func TestSink_Reassign(t *testing.T) {
	rs := reports(t)
	files := func(dir string) map[string][]byte {
		out := map[string][]byte{}
		for _, sub := range []string{"measurements/" + bucket + ".parquet", "reports/" + bucket + ".parquet", "dead-letters/" + bucket + ".jsonl"} {
			b, err := os.ReadFile(filepath.Join(dir, sub))
			if err != nil {
				t.Fatal(err)
			}
			out[sub] = b
		}
		return out
	}
	// What a run commits with report 1 rejected.
	direct := t.TempDir()
	lost := append([]stamped.Report(nil), rs...)
	lost[1].RejectedBy = rs[0].Textname
	commit(t, open(t, direct), lost, []deadletter.Record{collisions.Record(bucket, &lost[1], "msg")})

	dir := t.TempDir()
	s := open(t, dir)
	commit(t, s, rs, nil)
	before := files(dir)
	if err := s.Reassign(context.Background(), ooid.DefaultScheme, bucket, []stamped.Verdict{{Textname: rs[1].Textname, RejectedBy: rs[0].Textname, Message: "msg"}}); err != nil {
		t.Fatal(err)
	}
	for name, b := range files(direct) {
		if !bytes.Equal(files(dir)[name], b) {
			t.Errorf("reassigned %s differs from a run's", name)
		}
	}
	l, _ := s.ReadLedger(t.Context(), bucket)
	if l.Counts.Reports != 2 || l.Counts.Rejects[deadletter.Collision] != 1 {
		t.Errorf("ledger after the verdict: %+v", l.Counts)
	}
	if err := s.Reassign(context.Background(), ooid.DefaultScheme, bucket, []stamped.Verdict{{Textname: rs[1].Textname}}); err != nil {
		t.Fatal(err)
	}
	for name, b := range before {
		if !bytes.Equal(files(dir)[name], b) {
			t.Errorf("%s differs after the verdict is taken back", name)
		}
	}
}

// One writer per folder: a second Open fails at once, naming the holder.
func TestSink_Lock(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	_, err := parquetfile.Open(t.Context(), store.Local(dir))
	var le *store.LockedError
	if !errors.As(err, &le) || le.Holder.PID != os.Getpid() {
		t.Fatalf("second Open: %v", err)
	}
	s.Close()
	s2, err := parquetfile.Open(t.Context(), store.Local(dir))
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	s2.Close()
}
