// Package pgcopy is the PostgreSQL sink: it loads each bucket in one
// transaction with binary COPY (pgx v5), records it in a job ledger, and
// settles collision verdicts inside that transaction against everything
// committed before, by any run on any machine.
//
// # One bucket, one transaction
//
// Commit takes the bucket's advisory lock (another run loading the bucket
// makes it wait, or skip with Options.SkipLocked), removes the bucket's
// earlier rows, COPYs the reports, the measurements and the dead letters,
// takes the schema's verdict lock, checks the collision verdicts, marks the
// ledger and commits. A lost connection or a server restart rolls the
// bucket back; Commit reconnects and retries, a bounded number of times
// with doubling waits, and otherwise fails with the last error.
//
// The verdict lock serialises the part of bucket transactions that reads
// and writes the collision state. The rows are written ahead of it, in a
// savepoint, with the verdicts the bucket's reports give each other, so
// Options.Connections buckets (and other runs) COPY at once; under the
// lock the bucket only checks that no committed report of another bucket
// collides with its own. When one does, or an ID of the bucket was taken
// meanwhile, the bucket goes back to the savepoint and is settled under the
// lock: the committed reports that share a timestamp with the bucket's are
// found with the btree on ts, and those whose IDs overlap are compared by
// textname: of two, the one that sorts first keeps its IDs
// (docs/design.md §3), whichever was loaded first. When a new report wins,
// the committed loser, in whatever bucket, loses its measurement rows in
// the same transaction and gets its collision dead letter. The primary key
// on ooid makes the database refuse any two measurements with one ID,
// should the code miss an overlap.
//
// # Bulk loads
//
// Options.Bulk loads into tables without their indexes and constraints
// (the measurements' primary key too: building it at the end costs the
// server less than keeping it up) and builds them at Finish, for one-off
// migrations into an empty schema. The run then
// settles the collision verdicts itself (the sink is a sink.Rewriter), as
// for Parquet; the end state is that of the per-bucket path.
package pgcopy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/internal/pgnet"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/sink"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy/pgschema"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Options say where and how to load.
type Options struct {
	// DSN is a PostgreSQL URL or keyword/value string; the PG* environment
	// variables fill in what it leaves out (all of it when empty).
	DSN string
	// Schema holds the tables; pgschema.Default when empty.
	Schema string
	// CreateSchema creates the tables where they are missing.
	CreateSchema bool
	// Retries is how many times a bucket is tried again after a lost
	// connection or a server restart; RetryWait is the first wait, doubled
	// each time up to MaxRetryWait.
	Retries                 int
	RetryWait, MaxRetryWait time.Duration
	// SkipLocked skips a bucket another run is loading, instead of waiting
	// for it.
	SkipLocked bool
	// Resume skips, once its lock is taken, a bucket another run has
	// committed meanwhile with the same input and scheme.
	Resume bool
	// Bulk loads into an empty schema with the indexes and constraints
	// built at Finish.
	Bulk bool
	// Build is how a bulk load builds them: the session's memory and
	// parallelism for the builds (the zero Build sizes the memory to the
	// data and leaves the server's parallelism).
	Build pgschema.Build
	// Connections is how many buckets the sink commits at once, each in a
	// transaction on a connection of its own; DefaultConnections when 0.
	// A bulk load uses one.
	Connections int
	// Silence bounds how long the server may say nothing while the sink
	// waits on it (from the first byte sent after its last answer): past
	// it, a probe on a connection of its own asks the server whether the
	// session is at work (pg_stat_activity), and an attempt whose session
	// is not, or whose probe gets no answer within Silence either, is
	// dropped with its connection and tried again (Retries). A load that
	// the server is working on is never cut, however long it takes; a
	// server, proxy or network gone silent for good ends the run within
	// a few Silences per try. Connecting is bounded by it too.
	// DefaultSilence when 0.
	Silence time.Duration
	// NoWithdraw refuses to commit a bucket that would take the IDs of a
	// report that another run committed (a *sink.WithdrawError, the
	// bucket's transaction rolled back); without it they are withdrawn,
	// and Withdrawn lists them.
	NoWithdraw bool
	// Log receives progress messages (waits, retries, verdict changes in
	// other buckets); nil discards them.
	Log func(format string, args ...any)
	// Progress receives what only says how far a long step is (a bulk
	// load's indexes being built); nil discards it (-q).
	Progress func(format string, args ...any)
}

// Defaults for Options.
const (
	DefaultRetries      = 5
	DefaultRetryWait    = time.Second
	DefaultMaxRetryWait = 30 * time.Second
	DefaultConnections  = 2
	DefaultSilence      = 30 * time.Second
	// serverIdle is how long the server lets a session wait on this
	// client (idle, or idle in a transaction) before it ends it: a session
	// the network cut off from us gives back its locks.
	serverIdle = 10 * time.Minute
)

// Sink loads buckets into PostgreSQL. Its State and its writers' Commit
// may be called from Options.Connections goroutines at once: each call
// takes a connection of its own from the sink's slots.
type Sink struct {
	opt    Options
	cfg    *pgx.ConnConfig
	conn   *pgx.Conn   // the first connection, opened by Open
	more   []*pgx.Conn // the others, opened when first used
	slots  chan **pgx.Conn
	schema string
	secret string // the password, kept out of every message
	// zombies are the server sessions of connections dropped after a
	// timeout, which the next connection ends (pg_terminate_backend).
	zmu     sync.Mutex
	zombies map[uint32]bool
	q       func(table string) string
	// wmu guards mine, the buckets this sink committed, each with the
	// reports that kept their IDs in the version committed before it
	// (IDs published before the run), and withdrawn, the reports whose
	// published IDs its commits withdrew.
	wmu       sync.Mutex
	mine      map[string]map[string]bool
	withdrawn []sink.Withdrawal
	// verdict, when set (by this package's tests), is told each probe's
	// finding that a session is not at work (or the probe's failure), and
	// whether it was set aside because the answer came during the probe.
	verdict func(st session, setAside bool, probe error)
}

var (
	_ sink.SelfSettling  = (*Sink)(nil)
	_ sink.Concurrent    = (*Sink)(nil)
	_ sink.InputRecorder = (*Sink)(nil)
	_ sink.Withdrawer    = (*Sink)(nil)
	_ sink.BucketWriter  = (*bucketWriter)(nil)
)

// SettlesCollisions implements sink.SelfSettling: Commit settles the
// verdicts in the bucket's transaction.
func (*Sink) SettlesCollisions() {}

// Commits implements sink.Concurrent: how many buckets the sink commits at
// once.
func (s *Sink) Commits() int { return cap(s.slots) }

// Open connects and checks (or, with CreateSchema, creates) the schema.
func Open(ctx context.Context, opt Options) (*Sink, error) {
	if opt.Schema == "" {
		opt.Schema = pgschema.Default
	}
	if err := pgschema.CheckName(opt.Schema); err != nil {
		return nil, err
	}
	if opt.Retries < 0 {
		opt.Retries = 0
	}
	if opt.RetryWait <= 0 {
		opt.RetryWait = DefaultRetryWait
	}
	if opt.MaxRetryWait < opt.RetryWait {
		opt.MaxRetryWait = max(DefaultMaxRetryWait, opt.RetryWait)
	}
	if opt.Log == nil {
		opt.Log = func(string, ...any) {}
	}
	if opt.Progress == nil {
		opt.Progress = func(string, ...any) {}
	}
	if opt.Silence <= 0 {
		opt.Silence = DefaultSilence
	}
	cfg, err := pgx.ParseConfig(opt.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres: the connection string does not parse: %s", pgnet.Redact(err.Error(), opt.DSN))
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = "backfill"
	cfg.DialFunc = pgnet.Dial
	// A session the network cut off from us ends on the server's side too,
	// and so gives back its locks: the server ends a session that waits
	// on us longer than serverIdle, inside a transaction or not.
	ms := strconv.FormatInt(max(serverIdle, opt.Silence).Milliseconds(), 10)
	cfg.RuntimeParams["idle_in_transaction_session_timeout"] = ms
	cfg.RuntimeParams["idle_session_timeout"] = ms
	// And the server finds a client the network lost as the client finds
	// the server (a COPY waiting for data is neither idle nor in a
	// statement the server can time out).
	pgnet.ServerKeepalives(cfg.RuntimeParams)
	if opt.Connections <= 0 {
		opt.Connections = DefaultConnections
	}
	if opt.Bulk {
		opt.Connections = 1
	}
	s := &Sink{opt: opt, cfg: cfg, schema: opt.Schema, secret: cfg.Password, zombies: map[uint32]bool{}}
	s.q = func(t string) string { return pgx.Identifier{s.schema, t}.Sanitize() }
	s.more = make([]*pgx.Conn, opt.Connections-1)
	s.slots = make(chan **pgx.Conn, opt.Connections)
	s.slots <- &s.conn
	for i := range s.more {
		s.slots <- &s.more[i]
	}
	if err := s.connect(ctx, &s.conn); err != nil {
		return nil, s.named(err)
	}
	if opt.CreateSchema {
		err := s.retry(ctx, "creating the schema", func(ctx context.Context, conn *pgx.Conn) error {
			return pgschema.Ensure(ctx, conn, s.schema, !opt.Bulk)
		})
		if err != nil {
			return nil, errors.Join(err, s.Close())
		}
	}
	if err := s.checkSchema(ctx); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	if opt.Bulk {
		if err := s.retry(ctx, "preparing the bulk load", s.prepareBulk); err != nil {
			return nil, errors.Join(err, s.Close())
		}
	}
	return s, nil
}

// String names the destination, without the password.
func (s *Sink) String() string {
	return "postgres " + s.Where() + " schema " + pgx.Identifier{s.schema}.Sanitize()
}

// Where is the database as user@host:port/database, the host a socket
// folder when it is one; never the password.
func (s *Sink) Where() string { return pgnet.Where(s.cfg) }

// named says which database err is of, in one line.
func (s *Sink) named(err error) error { return pgnet.Named(s.cfg, err) }

func (s *Sink) connect(ctx context.Context, slot **pgx.Conn) error {
	if *slot != nil && !(*slot).IsClosed() {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.opt.Silence)
	defer cancel()
	c, err := pgx.ConnectConfig(cctx, s.cfg.Copy())
	if err != nil {
		return fmt.Errorf("cannot connect: %w", s.clean(err))
	}
	*slot = c
	s.endZombies(cctx, c)
	return nil
}

// zombie notes the server session pid of a connection dropped after a
// timeout.
func (s *Sink) zombie(pid uint32) {
	s.zmu.Lock()
	defer s.zmu.Unlock()
	s.zombies[pid] = true
}

// endZombies ends, from c, the server sessions of the connections this
// sink dropped: only this role's backfill sessions with those pids.
func (s *Sink) endZombies(ctx context.Context, c *pgx.Conn) {
	s.zmu.Lock()
	pids := make([]int64, 0, len(s.zombies))
	for pid := range s.zombies {
		pids = append(pids, int64(pid))
	}
	clear(s.zombies)
	s.zmu.Unlock()
	if len(pids) == 0 {
		return
	}
	// Best effort: a session left is ended by the server's own timeouts.
	_, _ = c.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE pid = ANY($1) AND usename = current_user AND application_name = 'backfill'`, pids)
}

// checkSchema tells a missing schema apart from other failures; a
// connection lost meanwhile is tried again, as a bucket's is.
func (s *Sink) checkSchema(ctx context.Context) error {
	var schemaErr error
	err := s.retry(ctx, "checking the schema", func(ctx context.Context, conn *pgx.Conn) error {
		schemaErr = s.checkSchemaOn(ctx, conn)
		var se *schemaError
		if errors.As(schemaErr, &se) {
			return nil // the schema's state: no retry cures it
		}
		return schemaErr
	})
	if err != nil {
		return err
	}
	if schemaErr != nil {
		return s.named(schemaErr)
	}
	return nil
}

// schemaError is a schema that lacks a table or a column.
type schemaError struct{ error }

func (s *Sink) checkSchemaOn(ctx context.Context, conn *pgx.Conn) error {
	var missing []string
	for _, t := range []string{"measurements", "reports", "dead_letters", "input_dead_letters", "ledger", "measurement_ids", "measurement_identities"} {
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s.q(t)).Scan(&ok); err != nil {
			return s.clean(err)
		}
		if !ok {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return &schemaError{fmt.Errorf("schema %s lacks %s: run `backfill schema` or pass --create-schema",
			pgx.Identifier{s.schema}.Sanitize(), strings.Join(missing, ", "))}
	}
	for _, c := range [][2]string{{"dead_letters", "kind"}, {"dead_letters", "measurement_uids"}, {"ledger", "rejects"}, {"ledger", "notices"}, {"ledger", "rejects_by_reason"}, {"ledger", "input"}, {"ledger", "measurement_uid"}} {
		var ok bool
		err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = to_regclass($1) AND attname = $2 AND NOT attisdropped)`,
			s.q(c[0]), c[1]).Scan(&ok)
		if err != nil {
			return s.clean(err)
		}
		if !ok {
			return &schemaError{fmt.Errorf("schema %s was made by an older backfill (%s has no column %s): run `backfill schema` to upgrade it",
				pgx.Identifier{s.schema}.Sanitize(), c[0], c[1])}
		}
	}
	return nil
}

// Close implements sink.Sink; no call may be under way.
func (s *Sink) Close() error {
	s.zmu.Lock()
	left := len(s.zombies) > 0
	s.zmu.Unlock()
	if left {
		// The sessions of connections dropped after a timeout may still
		// hold their bucket's locks (a COPY waiting for data that never
		// comes is not idle, so the server does not end it): end them
		// now, not at the next run's expense.
		ctx, cancel := context.WithTimeout(context.Background(), s.opt.Silence)
		if c, err := pgx.ConnectConfig(ctx, s.cfg.Copy()); err == nil {
			s.endZombies(ctx, c)
			_ = c.Close(ctx) // a connection of its own, for that alone
		}
		cancel()
	}
	err := closeConn(&s.conn)
	for i := range s.more {
		err = errors.Join(err, closeConn(&s.more[i]))
	}
	return err
}

func closeConn(slot **pgx.Conn) error {
	if *slot == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := (*slot).Close(ctx)
	*slot = nil
	return err
}

// Conn is the sink's first connection, for tools and tests.
func (s *Sink) Conn() *pgx.Conn { return s.conn }

// committed asks q whether the ledger holds the bucket committed with m's
// fingerprint, scheme and ndx policy.
func (s *Sink) committed(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, m stamped.Meta) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT FROM `+s.q("ledger")+` WHERE bucket = $1 AND status = 'committed'
		AND input_fingerprint = $2 AND counter_bits = $3 AND sha1_offset = $4 AND ndx_policy = $5 AND key_table = $6)`,
		m.Bucket, m.Fingerprint, m.Scheme.CounterBits, m.Scheme.SHA1Offset, m.NdxPolicy, m.Scheme.Table).Scan(&ok)
	return ok, err
}

// Begin implements sink.Sink. The writer keeps the bucket's reports and
// dead letters in memory (the measurements are made from the reports as
// they are COPYed), so Commit can run the transaction again after a fault.
func (s *Sink) Begin(ctx context.Context, m stamped.Meta) (sink.BucketWriter, error) {
	if _, err := time.Parse(time.DateOnly, m.Bucket); err != nil {
		return nil, fmt.Errorf("pgcopy: bucket %q: %w", m.Bucket, err)
	}
	return &bucketWriter{s: s, m: m, started: time.Now()}, nil
}

type bucketWriter struct {
	s       *Sink
	m       stamped.Meta
	started time.Time
	reports []stamped.Report
	dead    []deadletter.Record
	// withdrawn are the withdrawals of the attempt under way, the Sink's
	// once it commits.
	withdrawn []sink.Withdrawal
	// was are the reports that kept their IDs in the bucket's committed
	// version, as the attempt under way found it.
	was []stamped.ManifestEntry
	// floor and floorMsg are, by report, the verdicts the bucket came
	// with (a plan's, settled by check) and their collision messages: a
	// report keeps its verdict, or loses to a report that sorts earlier
	// still.
	floor, floorMsg []string
}

// takeVerdicts moves the verdicts the bucket's reports came with, and
// their collision records, to floor and floorMsg.
func (w *bucketWriter) takeVerdicts() {
	w.floor, w.floorMsg = make([]string, len(w.reports)), make([]string, len(w.reports))
	rejected := map[string]int{}
	for i := range w.reports {
		if w.reports[i].RejectedBy != "" {
			w.floor[i] = w.reports[i].RejectedBy
			rejected[w.reports[i].Textname] = i
		}
	}
	if len(rejected) == 0 {
		return
	}
	dead := w.dead[:0:0]
	for _, d := range w.dead {
		if i, ok := rejected[d.Textname]; ok && d.Reason == deadletter.Collision {
			w.floorMsg[i] = d.Message
			continue
		}
		dead = append(dead, d)
	}
	w.dead = dead
}

// withFloor returns winners and msgs with the verdicts the bucket came
// with where they sort first.
func (w *bucketWriter) withFloor(winners, msgs []string) ([]string, []string) {
	for i, f := range w.floor {
		if f != "" && (winners[i] == "" || f < winners[i]) {
			winners[i], msgs[i] = f, w.floorMsg[i]
		}
	}
	return winners, msgs
}

// Withdrawn implements sink.Withdrawer.
func (s *Sink) Withdrawn() []sink.Withdrawal {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return slices.Clone(s.withdrawn)
}

// committedBy records a bucket this sink committed and what its commit
// withdrew.
func (s *Sink) committedBy(w *bucketWriter) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.mine == nil {
		s.mine = map[string]map[string]bool{}
	}
	kept := make(map[string]bool, len(w.was))
	for _, r := range w.was {
		kept[r.Textname] = true
	}
	s.mine[w.m.Bucket] = kept
	s.withdrawn = append(s.withdrawn, w.withdrawn...)
}

// isMine reports whether this sink committed the bucket.
func (s *Sink) isMine(bucket string) bool {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, ok := s.mine[bucket]
	return ok
}

// published reports whether the report of the bucket kept IDs published
// before this sink's run: it did if another run committed the bucket, or
// if the bucket's version before this sink wrote it kept them.
func (s *Sink) published(bucket, textname string) bool {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	kept, ok := s.mine[bucket]
	return !ok || kept[textname]
}

func (w *bucketWriter) Report(r *stamped.Report) error {
	w.reports = append(w.reports, *r)
	return nil
}

func (w *bucketWriter) DeadLetter(d deadletter.Record) error {
	w.dead = append(w.dead, d)
	return nil
}

func (w *bucketWriter) Abort() error {
	w.reports, w.dead = nil, nil
	return nil
}

// Commit implements sink.BucketWriter.
func (w *bucketWriter) Commit(ctx context.Context, c stamped.Counts) (stamped.Counts, error) {
	var out stamped.Counts
	w.takeVerdicts()
	err := w.s.retry(ctx, "bucket "+w.m.Bucket, func(ctx context.Context, conn *pgx.Conn) error {
		var err error
		if w.s.opt.Bulk {
			out, err = w.s.commitBulk(ctx, conn, w, c)
		} else {
			out, err = w.s.commit(ctx, conn, w, c)
		}
		return err
	})
	var we *sink.WithdrawError
	if err != nil && !errors.Is(err, sink.ErrSkipped) && ctx.Err() == nil && !errors.As(err, &we) {
		w.s.recordFailure(w, err)
	}
	w.Abort()
	return out, err
}

// recordFailure marks a bucket that never committed as failed in the
// ledger; a committed one keeps its row (its data is intact).
func (s *Sink) recordFailure(w *bucketWriter, failure error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	slot, err := s.take(ctx)
	if err != nil {
		return
	}
	defer s.give(slot)
	if s.connect(ctx, slot) != nil {
		return
	}
	// Best effort: the run reports the failure itself.
	_, _ = (*slot).Exec(ctx, `INSERT INTO `+s.q("ledger")+` AS l (bucket, input_fingerprint, counter_bits, sha1_offset, ndx_policy,
			status, error, started_at, finished_at, version, key_table, input)
		VALUES ($1, $2, $3, $4, $5, 'failed', $6, $7, clock_timestamp(), $8, $9, $10)
		ON CONFLICT (bucket) DO UPDATE SET status = 'failed', error = EXCLUDED.error, started_at = EXCLUDED.started_at,
			finished_at = EXCLUDED.finished_at, input_fingerprint = EXCLUDED.input_fingerprint, version = EXCLUDED.version,
			input = EXCLUDED.input
		WHERE l.status <> 'committed'`,
		w.m.Bucket, w.m.Fingerprint, w.m.Scheme.CounterBits, w.m.Scheme.SHA1Offset, w.m.NdxPolicy,
		s.clean(failure).Error(), w.started, w.m.Version, w.m.Scheme.Table, w.m.Source)
}

// clean returns err with the password taken out of its message.
func (s *Sink) clean(err error) error {
	if err == nil || s.secret == "" || !strings.Contains(err.Error(), s.secret) {
		return err
	}
	return &redacted{msg: strings.ReplaceAll(err.Error(), s.secret, "xxxxx"), err: err}
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }

// Table names a table of the schema, quoted as SQL takes it.
func (s *Sink) Table(name string) string { return s.q(name) }
