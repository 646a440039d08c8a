// Package status reads what an output holds, as status prints it: each
// bucket's state and counts, their sum, the records of the input's folders
// the last run did not read, and, given the input, what run --resume would
// still load and why.
package status

import (
	"context"
	"fmt"
	"github.com/backfill-dev/backfill/internal/cli"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/reader"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Bucket is a bucket's row of the status.
type Bucket struct {
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

// Todo is a bucket --resume would load.
type Todo struct {
	Bucket string `json:"bucket"`
	Why    string `json:"why"`
	// Replace is set for a bucket committed from another input: run
	// --resume refuses it, run --replace reloads it.
	Replace bool `json:"needs_replace,omitempty"`
}

// Output is what an output holds: its buckets, their counts and the
// records of the input folders its last run did not read.
type Output struct {
	Output    string `json:"output"`
	WriterPID int    `json:"writer_pid,omitempty"` // a run writing to a Parquet folder now
	Committed int    `json:"committed"`
	Failed    int    `json:"failed"`
	// Incomplete are buckets committed in the ledger one of whose files
	// is not there: run --resume writes them again.
	Incomplete int `json:"incomplete,omitempty"`
	stamped.Tally
	Buckets []Bucket `json:"buckets"`
	// Input are the records of the input's folders the last run did not
	// read; they count in the tally.
	Input []deadletter.Record `json:"input_dead_letters,omitempty"`
	// Unsettled says that a run stopped inside a settlement that
	// rewrites committed buckets (Parquet), when one did.
	Unsettled string `json:"unsettled,omitempty"`
	// Strays are the files of a Parquet output's folders that no
	// committed bucket holds: readers that glob a folder read them.
	Strays []string `json:"stray_files,omitempty"`
	// Resume lists what run --resume would still do, with --in.
	// Absent (null) without --in; empty when there is nothing to do.
	Resume []Todo `json:"resume"`
}

// Fill sums the states of the output's buckets.
func (rep *Output) Fill(states []stamped.State) {
	rep.Tally, rep.Buckets = stamped.NewTally(), []Bucket{}
	for _, st := range states {
		b := Bucket{Bucket: st.Meta.Bucket, Status: st.Status, Error: st.Error, Fingerprint: st.Meta.Fingerprint,
			CounterBits: st.Meta.Scheme.CounterBits, SHA1Offset: st.Meta.Scheme.SHA1Offset, KeyTable: st.Meta.Scheme.Table, NdxPolicy: st.Meta.NdxPolicy,
			Tally: stamped.NewTally(), Finished: st.Finished}
		b.Tally.Add(st.Counts)
		rep.Buckets = append(rep.Buckets, b)
		switch st.Status {
		case stamped.StatusIncomplete:
			rep.Incomplete++
			continue
		case stamped.StatusFailed:
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

// Resume lists the buckets of the input that run --resume would load:
// not committed, failed, or changed since; and those it would refuse,
// committed from another input than source (the input's identity, as run
// records it), which --replace reloads.
func Resume(ctx context.Context, in ingest.Input, source string, states []stamped.State) []Todo {
	byBucket := map[string]stamped.State{}
	for _, st := range states {
		byBucket[st.Meta.Bucket] = st
	}
	todo := []Todo{}
	for _, name := range in.Buckets {
		st, ok := byBucket[name]
		switch {
		case !ok:
			todo = append(todo, Todo{name, "not committed", false})
		case st.Status == stamped.StatusIncomplete:
			todo = append(todo, Todo{name, "its commit did not finish: " + st.Error, false})
		case st.Status != stamped.StatusCommitted:
			todo = append(todo, Todo{name, "its last load failed", false})
		case st.Meta.Source != "" && source != "" && st.Meta.Source != source:
			todo = append(todo, Todo{name, "committed from " + st.Meta.Source + ": run --resume refuses it (exit 1); with --replace it loads it from this input", true})
		default:
			b, err := reader.OpenIn(ctx, in.Dir, name, reader.Options{})
			if err != nil {
				todo = append(todo, Todo{name, "its folder cannot be read: " + err.Error(), false})
			} else if b.Fingerprint != st.Meta.Fingerprint {
				todo = append(todo, Todo{name, "its input changed since it was committed", false})
			}
		}
	}
	return todo
}

// WriteText writes the status as a table; withResume, what run --resume
// would still do.
func (rep *Output) WriteText(w io.Writer, withResume bool) {
	fmt.Fprintf(w, "output         %s\n", cli.Printable(rep.Output))
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
	if rep.Incomplete > 0 {
		fmt.Fprintf(w, "buckets        %d committed, %d failed, %d incomplete (a file absent: run --resume writes them again)\n", rep.Committed, rep.Failed, rep.Incomplete)
	} else {
		fmt.Fprintf(w, "buckets        %d committed, %d failed\n", rep.Committed, rep.Failed)
	}
	fmt.Fprintf(w, "reports        %d (that have IDs)\n", rep.Reports)
	fmt.Fprintf(w, "measurements   %d (that have IDs)\n", rep.Measurements)
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
			fmt.Fprintf(w, "  %-6s %s: %s\n", r.Kind, r.Reason, cli.Printable(r.Message))
		}
	}
	if rep.Unsettled != "" {
		fmt.Fprintf(w, "settlement     %s\n", rep.Unsettled)
	}
	if len(rep.Strays) > 0 {
		fmt.Fprintf(w, "\nstray files, held by no committed bucket (readers that glob their folder read them; move them out):\n")
		for _, f := range rep.Strays {
			fmt.Fprintf(w, "  %s\n", cli.Printable(f))
		}
	}
	if len(rep.Buckets) > 0 {
		fmt.Fprintf(w, "\n%-12s %-10s %10s %13s %8s %8s  %s\n", "BUCKET", "STATUS", "REPORTS", "MEASUREMENTS", "REJECTS", "NOTICES", "FINISHED")
		for _, b := range rep.Buckets {
			fmt.Fprintf(w, "%-12s %-10s %10d %13d %8d %8d  %s\n", b.Bucket, b.Status, b.Reports, b.Measurements, b.Rejects, b.Notices,
				b.Finished.Format(time.RFC3339))
			if b.Error != "" {
				fmt.Fprintf(w, "  error: %s\n", cli.Printable(b.Error))
			}
		}
	}
	if withResume {
		if len(rep.Resume) == 0 {
			fmt.Fprintf(w, "\nresume         nothing to do: every bucket of the input is committed from it\n")
			return
		}
		replace := 0
		for _, t := range rep.Resume {
			if t.Replace {
				replace++
			}
		}
		if replace > 0 {
			fmt.Fprintf(w, "\nresume         run --resume would refuse (exit 1): %s committed from another input; run --replace reloads %s from this one\n",
				buckets(replace), cli.Plural(replace, "it", "them"))
		} else {
			fmt.Fprintf(w, "\nresume         run --resume would load %s:\n", buckets(len(rep.Resume)))
		}
		for _, t := range rep.Resume {
			fmt.Fprintf(w, "  %-12s %s\n", t.Bucket, cli.Printable(t.Why))
		}
	}
}

func buckets(n int) string {
	if n == 1 {
		return "1 bucket"
	}
	return strconv.Itoa(n) + " buckets"
}
