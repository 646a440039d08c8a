// Package records writes the database records of Cumulus workflow
// messages as Cumulus v21's message path does (sfEventSqsToDbRecords,
// writeRecords): the execution, the PDR and each granule with its files
// and execution join row, under the same write constraints, on a database
// with Cumulus's schema. Granule IDs are unique across collections inside
// the database's transactions, where Cumulus v21 checks them with a read
// outside its write.
package records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/backfill-dev/backfill/cumulus/cmr"
	"github.com/backfill-dev/backfill/cumulus/granulefiles"
	"github.com/backfill-dev/backfill/cumulus/jsvalue"
)

// Options configure a Writer.
type Options struct {
	Files  granulefiles.Source // where CMR files and unsized files are read; nil: nowhere
	Region string              // AWS region of execution URLs; "" is us-east-1
	Now    func() int64        // the clock, in milliseconds since the epoch
	Warn   func(string)        // warnings (a CMR file that does not exist); nil: dropped
}

// Writer writes messages' records.
type Writer struct {
	pool *pgxpool.Pool
	q    querier // the pool, or a batch's transaction
	// direct is a batch's transaction itself, for lookups and the
	// statements that cannot fail on their data (safeIn): no savepoint
	// (should one fail after all, the batch's transaction is aborted and
	// the batch is written again message by message); nil outside a batch.
	direct pgx.Tx
	// found holds the cumulus_ids a batch's lookups found (nil outside a
	// batch): a row's cumulus_id does not change, and the batch's
	// messages look up the same collections and providers again and again.
	found  map[string]int64
	files  granulefiles.Source
	region string
	now    func() int64
	warn   func(string)

	beforeMessage func(i int) // tests: called before each message of a batch
	fallbacks     *atomic.Int64
}

// New returns a Writer on pool.
func New(pool *pgxpool.Pool, opt Options) *Writer {
	w := &Writer{pool: pool, q: pool, files: opt.Files, region: opt.Region, now: opt.Now, warn: opt.Warn, fallbacks: new(atomic.Int64)}
	if w.region == "" {
		w.region = "us-east-1"
	}
	if w.warn == nil {
		w.warn = func(string) {}
	}
	return w
}

// Input is one Cumulus message, with the execution's start and stop dates
// (milliseconds) that Cumulus asks Step Functions for: from the event when
// the message came in one, else nil.
type Input struct {
	Message map[string]any
	// Exception is the message's exception as the input's text held it,
	// for its key order (see message.Envelope.Exception); nil when unknown.
	Exception json.RawMessage
	StartDate *int64
	StopDate  *int64
}

// Outcome is what became of one granule.
type Outcome int

const (
	Written Outcome = iota // the record was written
	Dropped                // the write constraints kept the existing record
	Failed                 // an error, in GranuleResult.Err
	// MarkedFailed is a granule of a final status that failed schema
	// validation: as in Cumulus, its existing record was set to status
	// failed with the validation error (GranuleResult.Err), and the
	// message goes to the archive.
	MarkedFailed
)

// GranuleResult is one granule's outcome.
type GranuleResult struct {
	GranuleID string
	Outcome   Outcome
	Err       error
}

// Result is a message's outcome.
type Result struct {
	Granules []GranuleResult
}

// AggregateError is the error of a message some of whose granules failed;
// the others are written.
type AggregateError struct{ Errs []error }

func (e *AggregateError) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		msgs[i] = err.Error()
	}
	return "AggregateError: " + strings.Join(msgs, "; ")
}

// RecordDoesNotExist is Cumulus's lookup error.
type RecordDoesNotExist struct {
	Table string
	Where string // the identifiers as JSON
}

func (e *RecordDoesNotExist) Error() string {
	return fmt.Sprintf("RecordDoesNotExist: Record in %s with identifiers %s does not exist.", e.Table, e.Where)
}

// Write writes one message's records. An error means the message belongs in
// the Dead Letter Archive (records written before it stay written, as in
// Cumulus); a dropped granule is not an error.
func (w *Writer) Write(ctx context.Context, in Input) (Result, error) {
	m := in.Message
	var res Result
	meta := jsvalue.Obj(m["meta"])
	cmeta := jsvalue.Obj(m["cumulus_meta"])

	var collectionCID, asyncCID, parentCID *int64
	var err error
	named := false
	if c := jsvalue.Obj(meta["collection"]); jsvalue.Truthy(c["name"]) && jsvalue.Truthy(c["version"]) {
		named = true
		if collectionCID, err = w.lookup(ctx, "collections", map[string]any{"name": c["name"], "version": c["version"]}); err != nil {
			return res, err
		}
	}
	if id, ok := cmeta["asyncOperationId"]; ok && id != nil {
		if asyncCID, err = w.lookup(ctx, "async_operations", map[string]any{"id": id}); err != nil {
			return res, err
		}
		if asyncCID == nil {
			return res, &UnmetRequirementsError{Missing: "async operation " + jsvalue.String(id, true) + " (cumulus_meta.asyncOperationId) is not in async_operations"}
		}
	}
	if arn, ok := cmeta["parentExecutionArn"]; ok && arn != nil {
		if parentCID, err = w.lookup(ctx, "executions", map[string]any{"arn": arn}); err != nil {
			return res, err
		}
		if parentCID == nil {
			return res, &UnmetRequirementsError{Missing: "parent execution " + jsvalue.String(arn, true) + " (cumulus_meta.parentExecutionArn) is not in executions"}
		}
	}
	if named && collectionCID == nil {
		c := jsvalue.Obj(meta["collection"])
		return res, &UnmetRequirementsError{Missing: "collection " + jsvalue.String(c["name"], true) + "___" + jsvalue.String(c["version"], true) +
			" (meta.collection name___version) is not in collections"}
	}

	writeExec, writeGranules, writePDR := recordFlags(m)
	now := w.now()
	var execCID *int64
	if writeExec {
		if execCID, err = w.writeExecution(ctx, m, now, collectionCID, asyncCID, parentCID); err != nil {
			return res, err
		}
	}
	var providerCID *int64
	if id, ok := jsvalue.Obj(meta["provider"])["id"]; ok && id != nil {
		if providerCID, err = w.lookup(ctx, "providers", map[string]any{"name": id}); err != nil {
			return res, err
		}
	}
	if writePDR {
		if err := w.writePDR(ctx, m, now, collectionCID, providerCID, execCID); err != nil {
			return res, err
		}
	}
	if writeGranules {
		return w.writeGranules(ctx, in, execCID)
	}
	if execCID != nil {
		return res, w.writeJoinsOnly(ctx, m, *execCID)
	}
	return res, nil
}

// UnmetRequirementsError is Cumulus's error for a message whose
// collection, async operation or parent execution is not in the database:
// nothing is written and the message goes to the archive. Cumulus's
// message, word for word, names nothing; Missing says what was looked for
// and not found, after it.
type UnmetRequirementsError struct {
	Missing string
}

func (e *UnmetRequirementsError) Error() string {
	const cumulus = "UnmetRequirementsError: Could not satisfy requirements for writing records to PostgreSQL. No records written to the database."
	if e.Missing == "" {
		return cumulus
	}
	return cumulus + " Missing: " + e.Missing + "."
}

// recordFlags reads which records the message's workflow writes
// (cumulus_meta.sf_event_sqs_to_db_records_types[workflow][status]; all
// when absent or when meta.reportMessageSource is set).
func recordFlags(m map[string]any) (exec, granules, pdr bool) {
	meta := jsvalue.Obj(m["meta"])
	if jsvalue.Truthy(meta["reportMessageSource"]) {
		return true, true, true
	}
	wf := jsvalue.String(meta["workflow_name"], hasKey(meta, "workflow_name"))
	st := jsvalue.String(meta["status"], hasKey(meta, "status"))
	types, ok := jsvalue.Get(m, "cumulus_meta", "sf_event_sqs_to_db_records_types", wf, st)
	if !ok || types == nil {
		return true, true, true
	}
	has := func(t string) bool {
		switch x := types.(type) {
		case []any:
			for _, e := range x {
				if e == t {
					return true
				}
			}
		case string:
			return strings.Contains(x, t)
		}
		return false
	}
	return has("execution"), has("granule"), has("pdr")
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

// via is where a statement writing r into table goes: straight into a
// batch's transaction when it cannot fail on its data, else to q.
func (w *Writer) via(r row, table string) querier {
	if w.direct != nil && r.safeIn(table) {
		return w.direct
	}
	return w.q
}

// lookup returns the cumulus_id of the row matching where, nil when there
// is none.
func (w *Writer) lookup(ctx context.Context, table string, where map[string]any) (*int64, error) {
	if w.direct == nil {
		return lookupIn(ctx, w.pool, table, where)
	}
	key := table + whereJSON(where)
	if id, ok := w.found[key]; ok {
		return &id, nil
	}
	id, err := lookupIn(ctx, w.direct, table, where)
	if id != nil {
		w.found[key] = *id
	}
	return id, err
}

func lookupIn(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, table string, where map[string]any) (*int64, error) {
	var conds []string
	var args []any
	for _, k := range slices.Sorted(maps.Keys(where)) {
		args = append(args, textOf(where[k]))
		conds = append(conds, fmt.Sprintf("%s = $%d", k, len(args)))
	}
	var id int64
	err := q.QueryRow(ctx, "SELECT cumulus_id FROM "+table+" WHERE "+strings.Join(conds, " AND ")+" LIMIT 1", args...).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &id, nil
}

func whereJSON(where map[string]any) string {
	b, _ := json.Marshal(where)
	return string(b)
}

// textOf is a value as node-postgres sends it: text, or nil for NULL.
func textOf(v any) *string {
	var s string
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		s = x
	case float64:
		s = jsvalue.FormatNumber(x)
	case bool:
		s = fmt.Sprint(x)
	case int64:
		s = fmt.Sprint(x)
	case *int64:
		if x == nil {
			return nil
		}
		s = fmt.Sprint(*x)
	case pgLiteral:
		s = string(x)
	default:
		b, _ := json.Marshal(x)
		s = string(b)
	}
	return &s
}

// pgLiteral is a value's text as Cumulus's PostgreSQL driver sends it,
// given whole.
type pgLiteral string

// asDriverSends is v as node-postgres sends it for a jsonb column: a
// top-level array goes as a PostgreSQL array literal (its arrayString),
// which the server reads as JSON: "{}" for an empty array, an error for
// any other; everything else as JSON.
func asDriverSends(v any) any {
	if a, ok := v.([]any); ok {
		return pgLiteral(pgArrayString(a))
	}
	return v
}

// pgArrayString is node-postgres's arrayString: elements quoted and
// escaped, objects as JSON, nested arrays as arrays, null as NULL.
func pgArrayString(a []any) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, e := range a {
		if i > 0 {
			b.WriteByte(',')
		}
		switch x := e.(type) {
		case nil:
			b.WriteString("NULL")
		case []any:
			b.WriteString(pgArrayString(x))
		default:
			t := *textOf(x)
			b.WriteString(`"` + strings.ReplaceAll(strings.ReplaceAll(t, `\`, `\\`), `"`, `\"`) + `"`)
		}
	}
	b.WriteByte('}')
	return b.String()
}

// jsDate is new Date(v) as an ISO string for Postgres; an error for an
// Invalid Date.
func jsDate(v any) (string, error) {
	switch x := v.(type) {
	case float64:
		if ms, ok := cmr.NumberDate(x); ok {
			return cmr.FormatISO(ms), nil
		}
	case string:
		if ms, err := cmr.ParseDate(x); err == nil {
			return cmr.FormatISO(ms), nil
		}
	case bool:
		if x {
			return cmr.FormatISO(1), nil
		}
		return cmr.FormatISO(0), nil
	case nil:
		return cmr.FormatISO(0), nil
	}
	return "", fmt.Errorf("RangeError: Invalid time value: %s", jsvalue.String(v, true))
}

// jsDateMs is new Date(v).getTime().
func jsDateMs(v any) (int64, error) {
	switch x := v.(type) {
	case float64:
		if ms, ok := cmr.NumberDate(x); ok {
			return ms, nil
		}
	case string:
		if ms, err := cmr.ParseDate(x); err == nil {
			return ms, nil
		}
	}
	return 0, fmt.Errorf("RangeError: Invalid time value: %s", jsvalue.String(v, true))
}
