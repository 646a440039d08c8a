package parquetfile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
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
// whose files is missing (they are done again).
func (s *Sink) State(ctx context.Context) ([]stamped.State, error) {
	all, err := readState(ctx, s.st)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, st := range all {
		if st.Status == stamped.StatusCommitted && !s.whole(ctx, st.Meta.Bucket) {
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

// whole reports whether every file of a committed bucket is there.
func (s *Sink) whole(ctx context.Context, bucket string) bool {
	for _, f := range bucketFiles(bucket) {
		if _, err := s.st.Stat(ctx, f); err != nil {
			return false
		}
	}
	return true
}

// ReadState reads the ledger of the output st (a folder or an s3://
// prefix): every committed bucket with its counts, and every bucket whose
// last commit failed, by bucket. It takes no lock: a run may be writing
// meanwhile (see Holder).
func ReadState(ctx context.Context, st store.Store) ([]stamped.State, error) {
	if !store.IsDir(ctx, st, "ledger") {
		return nil, errors.New(st.Where(".") + " is not an output folder of backfill run (it has no ledger/)")
	}
	return readState(ctx, st)
}

func readState(ctx context.Context, st store.Store) ([]stamped.State, error) {
	ents, err := st.ReadDir(ctx, "ledger")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // an S3 output with nothing committed yet
	}
	if err != nil {
		return nil, err
	}
	var out []stamped.State
	for _, e := range ents {
		name := e.Name()
		bucket, ok := strings.CutSuffix(name, failedExt)
		if !ok {
			bucket, ok = strings.CutSuffix(name, ".json")
		}
		if !ok || !isBucket(bucket) {
			return nil, fmt.Errorf("%s is not a ledger entry (a bucket's is YYYY-MM-DD.json): move it out of the ledger", st.Where("ledger/"+name))
		}
		data, err := store.ReadFile(ctx, st, "ledger/"+name)
		if err != nil {
			return nil, err
		}
		switch {
		case strings.HasSuffix(name, failedExt):
			var f failure
			if err := json.Unmarshal(data, &f); err != nil {
				return nil, errors.New("ledger/" + name + ": " + err.Error())
			}
			if f.Bucket != bucket {
				return nil, fmt.Errorf("%s names bucket %q, not %s", st.Where("ledger/"+name), f.Bucket, bucket)
			}
			l := Ledger{Bucket: f.Bucket, Fingerprint: f.Fingerprint, Source: f.Source, CounterBits: f.CounterBits, SHA1Offset: f.SHA1Offset, KeyTable: f.KeyTable, NdxPolicy: f.NdxPolicy}
			out = append(out, stamped.State{Meta: l.meta(), Status: stamped.StatusFailed, Error: f.Error, Finished: f.Failed, Counts: stamped.NewCounts()})
		case strings.HasSuffix(name, ".json"):
			var l Ledger
			if err := json.Unmarshal(data, &l); err != nil {
				return nil, errors.New("ledger/" + name + ": " + err.Error())
			}
			if l.Bucket != bucket {
				return nil, fmt.Errorf("%s names bucket %q, not %s", st.Where("ledger/"+name), l.Bucket, bucket)
			}
			out = append(out, stamped.State{Meta: l.meta(), Status: stamped.StatusCommitted, Counts: l.Counts.Clone(), Finished: l.Finished})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Meta.Bucket < out[j].Meta.Bucket })
	return out, nil
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
