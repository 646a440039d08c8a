package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/scaleout"
)

func runPlan(ctx context.Context, args []string, std cli.Stdio) error {
	fs := newFlags("plan", std)
	var in, out string
	var shards int
	fs.StringVar(&in, "in", "", "the folder of bucket folders `DIR` (local or s3://)")
	fs.StringVar(&out, "out", "", "where to write the plan, a path or an s3:// URL `FILE` (default: standard output)")
	fs.IntVar(&shards, "shards", 0, "the number of shards `N` (1 to 100000)")
	rest, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(rest) > 0:
		return cli.Usagef("plan: unexpected argument %q", rest[0])
	case in == "":
		return cli.Usagef("plan: --in is required")
	case shards < 1 || shards > scaleout.MaxShards:
		return cli.Usagef("plan: --shards must be 1 to %d (a Kubernetes Indexed Job runs at most that many completions)", scaleout.MaxShards)
	}
	fsys, err := location.Open(ctx, in)
	if err != nil {
		return cli.Usagef("plan: --in %v", err)
	}
	input, err := ingest.ResolveInput(ctx, fsys, nil)
	if err != nil {
		return inputError("plan", err)
	}
	buckets, err := scaleout.SizeBuckets(ctx, input.Dir, input.Buckets)
	if err != nil {
		return err
	}
	p, err := scaleout.NewPlan(store.Identity(input.Dir.Where(".")), buckets, shards)
	if err != nil {
		return err
	}
	p.InputRecords = input.Records()
	for _, m := range input.Misnamed {
		fmt.Fprintf(std.Err, "backfill: reject: %s; recorded in the plan, check counts it\n", cli.Printable(m.Say(input.Dir)))
	}
	if out == "" || out == "-" {
		_, err = std.Out.Write(p.Marshal())
		return err
	}
	parent, base := store.Split(out)
	st, err := location.Open(ctx, parent)
	if err != nil {
		return err
	}
	return store.WriteFile(ctx, st, base, p.Marshal())
}

// readPlan reads and checks the plan at loc (for cmd's messages).
func readPlan(ctx context.Context, cmd, loc string) (scaleout.Plan, error) {
	f, err := location.OpenFile(ctx, loc)
	if err != nil {
		return scaleout.Plan{}, cli.Usagef("%s: --plan %v", cmd, err)
	}
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return scaleout.Plan{}, err
	}
	p, err := scaleout.ParsePlan(data)
	if err != nil {
		return scaleout.Plan{}, cli.Usagef("%s: --plan %s: %v", cmd, loc, err)
	}
	return p, nil
}

// shardIndex is the shard of the plan p for cmd: shard, or
// JOB_COMPLETION_INDEX when it is negative.
func shardIndex(cmd string, p scaleout.Plan, shard int) (int, error) {
	i, err := p.Shard(shard, os.LookupEnv)
	if err != nil {
		return 0, cli.Usagef("%s: %v", cmd, err)
	}
	return i, nil
}

// planShard reads the plan at loc and returns it, the shard (from
// JOB_COMPLETION_INDEX when shard is negative), its buckets and the
// plan's input, after checking that they did not change since planning.
func planShard(ctx context.Context, loc string, shard int) (scaleout.Plan, int, []string, store.Store, error) {
	p, err := readPlan(ctx, "run", loc)
	if err != nil {
		return p, 0, nil, nil, err
	}
	if shard, err = shardIndex("run", p, shard); err != nil {
		return p, 0, nil, nil, err
	}
	in, err := location.Open(ctx, p.Input)
	if err != nil {
		return p, 0, nil, nil, err
	}
	if err := scaleout.Unchanged(ctx, p, in, shard); errors.Is(err, scaleout.ErrStale) {
		return p, 0, nil, nil, cli.Usagef("run: %v", err)
	} else if err != nil {
		return p, 0, nil, nil, err
	}
	return p, shard, p.Names(shard), in, nil
}
