// Package audit reads the reports that audit and keysearch count, from
// every kind of input they take (report manifests, the output folders of
// run, bucket folders, a PostgreSQL schema), and feeds them to a
// collisions.Auditor. Every input that cannot be taken is handed to
// Source.Reject and counted, never skipped in silence.
package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
	"github.com/backfill-dev/backfill/pipeline/stamp"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Place is where a report was found: a file, and a line of a manifest.
// It is formatted only when a report is rejected.
type Place struct {
	Name string
	Line int64
}

func (p Place) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d", p.Name, p.Line)
	}
	return p.Name
}

// Func is called with every report an input holds.
type Func func(at Place, textname []byte, n uint32)

// Source reads the reports of inputs.
type Source struct {
	Stamp stamp.Config // how bucket folders are read (In, Buckets and Scheme are set per input)
	// OnReject is told of every input, or part of one, that cannot be
	// taken.
	OnReject func(what string, err error)
	Rejected int64 // how many were
}

// Reject counts an input, or part of one, that cannot be taken, and
// tells OnReject.
func (s *Source) Reject(what string, err error) {
	s.Rejected++
	s.OnReject(what, err)
}

// Each calls fn for every report of the input fsys: a manifest file, the
// output folder of a run, or a folder of bucket folders (or one bucket
// folder). A folder that holds no bucket is a *stamp.InputError.
func (s *Source) Each(ctx context.Context, fsys store.Store, fn Func) error {
	st, err := fsys.Stat(ctx, ".")
	if err != nil {
		return err
	}
	if !st.IsDir() {
		parent, base := fsys.Parent()
		f, err := parent.Open(ctx, base)
		if err != nil {
			return err
		}
		defer f.Close()
		return s.Manifest(fsys.Where("."), f, fn)
	}
	if store.IsDir(ctx, fsys, "reports") && store.IsDir(ctx, fsys, "ledger") {
		return s.runOutput(ctx, fsys, fn)
	}
	return s.buckets(ctx, fsys, fn)
}

// Manifest calls fn for every report of the manifest r (lines of a
// textname, a tab and a count).
func (s *Source) Manifest(name string, r io.Reader, fn Func) error {
	return collisions.ReadManifest(r, func(line int64, textname []byte, n uint32) error {
		fn(Place{name, line}, textname, n)
		return nil
	}, func(err error) { s.Reject(name, err) })
}

// Postgres calls fn for every report of the schema's committed buckets.
func (s *Source) Postgres(ctx context.Context, pg *pgcopy.Sink, fn Func) error {
	where := Place{Name: pg.String()}
	return pg.EachReport(ctx, func(textname []byte, n uint32) error {
		fn(where, textname, n)
		return nil
	})
}

func (s *Source) runOutput(ctx context.Context, fsys store.Store, fn Func) error {
	ents, err := fsys.ReadDir(ctx, "reports")
	if err != nil {
		return err
	}
	var files []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".parquet") && !e.IsDir() {
			files = append(files, "reports/"+e.Name())
		}
	}
	sort.Strings(files)
	for _, f := range files {
		rows, err := parquetfile.ReadReports(ctx, fsys, f)
		if err != nil {
			return err
		}
		where := Place{Name: fsys.Where(f)}
		for _, r := range rows {
			fn(where, []byte(r.Textname), uint32(r.N))
		}
	}
	return nil
}

// buckets reads bucket folders as run does, but keeps only their reports.
func (s *Source) buckets(ctx context.Context, fsys store.Store, fn Func) error {
	in, err := stamp.ResolveInput(ctx, fsys, nil)
	if err != nil {
		return err
	}
	for _, m := range in.Misnamed {
		s.Reject(in.Dir.Where(m.Name), errors.New(m.Say(in.Dir)))
	}
	cfg := s.Stamp
	cfg.In, cfg.Buckets, cfg.Scheme = in.Dir, in.Buckets, ooid.DefaultScheme
	plan, err := stamp.NewWork(ctx, cfg)
	if err != nil {
		return err
	}
	return stamp.Run(ctx, cfg, plan, func(b *stamped.Bucket) error {
		for _, d := range b.Records {
			if d.Reason == deadletter.Collision && d.Textname != "" {
				continue // more measurements than counter values: counted by the caller itself
			}
			if d.IsReject() {
				s.Reject(d.File, fmt.Errorf("%s %s at %d: %s", d.Reason, d.Textname, d.Offset, d.Message))
			}
		}
		for _, r := range b.Reports {
			fn(Place{Name: r.Container}, []byte(r.Textname), r.N)
		}
		return nil
	})
}

// AllFiles reports whether every input is a local regular file (a
// manifest), which can be read again cheaply.
func AllFiles(inputs []string) bool {
	for _, in := range inputs {
		if st, err := os.Stat(in); in == "-" || err != nil || !st.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// Auditor feeds the reports of inputs to a collisions.Auditor and finds
// the textnames of the colliding pairs afterwards: kept as they come, or,
// when every input is a manifest file, read again.
type Auditor struct {
	A   *collisions.Auditor
	Src *Source
	// KeepNames keeps every textname; without it Reread must read the
	// inputs' textnames again, in the same order.
	KeepNames bool
	Reread    func(fn func(textname []byte)) error
	textnames []string
}

// ReadManifestFile adds the reports of the local manifest file path,
// parsed and hashed on every worker.
func (au *Auditor) ReadManifestFile(path string, workers int) error {
	f, err := store.OpenRegular(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		au.A.Grow(int(st.Size() / minManifestLine))
	}
	return au.A.AddManifest(f, workers, func(line int64, err error) {
		if _, ok := err.(*collisions.ManifestError); ok {
			au.Src.Reject(path, err)
			return
		}
		au.Src.Reject(Place{path, line}.String(), err)
	})
}

// minManifestLine is about the shortest line of a real manifest: a
// textname of the canned layout (a bucket, a time, a country, an ASN, a
// test name), a tab and a count. Room for a file's size over it holds
// every report; what goes unused is never touched, so it costs no memory.
const minManifestLine = 80

// Add adds a report; a textname that gets no IDs is rejected.
func (au *Auditor) Add(at Place, textname []byte, n uint32) {
	if err := au.A.Add(textname, n); err != nil {
		au.Src.Reject(at.String(), err)
		return
	}
	if au.KeepNames {
		au.textnames = append(au.textnames, string(textname))
	}
}

// Names returns the textnames of the reports in the results' pairs.
func (au *Auditor) Names(results []collisions.Result) (map[uint32]string, error) {
	want := map[uint32]string{}
	for _, r := range results {
		for _, p := range r.First {
			want[p.A], want[p.B] = "", ""
		}
	}
	if au.KeepNames {
		for ref := range want {
			want[ref] = au.textnames[ref]
		}
		return want, nil
	}
	if len(want) == 0 {
		return want, nil
	}
	// Read the inputs again, counting the textnames that were taken.
	ref := uint32(0)
	err := au.Reread(func(textname []byte) {
		if _, err := ooid.ParseTextnameBytes(textname); err != nil {
			return
		}
		if _, ok := want[ref]; ok {
			want[ref] = string(textname)
		}
		ref++
	})
	return want, err
}

// RereadFiles reads the textnames of local manifest files again.
func RereadFiles(inputs []string) func(func([]byte)) error {
	return func(fn func([]byte)) error {
		for _, in := range inputs {
			f, err := store.OpenRegular(in)
			if err != nil {
				return err
			}
			err = collisions.ReadManifest(f, func(_ int64, textname []byte, _ uint32) error {
				fn(textname)
				return nil
			}, func(error) {})
			f.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
}
