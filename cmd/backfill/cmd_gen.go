package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/corpus"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/internal/units"
)

const genHelp = `Usage: backfill gen --out DIR [flags]
       backfill gen --profile ooni2018 --manifest-only [--out FILE] [--seed N]
       backfill gen --profile ooni2018 --format autoclaved --index-only --out DIR [--every K] [--seed N]

Write a synthetic corpus of OONI canned buckets into DIR, byte-faithful to
the real format (GNU tar with LongLink headers in LZ4 frames as the lz4 CLI
writes them, as-is .lz4 reports, index.json.gz with sort_keys JSON, base64
SHA-1 and signed CRC-32), built from real OONI samples. The same flags and
seed always write the same bytes.

With --format autoclaved, DIR holds the autoclaved form of the same
reports instead (OONI's later layout: the same file names, tar members of
normalised JSON lines, each file a chain of LZ4 frames flushed at 256 KiB,
and index.json.gz listing every frame, report, datum and badblob); with
--format both, DIR/canned and DIR/autoclaved hold the two forms. The
container kinds of --corrupt damage the canned form only, and the
autoclaved form leaves out what autoclaving could not have made
(not_in_container and bad_yaml_header reports).

DIR/ground-truth.jsonl (per form) says, for every report (and every damaged
container), how many measurements a correct run gives IDs to and which
dead-letter reasons it must record.

With --profile ooni2018 --manifest-only, gen writes no data but a report
manifest (TEXTNAME<TAB>N lines, the input of backfill audit) at the scale of
the real OONI corpus up to 2018-06-20: 3.6 M reports, 147 M measurements,
316,084 timestamps shared by 753,235 reports holding 40,440,216
measurements (at most 20 per timestamp), timestamps 0x50bef44d..0x5b29a005,
the five largest reports of ooni-uuid, the three report_id forms
(timestamped ids whose time may differ from the filename's), and reports
uploaded again into a later bucket. It goes to --out FILE or standard
output; its statistics go to standard error.

With --profile ooni2018 --format autoclaved --index-only, gen writes the
same reports as the autoclaved indexes of their buckets, and no data:
DIR/YYYY-MM-DD/index.json.gz for each of the 2,026 buckets (or every K-th
with --every K), with every file, frame, report, datum and badblob row as
the autoclaving step wrote them (tar files of one test's reports, cut at
64 MiB of text, frames of 256 KiB; one blob in 50,000 a badblob), and
DIR/manifest.tsv, the manifest of the reports written. Sizes, offsets and
hashes are made up: backfill run --from-index gives the IDs from such
indexes alone, and backfill audit DIR/manifest.tsv its verdicts.

Flags:

	--out DIR               where to write, a folder or s3://bucket/prefix (required, but for a manifest)
	--format FORMAT         canned (default), autoclaved or both
	--profile NAME          ooni2018: the full-scale manifest (needs
	                        --manifest-only)
	--manifest-only         write the report manifest only
	--index-only            write the autoclaved indexes only (--profile
	                        ooni2018 --format autoclaved)
	--every K               with --index-only: every K-th bucket (default 1)
	--seed N                random seed (default 1)
	--start DATE            first bucket (default 2017-06-01)
	--buckets N             number of buckets (default 3)
	--reports N             reports per bucket (default 200)
	--json-fraction F       share of JSON reports, the rest YAML (default 0.6)
	--min-measurements N    measurements per report follow a Pareto law
	                        with this minimum (default 10)
	--alpha A               and this shape (default 1.2): most reports have
	                        tens, a few tens of thousands
	--max-measurements N    cap (default 1000003, the real maximum)
	--max-template SIZE     build reports only from the real samples whose
	                        measurement is at most SIZE (default 0: all of
	                        them, 0.6 to 65 KiB); 1KiB gives small
	                        measurements, as most real ones are
	--can-size SIZE         tar slices stay under SIZE (default 64MiB)
	--time-slots N          draw report times from N evenly spaced seconds of
	                        each bucket's 36 hours (default 0: any second), so
	                        that reports share timestamps and small counter
	                        widths collide
	--corrupt KIND=RATE     damage inputs of KIND at RATE (0..1); repeat the
	                        flag; KIND "all" sets every kind but huge_blob,
	                        which writes --huge-blob bytes per blob and is
	                        only made when named. Report kinds:
	                        bad_textname truncated_report broken_frame
	                        bad_yaml_header empty_report invalid_utf8 huge_blob
	                        not_in_index not_in_container badblob; container
	                        kinds:
	                        lz4_truncated lz4_corrupt lz4_content_size
	                        tar_truncated
	--huge-blob SIZE        size of a huge_blob measurement (default: 1MiB
	                        over --max-blob, the least that is flagged)
	--max-blob SIZE         the run's --max-blob the truth assumes (default 64MiB)
	-q                      no progress output

Examples:

	backfill gen --out corpus
	backfill gen --out corpus --buckets 10 --reports 2000 --corrupt all=0.01
	backfill gen --out corpus --corrupt huge_blob=0.01 --huge-blob 2MiB --max-blob 1MiB
	backfill gen --profile ooni2018 --manifest-only --out corpus.tsv
	backfill gen --profile ooni2018 --format autoclaved --index-only --out ooni2018

EXIT STATUS

	0    success
	1    failure
	2    usage error
`

// genOptions are gen's flags.
type genOptions struct {
	cfg                    corpus.Config
	out, start, profile    string
	manifestOnly, quiet    bool
	indexOnly              bool
	every                  int
	canSize, huge, maxBlob units.Size
	maxTemplate            units.Size
	setHuge                bool // --huge-blob was given
}

func parseGenFlags(args []string, std cli.Stdio) (*genOptions, error) {
	fs := cli.NewFlagSet("gen", genHelp, std)
	o := &genOptions{cfg: corpus.DefaultConfig()}
	cfg := &o.cfg
	o.canSize, o.huge, o.maxBlob = units.Size(cfg.CanSize), units.Size(cfg.HugeBlob), units.Size(cfg.MaxBlob)
	cfg.Corrupt = map[string]float64{}
	fs.StringVar(&o.out, "out", "", "")
	fs.StringVar(&cfg.Format, "format", corpus.FormatCanned, "")
	fs.StringVar(&o.profile, "profile", "", "")
	fs.BoolVar(&o.manifestOnly, "manifest-only", false, "")
	fs.BoolVar(&o.indexOnly, "index-only", false, "")
	fs.IntVar(&o.every, "every", 1, "")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "")
	fs.StringVar(&o.start, "start", cfg.Start.Format("2006-01-02"), "")
	fs.IntVar(&cfg.Buckets, "buckets", cfg.Buckets, "")
	fs.IntVar(&cfg.Reports, "reports", cfg.Reports, "")
	fs.Float64Var(&cfg.JSONFraction, "json-fraction", cfg.JSONFraction, "")
	fs.IntVar(&cfg.MinMeasurements, "min-measurements", cfg.MinMeasurements, "")
	fs.Float64Var(&cfg.Alpha, "alpha", cfg.Alpha, "")
	fs.IntVar(&cfg.MaxMeasurements, "max-measurements", cfg.MaxMeasurements, "")
	fs.Var(&o.maxTemplate, "max-template", "")
	fs.Var(&o.canSize, "can-size", "")
	fs.IntVar(&cfg.TimeSlots, "time-slots", 0, "")
	fs.Var(&o.huge, "huge-blob", "")
	fs.Var(&o.maxBlob, "max-blob", "")
	fs.BoolVar(&o.quiet, "q", false, "")
	fs.Func("corrupt", "", func(s string) error { return addCorruption(cfg.Corrupt, s) })
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

// addCorruption adds --corrupt KIND=RATE (KIND all: every kind but
// huge_blob) to rates.
func addCorruption(rates map[string]float64, s string) error {
	kind, rate, ok := strings.Cut(s, "=")
	r, err := strconv.ParseFloat(rate, 64)
	if !ok || err != nil || r < 0 || r > 1 {
		return fmt.Errorf("want KIND=RATE with RATE in 0..1, got %q", s)
	}
	kinds := []string{kind}
	if kind == "all" {
		kinds = nil
		for _, k := range append(append([]string(nil), corpus.ReportKinds...), corpus.ContainerKinds...) {
			if k != corpus.KindHugeBlob {
				kinds = append(kinds, k)
			}
		}
	}
	for _, k := range kinds {
		rates[k] = r
	}
	return nil
}

// check checks the flags and completes the generator's configuration.
func (o *genOptions) check() error {
	cfg := &o.cfg
	var err error
	if cfg.Start, err = time.Parse("2006-01-02", o.start); err != nil {
		return cli.Usagef("gen: --start: %v", err)
	}
	if cfg.Buckets < 1 || cfg.Reports < 0 || cfg.MinMeasurements < 1 || cfg.Alpha <= 0 || cfg.MaxMeasurements < 1 ||
		cfg.JSONFraction < 0 || cfg.JSONFraction > 1 || o.canSize < 1 || o.huge < 16 || cfg.TimeSlots < 0 {
		return cli.Usagef("gen: a count, size or fraction is out of range")
	}
	cfg.CanSize, cfg.HugeBlob, cfg.MaxBlob, cfg.MaxTemplate = int64(o.canSize), int64(o.huge), int64(o.maxBlob), int(o.maxTemplate)
	switch cfg.Format {
	case corpus.FormatCanned, corpus.FormatAutoclaved, corpus.FormatBoth:
	default:
		return cli.Usagef("gen: --format %q: want canned, autoclaved or both", cfg.Format)
	}
	for k := range cfg.Corrupt {
		if !corpus.IsKind(k) {
			return cli.Usagef("gen: unknown corruption kind %q; the kinds are all, %s", k,
				strings.Join(append(append([]string(nil), corpus.ReportKinds...), corpus.ContainerKinds...), ", "))
		}
	}
	if !o.setHuge {
		cfg.HugeBlob = cfg.MaxBlob + 1<<20
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
	case o.indexOnly && (o.manifestOnly || o.cfg.Format != corpus.FormatAutoclaved || o.out == "" || o.every < 1):
		return cli.Usagef("gen: --index-only writes autoclaved indexes into a folder: --format autoclaved --out DIR, --every 1 or more, no --manifest-only")
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
	st, err := corpus.GenerateOONI2018Manifest(w, seed)
	if err := errors.Join(err, closeOut()); err != nil {
		return err
	}
	fmt.Fprint(std.Err, st)
	return nil
}

// genIndexes writes the ooni2018 corpus as autoclaved indexes into the
// local folder --out.
func genIndexes(o *genOptions, std cli.Stdio) error {
	var progress func(corpus.IndexStats)
	if !o.quiet {
		p := cli.NewLines(std.Err)
		defer p.Finish()
		progress = func(st corpus.IndexStats) {
			p.Update(fmt.Sprintf("backfill: gen: %d buckets, %d reports, %d measurements", st.Buckets, st.Reports, st.Measurements))
		}
	}
	st, err := corpus.WriteOONI2018Indexes(o.out, o.cfg.Seed, o.every, progress)
	if err != nil {
		return err
	}
	fmt.Fprintf(std.Out, "buckets        %d\nfiles          %d\nreports        %d\nmeasurements   %d (%d badblobs)\nindexes        %s compressed, describing %s of text\nmanifest       %s\n",
		st.Buckets, st.Files, st.Reports, st.Measurements, st.Badblobs, units.Bytes(st.IndexBytes), units.Bytes(st.TextBytes), o.out+"/"+corpus.ManifestName)
	return nil
}

func truthPath(out, format string) string {
	if format == corpus.FormatBoth {
		return out + "/{canned,autoclaved}/" + corpus.TruthName
	}
	return out + "/" + corpus.TruthName
}
