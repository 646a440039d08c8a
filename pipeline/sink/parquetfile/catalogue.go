package parquetfile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// CatalogueName is the output's catalogue, at its root: a copy of every
// ledger entry, each beside the stamp its file had when it was read (git's
// index keeps a file's size, times and inode so), and the stamps of the
// bucket's files when they were last checked against it. Reading the ledger
// costs a listing of ledger/ and this one file: an entry is read again
// only when its file's stamp is not the one catalogued (a run that died
// before it wrote the catalogue, an entry copied or edited by hand), and
// a bucket kept as it is is read and checked whole only when the stamp of
// its entry or of one of its files changed (Check). The
// ledger stays the commit point; the catalogue is only ever a cache of it,
// written when a writer closes the output, and a catalogue that cannot
// be read is rebuilt from the ledger.
const CatalogueName = "catalogue.json"

// catalogueFormat is the version of the catalogue's layout; a catalogue
// of another is rebuilt.
const catalogueFormat = 2

type catalogue struct {
	Format  int        `json:"format"`
	Entries []catEntry `json:"entries"`
}

type catEntry struct {
	Stamp  string `json:"stamp"`
	Ledger Ledger `json:"ledger"`
	// Files are the stamps of the bucket's files when they were last
	// checked against the entry (written, or read whole); none when they
	// have not been since the entry was read.
	Files map[string]string `json:"files,omitempty"`
	// Sum is the SHA-256 of the rest of the entry, as written: an entry
	// changed since (edited by hand, damaged) is read again from its
	// ledger entry, and its bucket checked whole before its zone is used.
	Sum string `json:"sum"`
}

// sum is the digest of the entry but its Sum.
func (e catEntry) sum() string {
	e.Sum = ""
	b, err := json.Marshal(e)
	if err != nil {
		return "" // never matches a written one
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// stampOf is store.Stamp: every write of a ledger entry is a new file
// renamed into place.
func stampOf(info fs.FileInfo) string { return store.Stamp(info) }

// catalogued is the ledger entry as the catalogue keeps it: without the
// digests of the bucket's files (whoever checks them reads the entry
// itself) and the time it started.
func (l Ledger) catalogued() Ledger {
	l.Files, l.Started = nil, time.Time{}
	return l
}

// readCatalogue reads the catalogue of st, by bucket; an empty one when
// there is none, or when it cannot be read (it is rebuilt).
func readCatalogue(ctx context.Context, st store.Store) map[string]catEntry {
	out := map[string]catEntry{}
	b, err := store.ReadFile(ctx, st, CatalogueName)
	if err != nil {
		return out
	}
	var c catalogue
	if json.Unmarshal(b, &c) != nil || c.Format != catalogueFormat {
		return out
	}
	for _, e := range c.Entries {
		if isBucket(e.Ledger.Bucket) && e.Stamp != "" && e.Sum == e.sum() {
			out[e.Ledger.Bucket] = e
		}
	}
	return out
}

// writeCatalogue replaces the catalogue of st with cat.
func writeCatalogue(ctx context.Context, st store.Store, cat map[string]catEntry) error {
	c := catalogue{Format: catalogueFormat, Entries: make([]catEntry, 0, len(cat))}
	for _, e := range cat {
		e.Sum = e.sum()
		c.Entries = append(c.Entries, e)
	}
	sort.Slice(c.Entries, func(i, j int) bool { return c.Entries[i].Ledger.Bucket < c.Entries[j].Ledger.Bucket })
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return store.WriteFile(ctx, st, CatalogueName, append(b, '\n'))
}

// ledgerRead is the ledger of an output as readLedger finds it.
type ledgerRead struct {
	committed []Ledger  // by bucket
	failed    []failure // by bucket
	// cat is the catalogue brought up to date: the committed entries
	// with their stamps; fresh is how many entries had to be read.
	cat   map[string]catEntry
	fresh int
}

// readLedger lists the ledger of st and reads each entry whose stamp is
// not the one cat holds (cat may be nil: every entry is read). An entry
// known holds in cat as it is (the sink holding the output's lock wrote
// it, or compared its stamp, before): its stamp is not asked again.
func readLedger(ctx context.Context, st store.Store, cat map[string]catEntry, known func(bucket string) bool) (ledgerRead, error) {
	r := ledgerRead{cat: map[string]catEntry{}}
	var names []string
	infos := map[string]fs.FileInfo{}
	var err error
	if nl, ok := st.(store.NameLister); ok && known != nil {
		// The entries are known from a listing before: their names
		// alone, and the stamps of those not known.
		names, err = nl.ReadDirNames(ctx, "ledger")
	} else {
		var ents []fs.DirEntry
		ents, err = st.ReadDir(ctx, "ledger")
		for _, e := range ents {
			names = append(names, e.Name())
			if infos[e.Name()], err = e.Info(); err != nil {
				return r, err
			}
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil // an S3 output with nothing committed yet
	}
	if err != nil {
		return r, err
	}
	for _, name := range names {
		bucket, ok := strings.CutSuffix(name, failedExt)
		if !ok {
			bucket, ok = strings.CutSuffix(name, ".json")
		}
		if !ok || !isBucket(bucket) {
			return r, fmt.Errorf("%s is not a ledger entry (a bucket's is YYYY-MM-DD.json): move it out of the ledger", st.Where("ledger/"+name))
		}
		if strings.HasSuffix(name, failedExt) {
			data, err := store.ReadFile(ctx, st, "ledger/"+name)
			if err != nil {
				return r, err
			}
			var f failure
			if err := json.Unmarshal(data, &f); err != nil {
				return r, errors.New("ledger/" + name + ": " + err.Error())
			}
			if f.Bucket != bucket {
				return r, fmt.Errorf("%s names bucket %q, not %s", st.Where("ledger/"+name), f.Bucket, bucket)
			}
			r.failed = append(r.failed, f)
			continue
		}
		if c, ok := cat[bucket]; ok && known != nil && known(bucket) {
			r.committed = append(r.committed, c.Ledger)
			r.cat[bucket] = c
			continue
		}
		info := infos[name]
		if info == nil {
			if info, err = st.Stat(ctx, "ledger/"+name); err != nil {
				return r, err
			}
		}
		stamp := stampOf(info)
		if c, ok := cat[bucket]; ok && c.Stamp == stamp {
			r.committed = append(r.committed, c.Ledger)
			r.cat[bucket] = c
			continue
		}
		data, err := store.ReadFile(ctx, st, "ledger/"+name)
		if err != nil {
			return r, err
		}
		l, err := parseLedger(data)
		if err != nil {
			return r, errors.New("ledger/" + name + ": " + err.Error())
		}
		if l.Bucket != bucket {
			return r, fmt.Errorf("%s names bucket %q, not %s", st.Where("ledger/"+name), l.Bucket, bucket)
		}
		r.committed = append(r.committed, l)
		r.cat[bucket] = catEntry{Stamp: stamp, Ledger: l.catalogued()}
		r.fresh++
	}
	return r, nil
}

// states is the ledger as the sink's states, by bucket.
func (r ledgerRead) states() []stamped.State {
	out := make([]stamped.State, 0, len(r.committed)+len(r.failed))
	for _, f := range r.failed {
		l := Ledger{Bucket: f.Bucket, Fingerprint: f.Fingerprint, Source: f.Source, CounterBits: f.CounterBits, SHA1Offset: f.SHA1Offset, KeyTable: f.KeyTable, NdxPolicy: f.NdxPolicy}
		out = append(out, stamped.State{Meta: l.meta(), Status: stamped.StatusFailed, Error: f.Error, Finished: f.Failed, Counts: stamped.NewCounts()})
	}
	for _, l := range r.committed {
		out = append(out, stamped.State{Meta: l.meta(), Status: stamped.StatusCommitted, Counts: l.Counts.Clone(), Finished: l.Finished})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Meta.Bucket < out[j].Meta.Bucket })
	return out
}
