package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/check"
	"github.com/backfill-dev/backfill/pipeline/load"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

const checkHelp = `Usage: backfill check --plan FILE --out OUT [--json]

Settle the collision verdicts of a corpus stamped in shards (backfill run
--plan FILE --out OUT, each shard in OUT/shards/I): merge every shard's
report manifest by time, a streaming k-way merge that holds one timestamp's
reports at a time, and apply the policy of a single run to them. It writes
OUT/verdicts.jsonl, the reports whose verdict differs from their shard's,
and prints the buckets whose rows change; backfill load applies them.

Every shard must have committed every bucket the plan gives it.

Flags:

	--plan FILE    the plan of backfill plan (a path or an s3:// URL)
	--out OUT      the job's output, as given to the shards' runs
	--json         print the summary as one JSON object

EXIT STATUS

	0    the verdicts were written
	1    failure (a shard missing or incomplete, a manifest unreadable)
	2    usage error
`

const loadHelp = `Usage: backfill load --plan FILE --out OUT [--shard I]
       backfill load --plan FILE --out OUT --sink postgres [--dsn URL] [--pg-schema NAME] [--create-schema] [--shard I]

Load the buckets of one shard of a plan into the job's output OUT, once
backfill check has written OUT/verdicts.jsonl: each bucket's files are
copied from OUT/shards/I (the ledger entry last), and the buckets whose
verdicts changed are rewritten with them, as a single run would have
written them. The shard is --shard, or JOB_COMPLETION_INDEX as a
Kubernetes Indexed Job sets it. Loading a shard again gives the same
files; shards load side by side, each under its own lock.

With --sink postgres, each bucket of the shard is loaded from
OUT/shards/I into PostgreSQL in its own transaction, as run --sink
postgres loads it: the database settles the verdicts across buckets and
shards itself (check is not needed), and the tables end as a one-machine
run leaves them.

Flags:

	--plan FILE    the plan of backfill plan
	--out OUT      the job's output (a folder or s3://bucket/prefix)
	--shard I      the shard to load (default: JOB_COMPLETION_INDEX)
	--sink NAME    parquet (default: into OUT) or postgres
	--dsn URL      PostgreSQL connection string (the PG* variables fill in
	               what it leaves out)
	--pg-schema NAME  schema of the tables (default backfill)
	--create-schema   create the tables when they are missing
	--retries N    tries again per bucket after a lost connection (default 5)
	--retry-wait D first wait before a retry (default 1s)
	--connections N   buckets loaded at once (default 2)

EXIT STATUS

	0    the shard was loaded
	1    failure
	2    usage error
`

// verdictsName is the file check writes under the job's output.
const verdictsName = "verdicts.jsonl"

type checkSummary struct {
	check.Stats
	Buckets []string `json:"buckets_changed"`
}

func runCheck(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("check", checkHelp, std)
	var planFile, out string
	var asJSON bool
	fs.StringVar(&planFile, "plan", "", "")
	fs.StringVar(&out, "out", "", "")
	fs.BoolVar(&asJSON, "json", false, "")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return usagef("check: unexpected argument %q", rest[0])
	case planFile == "" || out == "":
		return usagef("check: --plan and --out are required")
	}
	p, err := readPlan(ctx, "check", planFile)
	if err != nil {
		return err
	}
	var readers []*check.Reader
	for i := range p.Shards {
		names := p.Names(i)
		if len(names) == 0 {
			continue
		}
		loc := store.Join(shardOut(out, i), manifestName)
		f, err := store.OpenFile(ctx, loc)
		if err != nil {
			return fmt.Errorf("shard %d has not completed: %w", i, err)
		}
		defer f.Close()
		r, err := check.NewReader(loc, f)
		if err != nil {
			return err
		}
		readers = append(readers, r)
	}
	var verdicts []check.Verdict
	st, err := check.Merge(readers, func(v check.Verdict) error {
		verdicts = append(verdicts, v)
		return nil
	})
	if err != nil {
		return err
	}
	// Every shard covers its buckets (the headers are read whole by now).
	if err := shardsComplete(p.Shards, p.Names, readers, out); err != nil {
		return err
	}
	slices.SortFunc(verdicts, func(a, b check.Verdict) int {
		if c := strings.Compare(a.Bucket, b.Bucket); c != 0 {
			return c
		}
		return strings.Compare(a.Textname, b.Textname)
	})
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	sum := checkSummary{Stats: st, Buckets: []string{}}
	for _, v := range verdicts {
		enc.Encode(v)
		if len(sum.Buckets) == 0 || sum.Buckets[len(sum.Buckets)-1] != v.Bucket {
			sum.Buckets = append(sum.Buckets, v.Bucket)
		}
	}
	dst, err := store.Open(ctx, out)
	if err != nil {
		return err
	}
	if err := store.WriteFile(dst, verdictsName, buf.Bytes()); err != nil {
		return err
	}
	if asJSON {
		b, _ := json.Marshal(sum)
		fmt.Fprintf(std.out, "%s\n", b)
		return nil
	}
	fmt.Fprintf(std.out, "manifests      %d\nreports        %d\nshared ts      %d (largest group %d)\nrejected       %d\nchanged        %d verdicts, in %d buckets\n",
		st.Manifests, st.Reports, st.Groups, st.Largest, st.Rejected, st.Changed, len(sum.Buckets))
	for _, b := range sum.Buckets {
		fmt.Fprintf(std.out, "  %s\n", b)
	}
	return nil
}

// shardsComplete checks that every manifest covers exactly its shard's
// buckets of the plan.
func shardsComplete(shards int, names func(int) []string, readers []*check.Reader, out string) error {
	k := 0
	for i := range shards {
		want := names(i)
		if len(want) == 0 {
			continue
		}
		got := readers[k].Header.Buckets
		k++
		if !slices.Equal(got, want) {
			return fmt.Errorf("shard %d (%s) committed %d of its %d buckets: run it again", i, shardOut(out, i), len(got), len(want))
		}
	}
	return nil
}

func runLoad(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("load", loadHelp, std)
	var planFile, out, sinkName string
	var createSchema bool
	var pf pgFlags
	pf.register(fs, true)
	shard := -1
	fs.StringVar(&planFile, "plan", "", "")
	fs.StringVar(&out, "out", "", "")
	fs.StringVar(&sinkName, "sink", "parquet", "")
	fs.BoolVar(&createSchema, "create-schema", false, "")
	fs.IntVar(&shard, "shard", -1, "")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	pgOnly := setFlags(fs, "dsn", "pg-schema", "create-schema", "retries", "retry-wait", "connections")
	switch {
	case len(rest) > 0:
		return usagef("load: unexpected argument %q", rest[0])
	case planFile == "" || out == "":
		return usagef("load: --plan and --out are required")
	case sinkName != "parquet" && sinkName != "postgres":
		return usagef("load: --sink must be parquet or postgres")
	case sinkName == "parquet" && len(pgOnly) > 0:
		return usagef("load: %s %s for --sink postgres; add --sink postgres, or leave %s out", strings.Join(pgOnly, ", "), isAre(len(pgOnly)), itThem(len(pgOnly)))
	case pf.connections < 1:
		return usagef("load: --connections must be 1 or more")
	}
	p, err := readPlan(ctx, "load", planFile)
	if err != nil {
		return err
	}
	if shard, err = shardIndex("load", p, shard); err != nil {
		return err
	}
	if sinkName == "postgres" {
		return loadPostgres(ctx, std, p.Names(shard), shardOut(out, shard), outputFlags{sink: sinkName, pg: pf, createSchema: createSchema})
	}
	byBucket, err := readVerdicts(ctx, out)
	if err != nil {
		return err
	}
	src, err := store.Open(ctx, shardOut(out, shard))
	if err != nil {
		return err
	}
	s, err := parquetfile.OpenLocked(out, ".lock-load-"+strconv.Itoa(shard))
	if err != nil {
		return err
	}
	defer s.Close()
	for _, b := range p.Names(shard) {
		l, err := s.CopyBucket(src, b)
		if err != nil {
			return fmt.Errorf("load bucket %s: %w", b, err)
		}
		if vs := byBucket[b]; len(vs) > 0 {
			if err := s.Reassign(ctx, l.Scheme(), b, vs); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(std.err, "backfill: loaded shard %d: %d buckets into %s\n", shard, len(p.Names(shard)), out)
	return nil
}

// readVerdicts reads what check wrote, by bucket.
func readVerdicts(ctx context.Context, out string) (map[string][]stamped.Verdict, error) {
	f, err := store.OpenFile(ctx, store.Join(out, verdictsName))
	if err != nil {
		return nil, fmt.Errorf("no verdicts: run backfill check first (%w)", err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	out2 := map[string][]stamped.Verdict{}
	for {
		var v check.Verdict
		if err := dec.Decode(&v); err == io.EOF {
			return out2, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", verdictsName, err)
		}
		out2[v.Bucket] = append(out2[v.Bucket], stamped.Verdict{Textname: v.Textname, RejectedBy: v.RejectedBy, Message: v.Message})
	}
}

// loadPostgres loads the buckets names of the shard output dir into
// PostgreSQL, each in its transaction, through the Loader of a run.
func loadPostgres(ctx context.Context, std stdio, names []string, dir string, f outputFlags) error {
	if len(names) == 0 {
		return nil
	}
	src, err := parquetfile.OpenLocked(dir, ".lock-load-postgres")
	if err != nil {
		return err
	}
	defer src.Close()
	first, err := src.ReadLedger(names[0])
	if err != nil {
		return fmt.Errorf("bucket %s of %s: %w", names[0], dir, err)
	}
	o, err := openOutput(ctx, std, f)
	if err != nil {
		return err
	}
	defer o.sink.Close()
	ld, err := load.New(o.sink, first.Scheme())
	if err != nil {
		return err
	}
	if err := ld.Start(ctx, names); err != nil {
		return err
	}
	// Buckets are read one at a time and committed ld.Commits() at once.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(ld.Commits())
	for _, name := range names {
		if gctx.Err() != nil {
			break
		}
		b, err := src.Stamped(name)
		if err != nil {
			g.Wait()
			return err
		}
		g.Go(func() error {
			if _, err := ld.Commit(ctx, b); err != nil {
				return fmt.Errorf("bucket %s: %w", name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := ld.Finish(ctx); err != nil {
		return err
	}
	fmt.Fprintf(std.err, "backfill: loaded %d buckets of %s into %s\n", len(names), dir, o.dest)
	return nil
}
