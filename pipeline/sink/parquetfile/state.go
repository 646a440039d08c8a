package parquetfile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"strings"
	"time"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// failure is the content of ledger/B.failed.json: a bucket whose last
// commit failed. A commit of the bucket removes it.
type failure struct {
	Bucket      string    `json:"bucket"`
	Fingerprint string    `json:"input_fingerprint"`
	Source      string    `json:"input,omitempty"`
	CounterBits int       `json:"counter_bits"`
	SHA1Offset  int       `json:"sha1_offset"`
	KeyTable    string    `json:"key_table,omitempty"`
	NdxPolicy   string    `json:"ndx_policy"`
	Error       string    `json:"error"`
	Failed      time.Time `json:"failed"`
}

const failedExt = ".failed.json"

// RecordFailure implements sink.FailureRecorder: it writes
// ledger/B.failed.json, unless the bucket is committed (its output is
// whole, and stays), or when the store cannot say whether it is (the
// commit may have reached it though its answer did not come back: a
// failure record beside a committed bucket would say what is not so).
func (s *Sink) RecordFailure(ctx context.Context, m stamped.Meta, err error) {
	if _, e := s.st.Stat(ctx, s.path("ledger", m.Bucket, ".json")); !errors.Is(e, fs.ErrNotExist) {
		return
	}
	b, _ := json.MarshalIndent(failure{Bucket: m.Bucket, Fingerprint: m.Fingerprint, Source: m.Source, CounterBits: m.Scheme.CounterBits,
		SHA1Offset: m.Scheme.SHA1Offset, KeyTable: m.Scheme.Table, NdxPolicy: m.NdxPolicy, Error: err.Error(), Failed: time.Now().UTC()}, "", "  ")
	_ = store.WriteFile(ctx, s.st, s.path("ledger", m.Bucket, failedExt), append(b, '\n')) // best effort: the run reports the failure itself
}

// State implements sink.Sink: ReadState, less the committed buckets one of
// whose files is missing (they are done again). It costs a listing of the
// ledger and of the bucket folders, and a read of each ledger entry the
// catalogue does not hold as it is.
func (s *Sink) State(ctx context.Context) ([]stamped.State, error) {
	r, err := s.ledger(ctx)
	if err != nil {
		return nil, err
	}
	listed := map[string]string{}
	for _, d := range Dirs[:3] {
		ents, err := s.st.ReadDir(ctx, d)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		for _, e := range ents {
			info, err := e.Info()
			if err != nil {
				return nil, err
			}
			listed[d+"/"+e.Name()] = stampOf(info)
		}
	}
	s.listed = listed
	all := r.states()
	out := all[:0]
	for _, st := range all {
		if st.Status == stamped.StatusCommitted && !whole(listed, st.Meta.Bucket) {
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

// whole reports whether every file of a committed bucket is among those
// listed.
func whole(listed map[string]string, bucket string) bool {
	for _, f := range bucketFiles(bucket) {
		if listed[f] == "" {
			return false
		}
	}
	return true
}

// Check implements sink.Zoned: a committed bucket kept as it is, and not
// read, is read and checked whole (CheckBucket) unless its ledger entry
// and its files have the stamps they had when they were last checked.
func (s *Sink) Check(ctx context.Context, bucket string) error {
	e, ok := s.cat[bucket]
	if ok && e.Files != nil && s.listed != nil {
		same := true
		for _, f := range bucketFiles(bucket) {
			same = same && s.listed[f] != "" && s.listed[f] == e.Files[f]
		}
		if same {
			return nil
		}
	}
	if _, err := readChecked(ctx, s.st, bucket); err != nil {
		return err
	}
	s.checked(bucket)
	return nil
}

// checked records that the files of a committed bucket were checked as
// State listed them.
func (s *Sink) checked(bucket string) {
	e, ok := s.cat[bucket]
	if !ok || s.listed == nil {
		return
	}
	e.Files = map[string]string{}
	for _, f := range bucketFiles(bucket) {
		e.Files[f] = s.listed[f]
	}
	s.cat[bucket], s.catDirty = e, true
}

// ledger reads the output's ledger through the sink's catalogue, and
// keeps the catalogue brought up to date (written when the sink closes).
func (s *Sink) ledger(ctx context.Context) (ledgerRead, error) {
	if s.cat == nil {
		s.cat = readCatalogue(ctx, s.st)
	}
	r, err := readLedger(ctx, s.st, s.cat)
	if err != nil {
		return r, err
	}
	if r.fresh > 0 || len(r.cat) != len(s.cat) {
		s.catDirty = true
	}
	s.cat = r.cat
	return r, nil
}

// Zones implements sink.Zoned: each committed bucket's zone, from the
// ledger as the catalogue holds it.
func (s *Sink) Zones(ctx context.Context) (map[string]*stamped.Zone, error) {
	r, err := s.ledger(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*stamped.Zone, len(r.committed))
	for _, l := range r.committed {
		out[l.Bucket] = l.Zone
	}
	return out, nil
}

// catalogued records in the catalogue the ledger entry l just written.
func (s *Sink) catalogued(ctx context.Context, l Ledger) {
	if s.cat == nil {
		return // read whole at the first State
	}
	s.catDirty = true
	e := catEntry{Ledger: l, Files: map[string]string{}}
	for _, f := range append(bucketFiles(l.Bucket), s.path("ledger", l.Bucket, ".json")) {
		info, err := s.st.Stat(ctx, f)
		if err != nil {
			delete(s.cat, l.Bucket) // read and checked again next time
			return
		}
		if strings.HasPrefix(f, "ledger/") {
			e.Stamp = stampOf(info)
		} else {
			e.Files[f] = stampOf(info)
			if s.listed != nil {
				s.listed[f] = e.Files[f]
			}
		}
	}
	s.cat[l.Bucket] = e
}

// ReadState reads the ledger of the output st (a folder or an s3://
// prefix): every committed bucket with its counts, and every bucket whose
// last commit failed, by bucket. It takes no lock: a run may be writing
// meanwhile (see Holder). It reads the catalogue, and the entries the
// catalogue does not hold as they are; it does not write it.
func ReadState(ctx context.Context, st store.Store) ([]stamped.State, error) {
	if !store.IsDir(ctx, st, "ledger") {
		return nil, errors.New(st.Where(".") + " is not an output folder of backfill run (it has no ledger/)")
	}
	return readState(ctx, st)
}

func readState(ctx context.Context, st store.Store) ([]stamped.State, error) {
	r, err := readLedger(ctx, st, readCatalogue(ctx, st))
	if err != nil {
		return nil, err
	}
	return r.states(), nil
}

// InputDeadLetters is the file of the input's own dead-letter records
// (its folders that were not read), at the root of the output: it is not a
// bucket's.
const InputDeadLetters = "input-dead-letters.jsonl"

// RecordInput implements sink.InputRecorder: it replaces the file
// InputDeadLetters whole (removes it when there is no record).
func (s *Sink) RecordInput(ctx context.Context, recs []deadletter.Record) error {
	if len(recs) == 0 {
		return s.st.Remove(ctx, InputDeadLetters)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, r := range recs {
		if err := enc.Encode(r.Classified()); err != nil {
			return err
		}
	}
	return store.WriteFile(ctx, s.st, InputDeadLetters, b.Bytes())
}

// ReadInputDeadLetters reads the input's records of the output st; none
// when it has none.
func ReadInputDeadLetters(ctx context.Context, st store.Store) ([]deadletter.Record, error) {
	f, err := st.Open(ctx, InputDeadLetters)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return readDeadLetters(f, st.Where(InputDeadLetters))
}
