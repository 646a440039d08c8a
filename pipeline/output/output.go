// Package output opens the sink a command names: a Parquet folder, a
// PostgreSQL schema, or a PostgreSQL schema under a one-off --bulk load,
// with what the command says of it (where it goes, where its records go).
package output

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
)

// Config names the output.
type Config struct {
	Postgres bool           // a PostgreSQL schema, else a Parquet folder
	Folder   store.Store    // the Parquet folder
	PG       pgcopy.Options // the PostgreSQL schema
	Bulk     bool           // a one-off load into an empty schema
	// LockWait is how long a Parquet output held by another writer is
	// waited for (0: refused at once).
	LockWait time.Duration
	// Waiting, if not nil, is told who holds the Parquet output's lock
	// when a wait for it begins.
	Waiting func(*store.LockedError)
}

// Output is an opened sink, with what a command says of it.
type Output struct {
	Sink        sink.Sink
	Finish      func(context.Context) error // nil, or what completes a bulk load
	DeadLetters string                      // where the records go, for messages
	InputDead   string                      // where the input's own records go
	Dest        string                      // where the output goes, for the first line
	// Cleared is how many unfinished files a run that died had left in
	// the Parquet folder, and Open removed (in ClearedFrom).
	Cleared     int
	ClearedFrom string
}

// Open opens the sink cfg names.
func Open(ctx context.Context, cfg Config) (Output, error) {
	if !cfg.Postgres {
		ps, err := parquetfile.OpenWait(ctx, cfg.Folder, cfg.LockWait, cfg.Waiting)
		if err != nil {
			return Output{}, err
		}
		return Output{Sink: ps, DeadLetters: cfg.Folder.Where("dead-letters") + "/", InputDead: cfg.Folder.Where(parquetfile.InputDeadLetters),
			Dest: "Parquet in " + store.Abs(cfg.Folder.Where(".")), Cleared: ps.Cleared, ClearedFrom: cfg.Folder.Where(store.TmpDir)}, nil
	}
	o := Output{DeadLetters: "table " + pgx.Identifier{cfg.PG.Schema, "dead_letters"}.Sanitize(),
		InputDead: "table " + pgx.Identifier{cfg.PG.Schema, "input_dead_letters"}.Sanitize()}
	if cfg.Bulk {
		bs, err := pgcopy.OpenBulk(ctx, cfg.PG)
		if err != nil {
			return Output{}, err
		}
		o.Sink, o.Finish, o.Dest = bs, bs.Finish, bs.String()
		return o, nil
	}
	ps, err := pgcopy.Open(ctx, cfg.PG)
	if err != nil {
		return Output{}, err
	}
	o.Sink, o.Dest = ps, ps.String()
	return o, nil
}
