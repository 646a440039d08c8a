package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/reader"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
	"github.com/backfill-dev/backfill/pipeline/stamp"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// reportSource reads the reports of the inputs audit and keysearch take:
// report manifests, run output folders and bucket folders. Every input
// that cannot be taken is reported on stderr and counted.
type reportSource struct {
	cmd      string
	std      stdio
	stampCfg stamp.Config // how bucket folders are read
	rejected int64
}

// inputFlags are the flags of the inputs audit and keysearch read: how
// bucket folders are read, and --sink postgres with its connection.
type inputFlags struct {
	read stamp.Config
	sink string
	pg   pgFlags
}

func (f *inputFlags) register(fs *flag.FlagSet) {
	f.read.Format, f.read.Read.Ndx = reader.FormatAuto, reader.NdxBlobs
	fs.Var(&f.read.Format, "format", "")
	fs.BoolVar(&f.read.Read.FromIndex, "from-index", false, "")
	fs.Var(&f.read.Read.Ndx, "ndx", "")
	fs.StringVar(&f.sink, "sink", "", "")
	f.pg.register(fs, false)
}

// check refuses a sink other than postgres, connection flags without it,
// and no input at all.
func (f *inputFlags) check(fs *flag.FlagSet, inputs []string) error {
	cmd := fs.Name()
	pgOnly := setFlags(fs, "dsn", "pg-schema")
	switch {
	case f.sink != "" && f.sink != "postgres":
		return usagef("%s: --sink must be postgres (a Parquet output is named as an INPUT)", cmd)
	case f.sink == "" && len(pgOnly) > 0:
		return usagef("%s: %s %s for --sink postgres", cmd, strings.Join(pgOnly, ", "), isAre(len(pgOnly)))
	case f.sink == "" && len(inputs) == 0:
		return usagef("%s: no input: name a manifest, a run's output folder or bucket folders (or --sink postgres)", cmd)
	}
	return nil
}

// openPostgres opens the schema of --sink postgres; nil without it.
func (f *inputFlags) openPostgres(ctx context.Context, std stdio) (*pgcopy.Sink, error) {
	if f.sink != "postgres" {
		return nil, nil
	}
	return pgcopy.Open(ctx, f.pg.options(std))
}

// place is where a report was found: a file, and a line of a manifest.
// It is formatted only when a report is rejected.
type place struct {
	name string
	line int64
}

func (p place) String() string {
	if p.line > 0 {
		return fmt.Sprintf("%s:%d", p.name, p.line)
	}
	return p.name
}

func (rs *reportSource) reject(what string, err error) {
	rs.rejected++
	fmt.Fprintf(rs.std.err, "backfill %s: %s: %v\n", rs.cmd, what, err)
}

// allFiles reports whether every input is a regular file (a manifest),
// which can be read again cheaply.
func allFiles(inputs []string) bool {
	for _, in := range inputs {
		if st, err := os.Stat(in); in == "-" || err != nil || !st.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// each calls fn for every report of the input, with where it was found.
func (rs *reportSource) each(ctx context.Context, in string, fn func(at place, textname []byte, n uint32)) error {
	if in == "-" {
		return rs.manifest(in, rs.std.in, fn)
	}
	fsys, err := store.Open(ctx, in)
	if err != nil {
		return err
	}
	st, err := fsys.Stat(".")
	if err != nil {
		return err
	}
	if !st.IsDir() {
		f, err := store.OpenFile(ctx, in)
		if err != nil {
			return err
		}
		defer f.Close()
		return rs.manifest(in, f, fn)
	}
	if store.IsDir(fsys, "reports") && store.IsDir(fsys, "ledger") {
		return rs.runOutput(fsys, fn)
	}
	return rs.buckets(ctx, in, fn)
}

// postgres calls fn for every report of the schema's committed buckets.
func (rs *reportSource) postgres(ctx context.Context, s *pgcopy.Sink, fn func(place, []byte, uint32)) error {
	where := place{name: s.String()}
	return s.EachReport(ctx, func(textname []byte, n uint32) error {
		fn(where, textname, n)
		return nil
	})
}

// isDir tells whether p (a local path or an s3:// prefix) is a folder.
func isDir(p string) bool {
	st, err := store.Open(context.Background(), p)
	return err == nil && store.IsDir(st, ".")
}

func (rs *reportSource) manifest(name string, r io.Reader, fn func(place, []byte, uint32)) error {
	return collisions.ReadManifest(r, func(line int64, textname []byte, n uint32) error {
		fn(place{name, line}, textname, n)
		return nil
	}, func(err error) { rs.reject(name, err) })
}

func (rs *reportSource) runOutput(fsys store.Store, fn func(place, []byte, uint32)) error {
	ents, err := fsys.ReadDir("reports")
	if err != nil {
		return err
	}
	var files []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".parquet") && !e.IsDir() {
			files = append(files, fsys.Where("reports/"+e.Name()))
		}
	}
	sort.Strings(files)
	for _, f := range files {
		rows, err := parquetfile.ReadReports(f)
		if err != nil {
			return err
		}
		for _, r := range rows {
			fn(place{name: f}, []byte(r.Textname), uint32(r.N))
		}
	}
	return nil
}

// buckets reads bucket folders as backfill run does, into a sink that
// only counts.
func (rs *reportSource) buckets(ctx context.Context, dir string, fn func(place, []byte, uint32)) error {
	in, err := stamp.ResolveInput(ctx, dir, nil)
	if err != nil {
		return &usageError{msg: rs.cmd + ": " + err.Error(), cmd: rs.cmd}
	}
	cfg := rs.stampCfg
	cfg.In, cfg.Buckets, cfg.Scheme, cfg.Version = in.Dir, in.Buckets, ooid.DefaultScheme, buildVersion()
	plan, err := stamp.NewPlan(ctx, cfg)
	if err != nil {
		return err
	}
	return stamp.Run(ctx, cfg, plan, func(b *stamped.Bucket) error {
		for _, d := range b.Records {
			if d.Reason == deadletter.Collision && d.Textname != "" {
				continue // more measurements than counter values: counted by the caller itself
			}
			if d.IsReject() {
				rs.reject(d.File, fmt.Errorf("%s %s at %d: %s", d.Reason, d.Textname, d.Offset, d.Message))
			}
		}
		for _, r := range b.Reports {
			fn(place{name: r.Container}, []byte(r.Textname), r.N)
		}
		return nil
	})
}
