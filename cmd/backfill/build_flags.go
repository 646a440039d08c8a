package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/backfill-dev/backfill/internal/units"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy/pgschema"
)

// buildFlags are the flags of how a bulk load builds its indexes at the
// end: the session's maintenance_work_mem and
// max_parallel_maintenance_workers.
type buildFlags struct {
	memory  buildMemory
	workers int
}

func (b *buildFlags) register(fs *flag.FlagSet) {
	fs.Var(&b.memory, "build-memory", "with --bulk, the server's memory `M` for building each index at the end (its session's maintenance_work_mem): auto (1.5 times the measurements table, at most 1GiB, never below the server's setting), server (the server's setting), or a size such as 512MiB")
	fs.IntVar(&b.workers, "build-workers", -1, "with --bulk, the server's processes `N` beside the one building each index (max_parallel_maintenance_workers): 0 builds in one process, the quicker on a server with one core, and the default leaves the server's setting")
}

// build is the pgschema.Build of the flags.
func (b *buildFlags) build() pgschema.Build {
	out := pgschema.Build{Memory: b.memory.bytes}
	if b.workers >= 0 {
		out.Workers = &b.workers
	}
	return out
}

// buildMemory is --build-memory: pgschema.AutoMemory, ServerMemory or a
// size in bytes.
type buildMemory struct{ bytes int64 }

func (m *buildMemory) String() string {
	switch m.bytes {
	case pgschema.AutoMemory:
		return "auto"
	case pgschema.ServerMemory:
		return "server"
	}
	s := units.Size(m.bytes)
	return s.String()
}

func (m *buildMemory) Set(s string) error {
	switch strings.ToLower(s) {
	case "auto":
		m.bytes = pgschema.AutoMemory
		return nil
	case "server":
		m.bytes = pgschema.ServerMemory
		return nil
	}
	n, err := units.Parse(s)
	switch {
	case err != nil:
		return fmt.Errorf("auto, server or a size such as 512MiB: %w", err)
	case n < 1<<20:
		return fmt.Errorf("%s: PostgreSQL takes at least 1MiB", s)
	}
	m.bytes = n
	return nil
}
