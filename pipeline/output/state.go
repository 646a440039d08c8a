package output

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
	"github.com/backfill-dev/backfill/pipeline/stamped"
	"github.com/backfill-dev/backfill/pipeline/status"
)

// ErrNotFolder is the error of a Parquet output that is not a folder.
var ErrNotFolder = errors.New("not a folder")

// ReadState reads what the output of cfg holds, for status: its buckets'
// states and the input's own records; for a Parquet folder also the PID
// of a run writing to it now. It takes no lock and writes nothing.
func ReadState(ctx context.Context, cfg Config) (rep status.Output, states []stamped.State, err error) {
	if cfg.Postgres {
		s, err := pgcopy.Open(ctx, cfg.PG)
		if err != nil {
			return rep, nil, err
		}
		if states, err = s.State(ctx); err == nil {
			rep.Input, err = s.InputDeadLetters(ctx)
		}
		if err != nil {
			return rep, nil, errors.Join(err, s.Close())
		}
		rep.Output = s.String()
		_ = s.Close() // the states are read; a connection ended badly changes nothing
		return rep, states, nil
	}
	switch st, err := cfg.Folder.Stat(ctx, "."); {
	case store.Failed(err):
		return rep, nil, err // the store failed (a refusal, the network): said as it is
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return rep, nil, err
	case err != nil || !st.IsDir():
		return rep, nil, ErrNotFolder
	}
	if !store.IsDir(ctx, cfg.Folder, "ledger") {
		_, err := parquetfile.ReadState(ctx, cfg.Folder) // its error says what the folder is not
		return rep, nil, err
	}
	sv, err := parquetfile.Survey(ctx, cfg.Folder)
	if err != nil {
		return rep, nil, err
	}
	states, rep.Strays = sv.States, sv.Strays
	for i, st := range states {
		if absent := sv.Absent[st.Meta.Bucket]; len(absent) > 0 && st.Status == stamped.StatusCommitted {
			states[i].Status = stamped.StatusIncomplete
			states[i].Error = (&parquetfile.AbsentError{Bucket: st.Meta.Bucket, Files: absent}).Error()
		}
	}
	if rep.Input, err = parquetfile.ReadInputDeadLetters(ctx, cfg.Folder); err != nil {
		return rep, nil, err
	}
	rep.Output = "Parquet in " + store.Abs(cfg.Folder.Where("."))
	pid, locked := parquetfile.Holder(ctx, cfg.Folder)
	if locked {
		rep.WriterPID = max(pid, -1)
	}
	if j, err := parquetfile.ReadSettling(ctx, cfg.Folder); err != nil {
		rep.Unsettled = err.Error()
	} else if j != nil {
		rep.Unsettled = unsettled(j, locked)
	}
	return rep, states, nil
}

// unsettled says what the journal of a settlement holds: under way while
// a writer holds the output, else left by one that stopped.
func unsettled(j *sink.Settling, locked bool) string {
	buckets := map[string]bool{}
	for _, c := range j.Changes {
		buckets[c.Bucket] = true
	}
	names := slices.Sorted(maps.Keys(buckets))
	what := fmt.Sprintf("the verdicts of %d %s in %s %s (%s)", len(j.Changes), plural(len(j.Changes), "report", "reports"),
		plural(len(names), "bucket", "buckets"), strings.Join(names, ", "), parquetfile.SettlingName)
	if locked {
		return "under way: the writer that holds the output is changing " + what
	}
	return "unfinished: a writer stopped while it changed " + what + "; the next run or load completes it, or undoes it, and names what it withdrew"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
