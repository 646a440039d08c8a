// Package audit runs `backfill audit`: it reads the reports of every kind
// of input audit and keysearch take (report manifests, the output folders
// of run, bucket folders, a PostgreSQL schema), counts their collisions
// under each scheme with a collisions.Sweep, and makes the report audit
// prints, each pair named by its textnames. Every input that cannot be
// taken is handed to Source.Reject and counted, never skipped in silence.
package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
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

// OpenFunc opens an input named on the command line: a local path or an
// s3:// URL.
type OpenFunc func(ctx context.Context, input string) (store.Store, error)

// Source reads the reports of inputs.
type Source struct {
	Stamp ingest.Config // how bucket folders are read (In, Buckets and Scheme are set per input)
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
// folder). A folder that holds no bucket is a *ingest.InputError.
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

// Input calls fn for every report of the input named on the command line:
// "-" is a manifest on stdin; any other name is opened with open and read
// as Each reads it.
func (s *Source) Input(ctx context.Context, open OpenFunc, input string, stdin io.Reader, fn Func) error {
	if input == "-" {
		return s.Manifest(input, stdin, fn)
	}
	fsys, err := open(ctx, input)
	if err != nil {
		return err
	}
	return s.Each(ctx, fsys, fn)
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
	in, err := ingest.ResolveInput(ctx, fsys, nil)
	if err != nil {
		return err
	}
	for _, m := range in.Misnamed {
		s.Reject(in.Dir.Where(m.Name), errors.New(m.Say(in.Dir)))
	}
	cfg := s.Stamp
	cfg.In, cfg.Buckets, cfg.Scheme = in.Dir, in.Buckets, ooid.DefaultScheme
	plan, err := ingest.NewWork(ctx, cfg)
	if err != nil {
		return err
	}
	return ingest.Run(ctx, cfg, plan, func(b *stamped.Bucket) error {
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
