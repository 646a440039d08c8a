package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sync/errgroup"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/check"
	"github.com/backfill-dev/backfill/pipeline/plan"
	"github.com/backfill-dev/backfill/pipeline/reader"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/stamp"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

const planHelp = `Usage: backfill plan --in DIR --shards N [--out FILE]

Split the buckets under DIR (a folder or s3://bucket/prefix) into N
shards balanced by bytes, for runs on N machines (a Kubernetes Indexed
Job: backfill run --plan FILE, each pod its shard). The plan is JSON,
versioned and checksummed; it records each bucket's size and listing
fingerprint, so a shard refuses to run on buckets that changed since.

A bucket's shard is chosen by rendezvous hashing of its name, capped at
5% above the mean shard: the same listing always gives the same plan,
no shard holds more than the larger of 1.05 times the mean and the mean
plus the largest bucket, and adding a day moves few other buckets.

Flags:

	--in DIR       the folder of bucket folders (local or s3://)
	--shards N     the number of shards (1 or more)
	--out FILE     where to write the plan, a path or an s3:// URL
	               (default: standard output)

Examples:

	backfill plan --in s3://ooni-data/canned --shards 64 --out s3://me/plan.json
	backfill run --plan s3://me/plan.json --out s3://me/ooids   # JOB_COMPLETION_INDEX picks the shard

EXIT STATUS

	0    the plan was written
	1    failure (the input cannot be listed)
	2    usage error
`

func runPlan(ctx context.Context, args []string, std stdio) error {
	fs := newFlagSet("plan", planHelp, std)
	var in, out string
	var shards int
	fs.StringVar(&in, "in", "", "")
	fs.StringVar(&out, "out", "", "")
	fs.IntVar(&shards, "shards", 0, "")
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return usagef("plan: unexpected argument %q", rest[0])
	case in == "":
		return usagef("plan: --in is required")
	case shards < 1:
		return usagef("plan: --shards must be 1 or more")
	}
	input, err := stamp.ResolveInput(ctx, in, nil)
	if err != nil {
		return usagef("plan: --in %v", err)
	}
	fsys, err := store.Open(ctx, input.Dir)
	if err != nil {
		return err
	}
	buckets, err := listBuckets(ctx, fsys, input.Buckets)
	if err != nil {
		return err
	}
	p, err := plan.New(input.Dir, buckets, shards)
	if err != nil {
		return err
	}
	if out == "" || out == "-" {
		_, err = std.out.Write(p.Marshal())
		return err
	}
	parent, base := store.Split(out)
	st, err := store.Open(ctx, parent)
	if err != nil {
		return err
	}
	return store.WriteFile(st, base, p.Marshal())
}

// listBuckets lists the bucket folders names of fsys, eight at a time.
func listBuckets(ctx context.Context, fsys store.Store, names []string) ([]plan.Bucket, error) {
	out := make([]plan.Bucket, len(names))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, n := range names {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			l, err := reader.List(fsys, n)
			if err != nil {
				return fmt.Errorf("bucket %s: %w", n, err)
			}
			out[i] = plan.Bucket{Name: n, Bytes: l.Bytes, Fingerprint: l.Fingerprint}
			return nil
		})
	}
	return out, g.Wait()
}

// readPlan reads and checks the plan at loc (for cmd's messages).
func readPlan(ctx context.Context, cmd, loc string) (plan.Plan, error) {
	f, err := store.OpenFile(ctx, loc)
	if err != nil {
		return plan.Plan{}, usagef("%s: --plan %v", cmd, err)
	}
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return plan.Plan{}, err
	}
	p, err := plan.Parse(data)
	if err != nil {
		return plan.Plan{}, usagef("%s: --plan %s: %v", cmd, loc, err)
	}
	return p, nil
}

// shardIndex is shard, or when it is negative JOB_COMPLETION_INDEX, checked
// against the plan and JOB_COMPLETION_COUNT.
func shardIndex(cmd string, p plan.Plan, shard int) (int, error) {
	if shard < 0 {
		idx, ok := os.LookupEnv("JOB_COMPLETION_INDEX")
		if !ok {
			return 0, usagef("%s: --plan needs --shard, or JOB_COMPLETION_INDEX in the environment", cmd)
		}
		var err error
		if shard, err = strconv.Atoi(idx); err != nil {
			return 0, usagef("%s: JOB_COMPLETION_INDEX=%q is not a shard number", cmd, idx)
		}
	}
	if n, ok := os.LookupEnv("JOB_COMPLETION_COUNT"); ok && n != strconv.Itoa(p.Shards) {
		return 0, usagef("%s: the plan has %d shards and JOB_COMPLETION_COUNT is %s: the Job's completions must be the plan's shards", cmd, p.Shards, n)
	}
	if shard < 0 || shard >= p.Shards {
		return 0, usagef("%s: shard %d is not one of the plan's 0..%d", cmd, shard, p.Shards-1)
	}
	return shard, nil
}

// shardOut is where shard i of a plan writes, under the job's output.
func shardOut(out string, i int) string { return store.Join(out, "shards", strconv.Itoa(i)) }

// planShard reads the plan at loc and returns it, the shard (from
// JOB_COMPLETION_INDEX when shard is negative) and its buckets, after
// checking that they did not change since planning.
func planShard(ctx context.Context, loc string, shard int) (plan.Plan, int, []string, error) {
	p, err := readPlan(ctx, "run", loc)
	if err != nil {
		return p, 0, nil, err
	}
	if shard, err = shardIndex("run", p, shard); err != nil {
		return p, 0, nil, err
	}
	names := p.Names(shard)
	fsys, err := store.Open(ctx, p.Input)
	if err != nil {
		return p, 0, nil, err
	}
	now, err := listBuckets(ctx, fsys, names)
	if err != nil {
		return p, 0, nil, err
	}
	want := map[string]string{}
	for _, b := range p.Buckets {
		want[b.Name] = b.Fingerprint
	}
	for _, b := range now {
		if b.Fingerprint != want[b.Name] {
			return p, 0, nil, fmt.Errorf("bucket %s of %s changed since the plan was made: make a new plan", b.Name, p.Input)
		}
	}
	return p, shard, names, nil
}

// writeManifest writes the report manifest of a shard's output: every
// report of its committed buckets, sorted by time, for check.
func writeManifest(ctx context.Context, out string) error {
	st, err := parquetfile.ReadState(out)
	if err != nil {
		return err
	}
	var h check.Header
	var entries []check.Entry
	for i, s := range st {
		if s.Status != stamped.StatusCommitted {
			continue
		}
		if i == 0 {
			h.Scheme = s.Meta.Scheme
		}
		h.Buckets = append(h.Buckets, s.Meta.Bucket)
		rows, err := parquetfile.ReadReports(store.Join(out, "reports", s.Meta.Bucket+".parquet"))
		if err != nil {
			return err
		}
		for _, r := range rows {
			entries = append(entries, check.Entry{TS: uint32(r.TS), Base: uint32(r.CounterBase), N: uint32(r.N),
				Textname: r.Textname, Bucket: s.Meta.Bucket, RejectedBy: r.RejectedBy})
		}
	}
	var b bytes.Buffer
	if err := check.Write(&b, h, entries); err != nil {
		return err
	}
	st2, err := store.Open(ctx, out)
	if err != nil {
		return err
	}
	return store.WriteFile(st2, manifestName, b.Bytes())
}

// manifestName is a shard output's report manifest.
const manifestName = "manifest.tsv"
