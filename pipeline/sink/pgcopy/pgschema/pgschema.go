// Package pgschema is the PostgreSQL output's tables: their definitions
// (and the columns later versions added), the keys and indexes a bulk load
// builds at its end, the schema made once under its advisory lock however
// many runs start at once, and the schema names the server can hold.
package pgschema

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Default is the schema the tables live in unless told otherwise.
const Default = "backfill"

// The tables, in the schema of the sink:
//
//	measurements  ooid bigint PK, bucket date, report int, ndx int
//	reports       bucket date, seq int (PK with bucket), textname, ts, ts_source,
//	              counter_base, n, span int4multirange, container, offset,
//	              size, sha1 bytea, rejected_by
//	dead_letters  bucket, seq (NULL for collision records), file, textname,
//	              offset, reason, kind (reject or notice), message,
//	              measurement_uids (the uids OONI gives the bytes the
//	              record covers that no row carries; NULL for none)
//	input_dead_letters file, reason, kind, message: the input's folders
//	              that the last run did not read (not bucket folders)
//	ledger        bucket PK, input_fingerprint, input (the folder read), counter_bits, sha1_offset, key_table,
//	              ndx_policy, counts (dead letters, rejects and notices, by
//	              reason), status, error, started_at, finished_at,
//	              version
//	measurement_identities bucket, report, ndx, content_hash bytea (15
//	              bytes; null: raw bytes not read), uid_date text (null: no measurement_uid): OONI's
//	              identity of every measurement of a bucket loaded with
//	              --measurement-uid, collision losers' too
//	measurement_ids (view) ooid bigint, textname text, ndx integer, bucket_date date,
//	              measurement_uid text, content_hash text (null without
//	              --measurement-uid)
//
// A measurement row names its report by (bucket, seq): the report's place
// in its bucket, which a rerun of the bucket gives again. report.span is the
// report's counters, [counter_base, counter_base+n) modulo 2^counter_bits,
// as one range or, where it wraps, two.
func tables(schema string) []string {
	q := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	return []string{
		`CREATE SCHEMA IF NOT EXISTS ` + pgx.Identifier{schema}.Sanitize(),
		`CREATE TABLE IF NOT EXISTS ` + q("measurements") + ` (
			ooid   bigint  NOT NULL,
			bucket date    NOT NULL,
			report integer NOT NULL,
			ndx    integer NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS ` + q("reports") + ` (
			bucket       date    NOT NULL,
			seq          integer NOT NULL,
			textname     text    NOT NULL,
			ts           bigint  NOT NULL,
			ts_source    text    NOT NULL,
			counter_base integer NOT NULL,
			n            integer NOT NULL,
			span         int4multirange NOT NULL,
			container    text    NOT NULL,
			"offset"     bigint  NOT NULL,
			size         bigint  NOT NULL,
			sha1         bytea,
			rejected_by  text)`,
		`CREATE TABLE IF NOT EXISTS ` + q("measurement_identities") + ` (
			bucket       date    NOT NULL,
			report       integer NOT NULL,
			ndx          integer NOT NULL,
			content_hash bytea,
			uid_date     text)`,
		`CREATE TABLE IF NOT EXISTS ` + q("dead_letters") + ` (
			bucket   date    NOT NULL,
			seq      integer,
			file     text    NOT NULL,
			textname text    NOT NULL,
			"offset" bigint  NOT NULL,
			reason   text    NOT NULL,
			kind     text    NOT NULL DEFAULT 'reject' CHECK (kind IN ('reject', 'notice')),
			message  text    NOT NULL,
			measurement_uids text[])`,
		`CREATE TABLE IF NOT EXISTS ` + q("input_dead_letters") + ` (
			file     text    NOT NULL,
			reason   text    NOT NULL,
			kind     text    NOT NULL CHECK (kind IN ('reject', 'notice')),
			message  text    NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS ` + q("ledger") + ` (
			bucket            date     PRIMARY KEY,
			input_fingerprint text     NOT NULL,
			input             text     NOT NULL DEFAULT '',
			counter_bits      smallint NOT NULL,
			sha1_offset       smallint NOT NULL,
			key_table         text     NOT NULL DEFAULT '',
			ndx_policy        text     NOT NULL,
			reports           bigint   NOT NULL DEFAULT 0,
			measurements      bigint   NOT NULL DEFAULT 0,
			dead_letters      bigint   NOT NULL DEFAULT 0,
			dead_letters_by_reason jsonb NOT NULL DEFAULT '{}',
			rejects           bigint   NOT NULL DEFAULT 0,
			notices           bigint   NOT NULL DEFAULT 0,
			rejects_by_reason jsonb    NOT NULL DEFAULT '{}',
			bytes_in          bigint   NOT NULL DEFAULT 0,
			bytes_out         bigint   NOT NULL DEFAULT 0,
			status            text     NOT NULL CHECK (status IN ('committed', 'failed')),
			error             text,
			started_at        timestamptz NOT NULL,
			finished_at       timestamptz,
			version           text     NOT NULL)`,
		// Schemas made before records had a kind: their records count as
		// rejects until their buckets are loaded again.
		`ALTER TABLE ` + q("dead_letters") + ` ADD COLUMN IF NOT EXISTS kind text NOT NULL DEFAULT 'reject' CHECK (kind IN ('reject', 'notice'))`,
		`ALTER TABLE ` + q("ledger") + ` ADD COLUMN IF NOT EXISTS rejects bigint NOT NULL DEFAULT 0`,
		`ALTER TABLE ` + q("ledger") + ` ADD COLUMN IF NOT EXISTS key_table text NOT NULL DEFAULT ''`,
		`ALTER TABLE ` + q("ledger") + ` ADD COLUMN IF NOT EXISTS notices bigint NOT NULL DEFAULT 0`,
		`ALTER TABLE ` + q("ledger") + ` ADD COLUMN IF NOT EXISTS rejects_by_reason jsonb NOT NULL DEFAULT '{}'`,
		`ALTER TABLE ` + q("ledger") + ` ADD COLUMN IF NOT EXISTS input text NOT NULL DEFAULT ''`,
		`ALTER TABLE ` + q("ledger") + ` ADD COLUMN IF NOT EXISTS measurement_uid boolean NOT NULL DEFAULT false`,
		`ALTER TABLE ` + q("measurement_identities") + ` ALTER COLUMN content_hash DROP NOT NULL`,
		`ALTER TABLE ` + q("dead_letters") + ` ADD COLUMN IF NOT EXISTS measurement_uids text[]`,
		`UPDATE ` + q("ledger") + ` SET rejects = dead_letters, rejects_by_reason = dead_letters_by_reason
			WHERE rejects = 0 AND notices = 0 AND dead_letters > 0`,
		`CREATE INDEX IF NOT EXISTS dead_letters_bucket ON ` + q("dead_letters") + ` (bucket)`,
		// Schemas made before the collision lookups used a btree on ts had
		// two GiST indexes over (ts, span), costly to keep at every report.
		`ALTER TABLE ` + q("reports") + ` DROP CONSTRAINT IF EXISTS reports_kept_ids_disjoint`,
		`DROP INDEX IF EXISTS ` + pgx.Identifier{schema, "reports_ids"}.Sanitize(),
		`CREATE OR REPLACE VIEW ` + q("measurement_ids") + ` AS
			SELECT m.ooid, r.textname, m.ndx, m.bucket AS bucket_date,
				CASE WHEN i.uid_date IS NOT NULL THEN '01' || i.uid_date || encode(i.content_hash, 'hex') END AS measurement_uid,
				encode(i.content_hash, 'hex') AS content_hash
			FROM ` + q("measurements") + ` m
			JOIN ` + q("reports") + ` r ON r.bucket = m.bucket AND r.seq = m.report
			LEFT JOIN ` + q("measurement_identities") + ` i ON i.bucket = m.bucket AND i.report = m.report AND i.ndx = m.ndx`,
	}
}

// constraint is an index or constraint that a bulk load builds after the
// rows are in.
type constraint struct {
	table, name, ddl string
	isConstraint     bool // else an index
}

func constraints(schema string) []constraint {
	q := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	return []constraint{
		{"measurements", "measurements_pkey", `ALTER TABLE ` + q("measurements") + ` ADD CONSTRAINT measurements_pkey PRIMARY KEY (ooid)`, true},
		{"reports", "reports_pkey", `ALTER TABLE ` + q("reports") + ` ADD CONSTRAINT reports_pkey PRIMARY KEY (bucket, seq)`, true},
		{"measurement_identities", "measurement_identities_pkey", `ALTER TABLE ` + q("measurement_identities") +
			` ADD CONSTRAINT measurement_identities_pkey PRIMARY KEY (bucket, report, ndx)`, true},
		// The collision lookups: every report of a timestamp, rejected ones
		// too. Few reports share a timestamp, so a btree finds them and
		// their spans are compared row by row. (Two kept measurements never
		// share an ID: measurements_pkey refuses it, whatever the reports.)
		{"reports", "reports_ts", `CREATE INDEX IF NOT EXISTS reports_ts ON ` + q("reports") + ` (ts)`, false},
		// The reports whose winner is in a given bucket.
		{"reports", "reports_winner_bucket", `CREATE INDEX IF NOT EXISTS reports_winner_bucket ON ` + q("reports") +
			` (left(rejected_by, 10)) WHERE rejected_by IS NOT NULL`, false},
	}
}

// Create creates the schema, its tables, indexes, constraints and
// view where they are missing. It is idempotent, and it completes a bulk
// load that stopped before building its indexes.
func Create(ctx context.Context, c *pgx.Conn, schema string) error {
	return Ensure(ctx, c, schema, true)
}

// Ensure creates the tables, and with constraints their indexes and
// constraints, where they are missing, holding the schema's advisory lock
// (of the session): of many runs started at once on an empty database one
// creates and the others, waiting, find it done. (IF NOT EXISTS alone
// races: two CREATEs of one name both pass the check, and one fails on the
// catalogue's unique index.) Each statement is its own transaction, as
// before: one transaction over them all would hold a table's lock while
// waiting for another's, which loads under way hold, and deadlock with
// them.
func Ensure(ctx context.Context, c *pgx.Conn, schema string, constraints bool) (err error) {
	if err := CheckName(schema); err != nil {
		return err
	}
	key := "backfill schema " + schema
	if _, err := c.Exec(ctx, `SELECT pg_advisory_lock(hashtext($1), 1)`, key); err != nil {
		return err
	}
	defer func() {
		// A lost connection releases the lock with the session.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, uerr := c.Exec(uctx, `SELECT pg_advisory_unlock(hashtext($1), 1)`, key)
		err = errors.Join(err, uerr)
	}()
	if err := createTables(ctx, c, schema); err != nil {
		return err
	}
	if constraints {
		return BuildConstraints(ctx, c, schema, Build{})
	}
	return nil
}

func createTables(ctx context.Context, c *pgx.Conn, schema string) error {
	for _, s := range tables(schema) {
		if _, err := c.Exec(ctx, s); err != nil {
			return fmt.Errorf("creating schema %s: %w", pgx.Identifier{schema}.Sanitize(), err)
		}
	}
	return nil
}

// Build says how BuildConstraints builds the indexes, in the session's
// settings; the zero Build sizes the memory to the data and leaves the
// server's parallelism.
type Build struct {
	// Memory is the session's maintenance_work_mem for the builds, in
	// bytes: AutoMemory (0) sizes it to the measurements table, ServerMemory
	// leaves the server's setting.
	Memory int64
	// Workers, when set, is the session's max_parallel_maintenance_workers:
	// the processes that scan and sort beside the one that builds (nil
	// leaves the server's setting). 0 builds in one process, the quicker on
	// a server with one core: there the workers share it, and their sorted
	// runs go through temporary files to be merged.
	Workers *int
	// Log, when set, receives a line before each build.
	Log func(string, ...any)
}

// Values of Build.Memory that are not a size.
const (
	AutoMemory   = 0
	ServerMemory = -1
)

const (
	// MaxAutoMemory bounds what AutoMemory asks of the server for one
	// session: past it the key's sort runs through temporary files, as
	// with the server's own setting.
	MaxAutoMemory = 1 << 30
	// sortBytesPerHeapByte is the sort's memory for the measurements' key
	// per byte of their table: 223 MB for 159 MB (3.2 M rows of 52 bytes,
	// each row of the sort about 70 bytes), with a margin.
	sortBytesPerHeapByte = 1.5
)

// BuildConstraints adds the missing indexes and constraints, logging each,
// in the session settings b gives (reset after).
func BuildConstraints(ctx context.Context, c *pgx.Conn, schema string, b Build) (err error) {
	var reset []string
	applied := false
	defer func() {
		if len(reset) > 0 && ctx.Err() == nil {
			_, rerr := c.Exec(ctx, strings.Join(reset, "; "))
			err = errors.Join(err, rerr)
		}
	}()
	for _, k := range constraints(schema) {
		var exists bool
		table := pgx.Identifier{schema, k.table}.Sanitize()
		err := c.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_constraint WHERE conname = $1 AND conrelid = to_regclass($2))
			OR EXISTS (SELECT FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid WHERE x.relname = $1 AND i.indrelid = to_regclass($2))`,
			k.name, table).Scan(&exists)
		if err != nil {
			return err
		}
		if exists {
			continue
		}
		if !applied { // the settings, once, where there is something to build
			applied = true
			if reset, err = b.apply(ctx, c, schema); err != nil {
				return err
			}
		}
		if b.Log != nil {
			b.Log("building %s on %s", k.name, table)
		}
		if _, err := c.Exec(ctx, k.ddl); err != nil {
			return fmt.Errorf("building %s on %s: %w", k.name, table, err)
		}
	}
	return nil
}

// apply sets the session's settings for the builds and returns the
// statements that set them back as they were.
func (b Build) apply(ctx context.Context, c *pgx.Conn, schema string) ([]string, error) {
	var mem, heap int64
	var workers int
	if err := c.QueryRow(ctx, `SELECT (SELECT setting::bigint * 1024 FROM pg_settings WHERE name = 'maintenance_work_mem'),
		current_setting('max_parallel_maintenance_workers')::int, coalesce(pg_relation_size(to_regclass($1)), 0)`,
		pgx.Identifier{schema, "measurements"}.Sanitize()).Scan(&mem, &workers, &heap); err != nil {
		return nil, err
	}
	var reset []string
	want := b.Memory
	if want == AutoMemory {
		want = min(max(mem, int64(float64(heap)*sortBytesPerHeapByte)), max(mem, MaxAutoMemory))
	}
	if want != ServerMemory && want != mem {
		if _, err := c.Exec(ctx, fmt.Sprintf("SET maintenance_work_mem = '%dkB'", max(want/1024, 1024))); err != nil {
			return nil, err
		}
		reset = append(reset, fmt.Sprintf("SET maintenance_work_mem = '%dkB'", mem/1024))
	}
	if b.Workers != nil && *b.Workers != workers {
		if _, err := c.Exec(ctx, fmt.Sprintf("SET max_parallel_maintenance_workers = %d", *b.Workers)); err != nil {
			return reset, err
		}
		reset = append(reset, fmt.Sprintf("SET max_parallel_maintenance_workers = %d", workers))
	}
	return reset, nil
}

// analyzed lists, table by table, the columns Analyze gathers statistics
// on: those the tool's own statements filter, join and sort on (every
// column where that list is empty). The reports' texts, ranges and
// checksums are two thirds of their ANALYZE (0.25 of 0.35 s for 76,800
// reports), and no statement of the tool asks the planner about them.
var analyzed = []struct{ table, columns string }{
	{"measurements", ""},
	{"reports", "bucket, seq, ts, n, rejected_by"},
	{"measurement_identities", "bucket, report, ndx"},
	{"dead_letters", ""},
	{"ledger", ""},
}

// Analyze gathers the statistics the tool's statements are planned with,
// after a bulk load: every column of the measurements, and of the other
// large tables the columns that analyzed names. An ANALYZE limited to
// columns leaves the server's count of rows changed since the table was
// last analyzed in full, so autovacuum, where it runs, still analyzes
// every column later (and the expression of reports_winner_bucket, which
// only a full ANALYZE reaches).
func Analyze(ctx context.Context, c *pgx.Conn, schema string) error {
	for _, a := range analyzed {
		s := `ANALYZE ` + pgx.Identifier{schema, a.table}.Sanitize()
		if a.columns != "" {
			s += ` (` + a.columns + `)`
		}
		if _, err := c.Exec(ctx, s); err != nil {
			return fmt.Errorf("analyzing %s: %w", pgx.Identifier{schema, a.table}.Sanitize(), err)
		}
	}
	return nil
}

// DropConstraints removes the indexes and constraints a bulk load builds
// at the end.
func DropConstraints(ctx context.Context, c *pgx.Conn, schema string) error {
	for _, k := range constraints(schema) {
		table := pgx.Identifier{schema, k.table}.Sanitize()
		s := `ALTER TABLE ` + table + ` DROP CONSTRAINT IF EXISTS ` + pgx.Identifier{k.name}.Sanitize()
		if !k.isConstraint {
			s = `DROP INDEX IF EXISTS ` + pgx.Identifier{schema, k.name}.Sanitize()
		}
		if _, err := c.Exec(ctx, s); err != nil {
			return fmt.Errorf("dropping %s: %w", k.name, err)
		}
	}
	return nil
}

// CheckName refuses names Postgres would truncate or cannot store;
// any other name is quoted wherever it is used.
func CheckName(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty schema name")
	case len(s) > 63:
		return fmt.Errorf("schema name %q: longer than 63 bytes", s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return fmt.Errorf("schema name %q: holds a NUL byte", s)
		}
	}
	return nil
}
