// Package sink defines where a run puts its output: per bucket, the
// measurements with their OOIDs, the reports, and the dead-letter
// records, committed atomically. Backends live in sub-packages named after
// what they write to: parquetfile (the embedded default), pgcopy
// (PostgreSQL) and sinktest (in memory, for tests). A sink is either a
// Rewriter, whose collision verdicts the run settles in memory, or
// SelfSettling; package load picks the Settler of each.
package sink

import (
	"context"
	"errors"

	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Sink stores buckets. A run calls it from one goroutine, unless it is
// [Concurrent].
//
// State, Begin and Close are what every sink does. What only some sinks
// can do, each says by an optional interface, which the run finds by type
// assertion:
//
//   - [SelfSettling] (PostgreSQL): the sink settles the collision verdicts
//     (docs/design.md §3) itself as it commits, against every run's rows.
//     A Parquet folder cannot see what other runs commit, so it cannot.
//   - [Rewriter] (Parquet, the --bulk load, sinktest): the run settles the
//     verdicts in memory, and the sink lists its buckets' reports and
//     rewrites a bucket whose verdicts change. A SelfSettling sink never
//     needs it; every sink is one or the other.
//   - [Concurrent] (PostgreSQL): a SelfSettling sink that commits several
//     buckets at once, on connections of its own. A Rewriter commits one
//     at a time: the run's verdicts depend on the order.
//   - [Zoned] (Parquet): a Rewriter that keeps each committed bucket's
//     zone (the days its reports fall on), so that the run reads only the
//     committed buckets its own reports can reach. The in-memory sink and
//     the --bulk load have every bucket read.
//   - [InputRecorder] (Parquet, PostgreSQL): keeps the input's own dead
//     letters (its folders that are not buckets) for status; the
//     in-memory test sink has no status to give.
//   - [FailureRecorder] (Parquet): keeps a record of a bucket whose load
//     failed. PostgreSQL marks the bucket failed in its ledger itself when
//     its commit fails, so the run need not tell it.
type Sink interface {
	// State reads the ledger: every bucket the output holds, committed
	// or failed, with its Meta and counts, by bucket. --resume skips the
	// buckets committed with the same Meta (fingerprint, scheme, policy)
	// and reports their counts.
	State(ctx context.Context) ([]stamped.State, error)
	// Begin starts writing a bucket. Nothing is visible until Commit.
	Begin(ctx context.Context, m stamped.Meta) (BucketWriter, error)
	Close() error
}

// SelfSettling is a Sink that settles the collision verdicts itself, when
// it commits a bucket, against everything committed before by any run:
// its BucketWriter receives every report with RejectedBy unset, and
// Commit's counts leave out the reports it rejected.
type SelfSettling interface {
	Sink
	SettlesCollisions()
}

// Concurrent is a SelfSettling Sink that commits several buckets at once:
// Begin, State, and its writers' methods are safe for concurrent use,
// Commits() buckets at a time (a further Commit waits for one to end).
// The run then commits that many buckets side by side; the sink's
// verdicts do not depend on the order buckets commit in.
type Concurrent interface {
	SelfSettling
	Commits() int
}

// Rewriter is a Sink whose collision verdicts the run settles: it lists
// its committed buckets' reports and rewrites a bucket when a report's
// verdict changes.
type Rewriter interface {
	Sink
	// Buckets lists the committed buckets, in order.
	Buckets(ctx context.Context) ([]string, error)
	// Manifest returns how a committed bucket was made and its reports,
	// rejected ones included, in the order they were written.
	Manifest(ctx context.Context, bucket string) (stamped.Meta, []stamped.ManifestEntry, error)
	// Reassign changes the collision verdicts of reports of a committed
	// bucket, atomically: a report that becomes rejected loses its
	// measurement rows and gets a collision dead letter; one that keeps its
	// IDs again gets them back. The result is what a run would have
	// committed with those verdicts. The scheme is the bucket's, with its
	// keys when it is keyed (a ledger records only its name).
	Reassign(ctx context.Context, scheme ooid.Scheme, bucket string, verdicts []stamped.Verdict) error
}

// Zoned is a Rewriter that knows the zone of each committed bucket (the
// days its reports fall on, stamped.Zone) without reading its reports:
// two reports can share an ID only when they share a day, so a run reads
// only the committed buckets whose zone meets that of a bucket it
// settles.
type Zoned interface {
	Rewriter
	// Zones returns the zone of every bucket Buckets lists; nil for one
	// whose ledger records none (an older version wrote it), which can
	// reach any other.
	Zones(ctx context.Context) (map[string]*stamped.Zone, error)
	// Check checks a committed bucket the run keeps as it is (--resume)
	// and may never read: it reads and checks the bucket whole unless
	// nothing of it changed since it was last checked, as the sink can
	// tell without reading it.
	Check(ctx context.Context, bucket string) error
}

// Settling is what a settlement is about to change in the committed
// buckets before the bucket it settles commits: kept across a kill by a
// Journal, so that the next run completes it or undoes it, and names
// what it withdrew.
type Settling struct {
	// Bucket is the bucket being settled; "" at the end of a run.
	Bucket  string           `json:"bucket"`
	Changes []SettlingChange `json:"changes"`
}

// SettlingChange is a committed report's verdict before and after.
type SettlingChange struct {
	Bucket   string `json:"bucket"`
	Textname string `json:"textname"`
	N        uint32 `json:"measurements"`
	Before   string `json:"before"` // the winner, "" for none
	After    string `json:"after"`
}

// Journal is a Rewriter that keeps a Settling until the settlement is
// done: written before the first committed bucket changes, removed at the
// end of the writer, once it has named the withdrawals it made. Beside
// it, a copy of each committed bucket as it was before the journal's
// first change to it (Keep), which Restore puts back when a writer that
// stopped left the bucket half rewritten: a bucket the writer has no
// input of (one a load settles against) is never lost.
type Journal interface {
	Pending(ctx context.Context) (*Settling, error) // nil when none
	Record(ctx context.Context, s *Settling) error
	// Keep copies the committed bucket, unless a whole copy is kept.
	Keep(ctx context.Context, bucket string) error
	// Restore puts back each kept bucket the output does not hold whole
	// (its copy checked against the copy's ledger entry first), and
	// returns them.
	Restore(ctx context.Context) ([]string, error)
	// Clear removes the copies, then the journal.
	Clear(ctx context.Context) error
}

// StrayFinder is a Sink that names the files of its output that no
// committed bucket holds (a Parquet folder: readers that glob it read
// them), as it last listed them.
type StrayFinder interface {
	Strays(ctx context.Context) ([]string, error)
}

// InputRecorder is a Sink that keeps the dead-letter records of the
// input itself (its folders that are not read), beside the buckets'. A
// run calls RecordInput once, before any bucket; it replaces what an
// earlier run recorded, and status reads it.
type InputRecorder interface {
	Sink
	RecordInput(ctx context.Context, recs []deadletter.Record) error
}

// ErrSkipped is returned (wrapped) by Commit when the sink left the bucket
// as it was: another run holds it, or committed it meanwhile.
var ErrSkipped = errors.New("bucket skipped")

// BucketWriter receives one bucket's output in a deterministic order: the
// reports and the dead letters as they were read, then the collision dead
// letters of the rejected reports, by textname.
type BucketWriter interface {
	Report(r *stamped.Report) error
	DeadLetter(d deadletter.Record) error
	// Commit makes the bucket's output visible at once, replacing any
	// earlier output of the bucket, and returns the counts committed: c,
	// less the reports a sink that settles collisions itself rejected.
	Commit(ctx context.Context, c stamped.Counts) (stamped.Counts, error)
	// Abort drops what was written; it is safe after Commit (a no-op).
	Abort() error
}

// FailureRecorder is a Sink that keeps a record of a bucket whose load
// failed, for the status command; the next commit of the bucket clears it.
type FailureRecorder interface {
	RecordFailure(ctx context.Context, m stamped.Meta, failure error)
}
