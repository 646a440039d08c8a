package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/backfill-dev/backfill/gen/corpus"
	"github.com/backfill-dev/backfill/gen/ooni2018"
	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/internal/units"
)

// genOptions are gen's flags.
type genOptions struct {
	cfg                    corpus.Config
	out, start, profile    string
	manifestOnly, quiet    bool
	indexOnly              bool
	every, run             int
	canSize, huge, maxBlob units.Size
	maxTemplate            units.Size
	setHuge                bool // --huge-blob was given
}

func parseGenFlags(args []string, std cli.Stdio) (*genOptions, error) {
	fs := newFlags("gen", std)
	o := &genOptions{cfg: corpus.DefaultConfig()}
	cfg := &o.cfg
	o.canSize, o.huge, o.maxBlob = units.Size(cfg.CanSize), units.Size(cfg.HugeBlob), units.Size(cfg.MaxBlob)
	cfg.Corrupt = map[string]float64{}
	fs.StringVar(&o.out, "out", "", "where to write, a folder or s3://bucket/prefix `DIR` (required, but for a manifest)")
	fs.StringVar(&cfg.Format, "format", corpus.FormatCanned, "`FORMAT`: canned, autoclaved or both")
	fs.StringVar(&o.profile, "profile", "", "`NAME`: ooni2018, the full-scale corpus (with --manifest-only or --index-only)")
	fs.BoolVar(&o.manifestOnly, "manifest-only", false, "write the report manifest only")
	fs.BoolVar(&o.indexOnly, "index-only", false, "write the autoclaved indexes only (--profile ooni2018 --format autoclaved)")
	fs.IntVar(&o.every, "every", 1, "with --index-only: every `K`-th bucket")
	fs.IntVar(&o.run, "run", 1, "with --every: of every K buckets, the first `R` in a row")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed `N`")
	fs.StringVar(&o.start, "start", cfg.Start.Format("2006-01-02"), "first bucket `DATE`")
	fs.IntVar(&cfg.Buckets, "buckets", cfg.Buckets, "number of buckets `N`")
	fs.IntVar(&cfg.Reports, "reports", cfg.Reports, "`N` reports per bucket")
	fs.Float64Var(&cfg.JSONFraction, "json-fraction", cfg.JSONFraction, "share `F` of JSON reports, the rest YAML")
	fs.IntVar(&cfg.MinMeasurements, "min-measurements", cfg.MinMeasurements, "measurements per report follow a Pareto law with this minimum `N`")
	fs.Float64Var(&cfg.Alpha, "alpha", cfg.Alpha, "and this shape `A`: most reports have tens, a few tens of thousands")
	fs.IntVar(&cfg.MaxMeasurements, "max-measurements", cfg.MaxMeasurements, "cap `N` (the default is the real maximum)")
	fs.Var(&o.maxTemplate, "max-template", "build reports only from the real samples whose measurement is at most `SIZE` (0: all of them, 0.6 to 65 KiB); 1KiB gives small measurements, as most real ones are")
	fs.Float64Var(&cfg.Varied, "varied", 0, "redraw this share `F` (0..1) of each measurement's string values (their letters and digits), so that the containers compress as the archive does, not as one sample repeated (canned only)")
	fs.Var(&o.canSize, "can-size", "tar slices stay under `SIZE`")
	fs.IntVar(&cfg.TimeSlots, "time-slots", 0, "draw report times from `N` evenly spaced seconds of each bucket's 36 hours (0: any second), so that reports share timestamps and small counter widths collide")
	fs.Var(&o.huge, "huge-blob", "`SIZE`: the size of a huge_blob measurement (default: 1MiB over --max-blob, the least that is flagged)")
	fs.Var(&o.maxBlob, "max-blob", "the run's --max-blob `SIZE` the truth assumes")
	fs.BoolVar(&o.quiet, "q", false, "no progress output")
	fs.Func("corrupt", "`KIND=RATE`: damage inputs of KIND at RATE (0..1); repeat the flag; KIND all sets every kind but huge_blob, which writes --huge-blob bytes per blob and is only made when named. Report kinds: "+strings.Join(corpus.ReportKinds, " ")+"; container kinds: "+strings.Join(corpus.ContainerKinds, " "), func(s string) error { return corpus.AddCorruption(cfg.Corrupt, s) })
	rest, err := cli.ParseFlags(fs, args)
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		return nil, cli.Usagef("gen: unexpected argument %q", rest[0])
	}
	o.setHuge = len(cli.SetFlags(fs, "huge-blob")) > 0
	return o, nil
}

// check checks the flags and completes the generator's configuration.
func (o *genOptions) check() error {
	cfg := &o.cfg
	var err error
	if cfg.Start, err = time.Parse("2006-01-02", o.start); err != nil {
		return cli.Usagef("gen: --start: %v", err)
	}
	cfg.CanSize, cfg.HugeBlob, cfg.MaxBlob, cfg.MaxTemplate = int64(o.canSize), int64(o.huge), int64(o.maxBlob), int(o.maxTemplate)
	if !o.setHuge {
		cfg.HugeBlob = cfg.MaxBlob + 1<<20
	}
	if err := cfg.Check(); errors.Is(err, corpus.ErrFormat) {
		return cli.Usagef("gen: --%v", err)
	} else if err != nil {
		return cli.Usagef("gen: %v", err)
	}
	return nil
}

func runGen(ctx context.Context, args []string, std cli.Stdio) error {
	o, err := parseGenFlags(args, std)
	if err != nil {
		return err
	}
	switch {
	case o.profile == "" && (o.manifestOnly || o.indexOnly):
		return cli.Usagef("gen: --manifest-only and --index-only need --profile ooni2018")
	case o.profile != "" && o.profile != "ooni2018":
		return cli.Usagef("gen: unknown profile %q (there is ooni2018)", o.profile)
	case o.indexOnly && (o.manifestOnly || o.cfg.Format != corpus.FormatAutoclaved || o.out == "" || o.every < 1 || o.run < 1 || o.run > o.every):
		return cli.Usagef("gen: --index-only writes autoclaved indexes into a folder: --format autoclaved --out DIR, --every K of 1 or more, --run from 1 to K, no --manifest-only")
	case o.indexOnly:
		return genIndexes(o, std)
	case o.profile != "" && !o.manifestOnly:
		return cli.Usagef("gen: --profile ooni2018 writes a manifest or indexes only: add --manifest-only, or --format autoclaved --index-only")
	case o.profile != "":
		return genManifest(o.out, o.cfg.Seed, std)
	case o.out == "":
		return cli.Usagef("gen: --out is required")
	}
	if err := o.check(); err != nil {
		return err
	}
	if !o.quiet {
		p, total := cli.NewLines(std.Err), o.cfg.Buckets
		o.cfg.Progress = func(st corpus.Stats) {
			p.Update(fmt.Sprintf("backfill: gen: %d/%d buckets, %d reports, %s written", st.Buckets, total, st.Reports, units.Bytes(st.Bytes)))
		}
		defer p.Finish()
	}
	st, err := o.generate(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(std.Out, "buckets        %d\ncontainers     %d\nreports        %d\nmeasurements   %d (that get IDs)\nbytes          %s compressed, %s uncompressed\nground truth   %s\n",
		st.Buckets, st.Containers, st.Reports, st.Measurements, units.Bytes(st.Bytes), units.Bytes(st.TextBytes), truthPath(o.out, o.cfg.Format))
	return nil
}

// generate writes the corpus to --out: a local folder, or a local tree
// uploaded whole to an s3:// prefix.
func (o *genOptions) generate(ctx context.Context) (corpus.Stats, error) {
	dst, err := location.Open(ctx, o.out)
	if err != nil {
		return corpus.Stats{}, err
	}
	// A corpus goes into a folder of its own: files already there would
	// stand beside it with no line of its ground truth, and a link planted
	// among them would be written through.
	if ents, err := dst.ReadDir(ctx, "."); err == nil && len(ents) > 0 {
		return corpus.Stats{}, cli.Usagef("gen: --out %s is not empty (%s, ...): gen writes a corpus into a new or empty folder", dst.Where("."), cli.Printable(ents[0].Name()))
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return corpus.Stats{}, err
	}
	dir, local := store.LocalDir(dst)
	if !local {
		tmp, err := os.MkdirTemp("", "backfill-gen-*")
		if err != nil {
			return corpus.Stats{}, err
		}
		defer func() { _ = os.RemoveAll(tmp) }() // a temporary tree: the system clears what is left
		dir = tmp
	}
	st, err := corpus.Generate(dir, o.cfg)
	if err != nil || local {
		return st, err
	}
	return st, store.Upload(ctx, dst, dir)
}

// genManifest writes the ooni2018 manifest to out ("" or "-": stdout).
func genManifest(out string, seed uint64, std cli.Stdio) error {
	w, closeOut := std.Out, func() error { return nil }
	if out != "" && out != "-" {
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		w, closeOut = f, f.Close
	}
	st, err := ooni2018.GenerateManifest(w, seed)
	if err := errors.Join(err, closeOut()); err != nil {
		return err
	}
	fmt.Fprint(std.Err, st)
	return nil
}

// genIndexes writes the ooni2018 corpus as autoclaved indexes into the
// local folder --out.
func genIndexes(o *genOptions, std cli.Stdio) error {
	var progress func(ooni2018.IndexStats)
	if !o.quiet {
		p := cli.NewLines(std.Err)
		defer p.Finish()
		progress = func(st ooni2018.IndexStats) {
			p.Update(fmt.Sprintf("backfill: gen: %d buckets, %d reports, %d measurements", st.Buckets, st.Reports, st.Measurements))
		}
	}
	st, err := ooni2018.WriteIndexes(o.out, o.cfg.Seed, o.every, o.run, progress)
	if err != nil {
		return err
	}
	fmt.Fprintf(std.Out, "buckets        %d\nfiles          %d\nreports        %d\nmeasurements   %d (%d badblobs)\nindexes        %s compressed, describing %s of text\nmanifest       %s\n",
		st.Buckets, st.Files, st.Reports, st.Measurements, st.Badblobs, units.Bytes(st.IndexBytes), units.Bytes(st.TextBytes), o.out+"/"+ooni2018.ManifestName)
	return nil
}

func truthPath(out, format string) string {
	if format == corpus.FormatBoth {
		return out + "/{canned,autoclaved}/" + corpus.TruthName
	}
	return out + "/" + corpus.TruthName
}
