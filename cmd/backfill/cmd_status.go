package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/reader"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
	"github.com/backfill-dev/backfill/pipeline/stamp"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

const statusHelp = `Usage: backfill status OUT [--in DIR] [--json]
       backfill status --sink postgres [--dsn URL] [--pg-schema NAME] [--in DIR] [--json]

Show what an output holds, from its ledger: the Parquet output folder OUT
of backfill run, or the tables of a PostgreSQL schema. Per bucket: its
status (committed, or failed with its error), the scheme it was made
under, its reports and measurements, and its rejects and notices; then
the rejects and notices of all buckets by reason. For a Parquet folder it
also says whether a run is writing to it now (and its PID).

With --in DIR (the input of the runs), it also says what
backfill run --resume would still do: the buckets of DIR that are not
committed, failed, or committed from other input (their files changed
since).

It reads and never writes; a run may go on meanwhile.

Flags:

	--sink NAME         parquet (default: OUT is a folder) or postgres
	--dsn URL           PostgreSQL connection string; the PG* environment
	                    variables fill in what it leaves out
	--pg-schema NAME    schema of the tables (default ` + pgcopy.DefaultSchema + `)
	--in DIR            the folder of bucket folders the runs read
	--json              one JSON object instead of the table

Examples:

	backfill status out
	backfill status out --in corpus --json
	backfill status --sink postgres --dsn postgres://me@db/ooni

EXIT STATUS

	0    the status was shown
	1    failure (the output cannot be read)
	2    usage error
`

// statusBucket is a bucket's row of the status.
type statusBucket struct {
	Bucket      string `json:"bucket"`
	Status      string `json:"status"`
	Error       string `json:"error,omitempty"`
	Fingerprint string `json:"input_fingerprint"`
	CounterBits int    `json:"counter_bits"`
	SHA1Offset  int    `json:"sha1_offset"`
	KeyTable    string `json:"key_table,omitempty"`
	NdxPolicy   string `json:"ndx_policy"`
	stamped.Tally
	Finished time.Time `json:"finished"`
}

// statusTodo is a bucket --resume would load.
type statusTodo struct {
	Bucket string `json:"bucket"`
	Why    string `json:"why"`
}

type statusOutput struct {
	Output    string `json:"output"`
	WriterPID int    `json:"writer_pid,omitempty"` // a run writing to a Parquet folder now
	Committed int    `json:"committed"`
	Failed    int    `json:"failed"`
	stamped.Tally
	Buckets []statusBucket `json:"buckets"`
	// Input are the records of the input's folders the last run did not
	// read; they count in the tally.
	Input []deadletter.Record `json:"input_dead_letters,omitempty"`
	// Resume lists what run --resume would still do, with --in.
	Resume []statusTodo `json:"resume,omitempty"`
}

// readStatus reads the state of the output: a Parquet folder (the one of
// rest) or a PostgreSQL schema; closeOut releases what it opened.
func readStatus(ctx context.Context, std cli.Stdio, sinkName string, rest []string, pf pgFlags) (rep statusOutput, states []stamped.State, closeOut func(), err error) {
	closeOut = func() {}
	if sinkName == "postgres" {
		s, err := pgcopy.Open(ctx, pf.options(std))
		if err != nil {
			return rep, nil, closeOut, err
		}
		if states, err = s.State(ctx); err == nil {
			rep.Input, err = s.InputDeadLetters(ctx)
		}
		if err != nil {
			s.Close()
			return rep, nil, closeOut, err
		}
		rep.Output = s.String()
		return rep, states, func() { s.Close() }, nil
	}
	out, err := location.Open(ctx, rest[0])
	if err != nil {
		return rep, nil, closeOut, err
	}
	if !store.IsDir(ctx, out, ".") {
		return rep, nil, closeOut, cli.Usagef("status: %s is not a folder", rest[0])
	}
	if states, err = parquetfile.ReadState(ctx, out); err != nil {
		return rep, nil, closeOut, err
	}
	if rep.Input, err = parquetfile.ReadInputDeadLetters(ctx, out); err != nil {
		return rep, nil, closeOut, err
	}
	rep.Output = "Parquet in " + absPath(rest[0])
	if pid, locked := parquetfile.Holder(ctx, out); locked {
		rep.WriterPID = max(pid, -1)
	}
	return rep, states, closeOut, nil
}

func runStatus(ctx context.Context, args []string, std cli.Stdio) error {
	fs := cli.NewFlagSet("status", statusHelp, std)
	var sinkName, in string
	var asJSON bool
	var pf pgFlags
	pf.register(fs, false)
	fs.StringVar(&sinkName, "sink", "parquet", "")
	fs.StringVar(&in, "in", "", "")
	fs.BoolVar(&asJSON, "json", false, "")
	rest, err := cli.ParseFlags(fs, args)
	if err != nil {
		return err
	}
	pgOnly := cli.SetFlags(fs, "dsn", "pg-schema")
	switch {
	case sinkName != "parquet" && sinkName != "postgres":
		return cli.Usagef("status: --sink must be parquet or postgres")
	case sinkName == "parquet" && len(rest) != 1:
		return cli.Usagef("status: name one output folder (or --sink postgres)")
	case sinkName == "parquet" && len(pgOnly) > 0:
		return cli.Usagef("status: %s %s for --sink postgres", strings.Join(pgOnly, ", "), cli.Plural(len(pgOnly), "is", "are"))
	case sinkName == "postgres" && len(rest) > 0:
		return cli.Usagef("status: with --sink postgres the output is --dsn and --pg-schema, not %q", rest[0])
	}
	var input stamp.Input
	if in != "" {
		fsys, err := location.Open(ctx, in)
		if err != nil {
			return cli.Usagef("status: --in %v", err)
		}
		if input, err = stamp.ResolveInput(ctx, fsys, nil); err != nil {
			return inputError("status", err)
		}
	}
	rep, states, closeOut, err := readStatus(ctx, std, sinkName, rest, pf)
	if err != nil {
		return err
	}
	defer closeOut()
	rep.fill(states)
	if in != "" {
		rep.Resume = resumeTodo(ctx, input, states)
	}
	if asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(std.Out, "%s\n", b)
		return nil
	}
	rep.print(std.Out, in != "")
	return nil
}

func (rep *statusOutput) fill(states []stamped.State) {
	rep.Tally, rep.Buckets = stamped.NewTally(), []statusBucket{}
	for _, st := range states {
		b := statusBucket{Bucket: st.Meta.Bucket, Status: st.Status, Error: st.Error, Fingerprint: st.Meta.Fingerprint,
			CounterBits: st.Meta.Scheme.CounterBits, SHA1Offset: st.Meta.Scheme.SHA1Offset, KeyTable: st.Meta.Scheme.Table, NdxPolicy: st.Meta.NdxPolicy,
			Tally: stamped.NewTally(), Finished: st.Finished}
		b.Tally.Add(st.Counts)
		rep.Buckets = append(rep.Buckets, b)
		if st.Status != stamped.StatusCommitted {
			rep.Failed++
			continue
		}
		rep.Committed++
		rep.Tally.Add(st.Counts)
	}
	c := stamped.NewCounts()
	for _, r := range rep.Input {
		c.Add(r)
	}
	rep.Tally.Add(c)
}

// resumeTodo lists the buckets of the input that run --resume would load:
// not committed, failed, or committed from other input.
func resumeTodo(ctx context.Context, in stamp.Input, states []stamped.State) []statusTodo {
	byBucket := map[string]stamped.State{}
	for _, st := range states {
		byBucket[st.Meta.Bucket] = st
	}
	todo := []statusTodo{}
	for _, name := range in.Buckets {
		st, ok := byBucket[name]
		switch {
		case !ok:
			todo = append(todo, statusTodo{name, "not committed"})
		case st.Status != stamped.StatusCommitted:
			todo = append(todo, statusTodo{name, "its last load failed"})
		default:
			b, err := reader.OpenIn(ctx, in.Dir, name, reader.Options{})
			if err != nil {
				todo = append(todo, statusTodo{name, "its folder cannot be read: " + err.Error()})
			} else if b.Fingerprint != st.Meta.Fingerprint {
				todo = append(todo, statusTodo{name, "its input changed since it was committed"})
			}
		}
	}
	return todo
}

func (rep *statusOutput) print(w io.Writer, withResume bool) {
	fmt.Fprintf(w, "output         %s\n", rep.Output)
	switch {
	case rep.WriterPID > 0:
		fmt.Fprintf(w, "writer         a run (pid %d) is writing to it now\n", rep.WriterPID)
	case rep.WriterPID < 0:
		fmt.Fprintf(w, "writer         a run is writing to it now\n")
	}
	schemes := map[string]bool{}
	for _, b := range rep.Buckets {
		s := ooid.Scheme{CounterBits: b.CounterBits, SHA1Offset: b.SHA1Offset, Table: b.KeyTable}
		schemes[strings.TrimPrefix(s.String(), "ooid-backfill ")+" ndx="+b.NdxPolicy] = true
	}
	for _, s := range slices.Sorted(maps.Keys(schemes)) {
		fmt.Fprintf(w, "scheme         %s\n", s)
	}
	fmt.Fprintf(w, "buckets        %d committed, %d failed\n", rep.Committed, rep.Failed)
	fmt.Fprintf(w, "reports        %d\n", rep.Reports)
	fmt.Fprintf(w, "measurements   %d\n", rep.Measurements)
	fmt.Fprintf(w, "rejects        %d\n", rep.Rejects)
	for _, r := range slices.Sorted(maps.Keys(rep.RejectsByReason)) {
		fmt.Fprintf(w, "  %-20s %d\n", r, rep.RejectsByReason[r])
	}
	fmt.Fprintf(w, "notices        %d\n", rep.Notices)
	for _, r := range slices.Sorted(maps.Keys(rep.NoticesByReason)) {
		fmt.Fprintf(w, "  %-20s %d\n", r, rep.NoticesByReason[r])
	}
	if len(rep.Input) > 0 {
		fmt.Fprintf(w, "\ninput folders not read by the last run:\n")
		for _, r := range rep.Input {
			fmt.Fprintf(w, "  %-6s %s: %s\n", r.Kind, r.Reason, r.Message)
		}
	}
	if len(rep.Buckets) > 0 {
		fmt.Fprintf(w, "\n%-12s %-10s %10s %13s %8s %8s  %s\n", "BUCKET", "STATUS", "REPORTS", "MEASUREMENTS", "REJECTS", "NOTICES", "FINISHED")
		for _, b := range rep.Buckets {
			fmt.Fprintf(w, "%-12s %-10s %10d %13d %8d %8d  %s\n", b.Bucket, b.Status, b.Reports, b.Measurements, b.Rejects, b.Notices,
				b.Finished.Format(time.RFC3339))
			if b.Error != "" {
				fmt.Fprintf(w, "  error: %s\n", b.Error)
			}
		}
	}
	if withResume {
		if len(rep.Resume) == 0 {
			fmt.Fprintf(w, "\nresume         nothing to do: every bucket of the input is committed from it\n")
			return
		}
		fmt.Fprintf(w, "\nresume         run --resume would load %s:\n", cli.Count(len(rep.Resume), "bucket", "buckets"))
		for _, t := range rep.Resume {
			fmt.Fprintf(w, "  %-12s %s\n", t.Bucket, t.Why)
		}
	}
}
