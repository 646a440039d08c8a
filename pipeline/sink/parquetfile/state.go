package parquetfile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/sink"
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
	present, stamps := map[string]bool{}, map[string]string{}
	for _, d := range Dirs[:3] {
		if err := list(ctx, s.st, d, present, stamps); err != nil {
			return nil, err
		}
	}
	s.present, s.stamps = present, stamps
	all := r.states()
	out := all[:0]
	for _, st := range all {
		if st.Status == stamped.StatusCommitted && !whole(present, st.Meta.Bucket) {
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

// list adds the files of folder d of st to present, and the stamps a
// listing gives for free to stamps (on S3; a local folder's names are
// listed alone, and a file's stamp is asked when it is needed).
func list(ctx context.Context, st store.Store, d string, present map[string]bool, stamps map[string]string) error {
	if nl, ok := st.(store.NameLister); ok {
		names, err := nl.ReadDirNames(ctx, d)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for _, n := range names {
			present[d+"/"+n] = true
		}
		return nil
	}
	ents, err := st.ReadDir(ctx, d)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			return err
		}
		present[d+"/"+e.Name()], stamps[d+"/"+e.Name()] = true, stampOf(info)
	}
	return nil
}

// Strays implements sink.StrayFinder: the files of the bucket folders,
// as the last State listed them and the sink's commits since left them,
// that no committed bucket holds (see the function Strays, which verify
// and status call).
func (s *Sink) Strays(ctx context.Context) ([]string, error) {
	if s.present == nil {
		if _, err := s.State(ctx); err != nil {
			return nil, err
		}
	}
	held := map[string]bool{}
	for b := range s.cat {
		for _, f := range bucketFiles(b) {
			held[f] = true
		}
	}
	var out []string
	for f := range s.present {
		if !held[f] {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out, nil
}

// whole reports whether every file of a committed bucket is among those
// present.
func whole(present map[string]bool, bucket string) bool {
	for _, f := range bucketFiles(bucket) {
		if !present[f] {
			return false
		}
	}
	return true
}

// stampOfFile is the stamp of a bucket's file as State listed it, asked
// of the store when the listing did not give it; "" when it is absent.
func (s *Sink) stampOfFile(ctx context.Context, f string) string {
	if s.present != nil && !s.present[f] {
		return ""
	}
	if st := s.stamps[f]; st != "" {
		return st
	}
	info, err := s.st.Stat(ctx, f)
	if err != nil {
		return ""
	}
	if s.stamps == nil {
		s.stamps = map[string]string{}
	}
	s.stamps[f] = stampOf(info)
	return s.stamps[f]
}

// Check implements sink.Zoned: a committed bucket kept as it is, and not
// read, is read and checked whole (CheckBucket) unless its ledger entry
// and its files have the stamps they had when they were last checked.
func (s *Sink) Check(ctx context.Context, bucket string) error {
	if s.unchanged(ctx, bucket) {
		return nil
	}
	if _, err := readChecked(ctx, s.st, bucket); err != nil {
		return err
	}
	s.checked(ctx, bucket)
	return nil
}

// unchanged reports whether the ledger entry of a committed bucket, as
// the catalogue holds it, and its files have the stamps they had when
// they were last checked.
func (s *Sink) unchanged(ctx context.Context, bucket string) bool {
	e, ok := s.cat[bucket]
	if !ok || e.Files == nil {
		return false
	}
	for _, f := range bucketFiles(bucket) {
		if st := s.stampOfFile(ctx, f); st == "" || st != e.Files[f] {
			return false
		}
	}
	return true
}

// checked records that the files of a committed bucket were checked as
// they are now.
func (s *Sink) checked(ctx context.Context, bucket string) {
	e, ok := s.cat[bucket]
	if !ok {
		return
	}
	files := map[string]string{}
	for _, f := range bucketFiles(bucket) {
		if files[f] = s.stampOfFile(ctx, f); files[f] == "" {
			return
		}
	}
	e.Files = files
	s.cat[bucket], s.catDirty = e, true
}

// ledger reads the output's ledger through the sink's catalogue, and
// keeps the catalogue brought up to date (written when the sink closes).
func (s *Sink) ledger(ctx context.Context) (ledgerRead, error) {
	if s.cat == nil {
		s.cat = readCatalogue(ctx, s.st)
	}
	var known func(string) bool
	if s.owner && s.known != nil {
		known = func(bucket string) bool { return s.known[bucket] }
	}
	r, err := readLedger(ctx, s.st, s.cat, known)
	if err != nil {
		return r, err
	}
	if s.owner {
		s.known = map[string]bool{}
		for b := range r.cat {
			s.known[b] = true
		}
	}
	if r.fresh > 0 || len(r.cat) != len(s.cat) {
		s.catDirty = true
	}
	s.cat = r.cat
	return r, nil
}

// Zones implements sink.Zoned: each committed bucket's zone, from the
// ledger as the catalogue holds it.
// Holding the output's lock, the sink reads it from the catalogue as the
// last State brought it up to date, and as its own commits since left it.
// A bucket one of whose files is not there is not committed (State).
func (s *Sink) Zones(ctx context.Context) (map[string]*stamped.Zone, error) {
	if s.cat == nil || s.present == nil || !s.owner {
		if _, err := s.State(ctx); err != nil {
			return nil, err
		}
	}
	out := make(map[string]*stamped.Zone, len(s.cat))
	for b, e := range s.cat {
		switch {
		case !whole(s.present, b):
		case e.Files == nil:
			// Read from its ledger entry since its files were last
			// checked: its zone is not trusted to leave the bucket out
			// until the bucket is read and checked whole (Manifest).
			out[b] = nil
		default:
			out[b] = e.Ledger.Zone
		}
	}
	return out, nil
}

// catalogued records in the catalogue the ledger entry l just written.
func (s *Sink) catalogued(ctx context.Context, l Ledger) {
	if s.cat == nil {
		return // read whole at the first State
	}
	s.catDirty = true
	e := catEntry{Ledger: l.catalogued(), Files: map[string]string{}}
	for _, f := range append(bucketFiles(l.Bucket), s.path("ledger", l.Bucket, ".json")) {
		info, err := s.st.Stat(ctx, f)
		if err != nil {
			delete(s.cat, l.Bucket) // read and checked again next time
			delete(s.known, l.Bucket)
			return
		}
		if strings.HasPrefix(f, "ledger/") {
			e.Stamp = stampOf(info)
		} else {
			e.Files[f] = stampOf(info)
			if s.present != nil {
				s.present[f], s.stamps[f] = true, e.Files[f]
			}
		}
	}
	s.cat[l.Bucket] = e
	if s.owner && s.known != nil {
		s.known[l.Bucket] = true
	}
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
	r, err := readLedger(ctx, st, readCatalogue(ctx, st), nil)
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

// SettlingName is the file of a settlement under way (sink.Journal), at
// the root of the output: it is there from a writer's first change to a
// committed bucket's verdicts to the end of the writer, when it has named
// the withdrawals it made, or after a writer was killed meanwhile.
const SettlingName = "settling.json"

// Pending implements sink.Journal.
func (s *Sink) Pending(ctx context.Context) (*sink.Settling, error) { return ReadSettling(ctx, s.st) }

// ReadSettling reads the journal of the output st (sink.Journal); nil
// when no settlement is under way.
func ReadSettling(ctx context.Context, st store.Store) (*sink.Settling, error) {
	b, err := store.ReadFile(ctx, st, SettlingName)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var j sink.Settling
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("%s: %w: a settlement a writer began and did not finish; its bucket's files are whole, but which of its verdicts changed is not known: run backfill verify, then remove it", st.Where(SettlingName), err)
	}
	return &j, nil
}

// Record implements sink.Journal.
func (s *Sink) Record(ctx context.Context, st *sink.Settling) error {
	if err := s.lock.Held(ctx); err != nil {
		return err
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return store.WriteFile(ctx, s.st, SettlingName, append(b, '\n'))
}

// KeptDir is the folder, at the root of the output, of the copies of
// the committed buckets a settlement under way rewrites (sink.Journal):
// a bucket's folders and ledger entry as at its root, the ledger entry
// copied last.
const KeptDir = ".settling"

// Keep implements sink.Journal.
func (s *Sink) Keep(ctx context.Context, bucket string) error {
	kept := s.st.Sub(KeptDir)
	ledger := "ledger/" + bucket + ".json"
	if _, err := kept.Stat(ctx, ledger); err == nil {
		return nil // a whole copy: the bucket as it was before the settlement's first change to it
	}
	if err := s.lock.Held(ctx); err != nil {
		return err
	}
	for _, f := range append(bucketFiles(bucket), ledger) {
		if err := copyFile(ctx, s.st, kept, f); err != nil {
			return fmt.Errorf("keeping a copy of bucket %s: %w", bucket, err)
		}
	}
	return nil
}

// Restore implements sink.Journal.
func (s *Sink) Restore(ctx context.Context) ([]string, error) {
	kept := s.st.Sub(KeptDir)
	ents, err := kept.ReadDir(ctx, "ledger")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	states, err := s.State(ctx)
	if err != nil {
		return nil, err
	}
	whole := stamped.Committed(states)
	var out []string
	for _, e := range ents {
		b, ok := strings.CutSuffix(e.Name(), ".json")
		if _, held := whole[b]; !ok || !isBucket(b) || held {
			continue
		}
		if _, err := readChecked(ctx, kept, b); err != nil {
			return out, fmt.Errorf("the copy of bucket %s in %s, which a writer that stopped left half rewritten: %w", b, kept.Where("."), err)
		}
		if err := s.lock.Held(ctx); err != nil {
			return out, err
		}
		// As a commit does: no ledger entry while the files change.
		ledger := "ledger/" + b + ".json"
		if err := s.st.Remove(ctx, ledger); err != nil {
			return out, err
		}
		for _, f := range append(bucketFiles(b), ledger) {
			if err := copyFile(ctx, kept, s.st, f); err != nil {
				return out, fmt.Errorf("restoring bucket %s: %w", b, err)
			}
		}
		out = append(out, b)
	}
	if len(out) > 0 {
		_, err = s.State(ctx) // what the output holds now
	}
	return out, err
}

// copyFile copies the file name of from to the same name in to, streamed.
func copyFile(ctx context.Context, from, to store.Store, name string) error {
	f, err := from.Open(ctx, name)
	if err != nil {
		return err
	}
	defer f.Close()
	w, err := to.Create(ctx, name)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, f); err != nil {
		return errors.Join(err, w.Abort())
	}
	return w.Commit()
}

// Clear implements sink.Journal.
func (s *Sink) Clear(ctx context.Context) error {
	if err := s.st.RemoveAll(ctx, KeptDir); err != nil {
		return err
	}
	return s.st.Remove(ctx, SettlingName)
}
